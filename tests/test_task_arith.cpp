#include "runtime/task/task_arith.hpp"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>

#include "runtime/task/reward.hpp"
#include "runtime/text/char_tokenizer.hpp"

namespace asyncrl {
namespace {

TEST(ArithWorkedAnswer, Addition) {
  EXPECT_EQ(arith_worked_answer(47, '+', 385), "7+5+0=12 4+8+1=13 0+3+1=4 #### 432");
  EXPECT_EQ(arith_worked_answer(385, '+', 47), "5+7+0=12 8+4+1=13 3+0+1=4 #### 432");
  EXPECT_EQ(arith_worked_answer(5, '+', 3), "5+3+0=8 #### 8");
  EXPECT_EQ(arith_worked_answer(12, '+', 345), "2+5+0=7 1+4+0=5 0+3+0=3 #### 357");
  // The last carry shows only as the tens digit of the last column sum.
  EXPECT_EQ(arith_worked_answer(999, '+', 1), "9+1+0=10 9+0+1=10 9+0+1=10 #### 1000");
  EXPECT_EQ(arith_worked_answer(0, '+', 0), "0+0+0=0 #### 0");
  EXPECT_EQ(arith_worked_answer(0, '+', 7), "0+7+0=7 #### 7");
}

TEST(ArithWorkedAnswer, SubtractionWithBorrows) {
  EXPECT_EQ(arith_worked_answer(52, '-', 17), "2-7-0=5b 5-1-1=3 #### 35");
  EXPECT_EQ(arith_worked_answer(385, '-', 47), "5-7-0=8b 8-4-1=3 3-0-0=3 #### 338");
  EXPECT_EQ(arith_worked_answer(100, '-', 1), "0-1-0=9b 0-0-1=9b 1-0-1=0 #### 99");
  EXPECT_EQ(arith_worked_answer(10, '-', 9), "0-9-0=1b 1-0-1=0 #### 1");
  EXPECT_EQ(arith_worked_answer(86, '-', 23), "6-3-0=3 8-2-0=6 #### 63");
}

TEST(ArithWorkedAnswer, SubtractionZeroAndNegative) {
  EXPECT_EQ(arith_worked_answer(5, '-', 5), "5-5-0=0 #### 0");
  EXPECT_EQ(arith_worked_answer(0, '-', 0), "0-0-0=0 #### 0");
  EXPECT_EQ(arith_worked_answer(20, '-', 20), "0-0-0=0 2-2-0=0 #### 0");
  EXPECT_EQ(arith_worked_answer(17, '-', 52), "neg 2-7-0=5b 5-1-1=3 #### -35");
  EXPECT_EQ(arith_worked_answer(3, '-', 9), "neg 9-3-0=6 #### -6");
  EXPECT_EQ(arith_worked_answer(0, '-', 100), "neg 0-0-0=0 0-0-0=0 1-0-0=1 #### -100");
}

TEST(ArithWorkedAnswer, RejectsBadInput) {
  EXPECT_THROW(arith_worked_answer(1, '*', 2), std::invalid_argument);
  EXPECT_THROW(arith_worked_answer(-1, '+', 2), std::invalid_argument);
  EXPECT_THROW(arith_worked_answer(1, '-', -2), std::invalid_argument);
}

// Parses "<a><op><b>=?" and returns a op b; fails the test on any other shape.
int64_t true_result(const std::string& q, const arith_options& opt) {
  EXPECT_GE(q.size(), 5u) << q;
  EXPECT_EQ(q.substr(q.size() - 2), "=?") << q;
  auto op_at = q.find_first_of("+-");
  EXPECT_NE(op_at, std::string::npos) << q;
  auto a = q.substr(0, op_at), b = q.substr(op_at + 1, q.size() - 2 - op_at - 1);
  for (const auto& s : {a, b}) {
    EXPECT_GE(static_cast<int>(s.size()), opt.min_digits) << q;
    EXPECT_LE(static_cast<int>(s.size()), opt.max_digits) << q;
    EXPECT_EQ(s.find_first_not_of("0123456789"), std::string::npos) << q;
    EXPECT_TRUE(s.size() == 1 || s[0] != '0') << "leading zero in " << q;
  }
  EXPECT_NE(opt.ops.find(q[op_at]), std::string::npos) << q;
  int64_t x = std::stoll(a), y = std::stoll(b);
  return q[op_at] == '+' ? x + y : x - y;
}

void check_examples(const std::vector<qa_example>& ex, const arith_options& opt) {
  auto tok = char_tokenizer::builtin();
  std::set<std::string> questions;
  for (const auto& e : ex) {
    SCOPED_TRACE(e.question + " -> " + e.answer);
    EXPECT_TRUE(questions.insert(e.question).second) << "duplicate question";
    int64_t want = true_result(e.question, opt);
    EXPECT_EQ(e.ground_truth, std::to_string(want));
    EXPECT_EQ(e.ground_truth, gsm8k_final_answer(e.answer));
    auto extracted = extract_final_answer(e.answer);
    ASSERT_TRUE(extracted.has_value());
    auto got = parse_answer_number(*extracted);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(*got, static_cast<double>(want));
    EXPECT_EQ(score_response(e.answer, e.ground_truth), 1.0);
    for (int32_t id : tok.encode(e.question + e.answer))
      EXPECT_NE(id, tok.unk_id());
  }
}

TEST(GenerateArith, EveryExampleIsCorrect) {
  arith_options opt;  // 1..3 digits, "+-"
  auto ex = generate_arith(opt, 3000, 7);
  ASSERT_EQ(ex.size(), 3000u);
  check_examples(ex, opt);

  arith_options wide{4, 9, "-"};
  check_examples(generate_arith(wide, 500, 8), wide);
  arith_options plus{2, 2, "+"};
  check_examples(generate_arith(plus, 500, 9), plus);
}

TEST(GenerateArith, CoversDigitCountsAndOps) {
  arith_options opt;
  std::set<size_t> lengths;
  int plus = 0, minus = 0, negative = 0;
  for (const auto& e : generate_arith(opt, 2000, 11)) {
    auto op_at = e.question.find_first_of("+-");
    lengths.insert(op_at);
    (e.question[op_at] == '+' ? plus : minus)++;
    negative += e.ground_truth[0] == '-';
  }
  EXPECT_EQ(lengths, (std::set<size_t>{1, 2, 3}));
  EXPECT_GT(plus, 800);
  EXPECT_GT(minus, 800);
  EXPECT_GT(negative, 300);
}

TEST(GenerateArith, PinnedOutputForSeed42) {
  // Pins the PRNG and draw order: a change here silently changes every dataset.
  auto ex = generate_arith(arith_options{}, 6, 42);
  const std::vector<std::pair<std::string, std::string>> want = {
      {"11+4=?", "1+4+0=5 1+0+0=1 #### 15"},
      {"5+605=?", "5+5+0=10 0+0+1=1 0+6+0=6 #### 610"},
      {"746+695=?", "6+5+0=11 4+9+1=14 7+6+1=14 #### 1441"},
      {"789+7=?", "9+7+0=16 8+0+1=9 7+0+0=7 #### 796"},
      {"1+9=?", "1+9+0=10 #### 10"},
      {"7-53=?", "neg 3-7-0=6b 5-0-1=4 #### -46"},
  };
  ASSERT_EQ(ex.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(ex[i].question, want[i].first);
    EXPECT_EQ(ex[i].answer, want[i].second);
  }
}

TEST(GenerateArith, DeterministicPerSeed) {
  arith_options opt;
  auto a = generate_arith(opt, 200, 123);
  auto b = generate_arith(opt, 200, 123);
  auto c = generate_arith(opt, 200, 124);
  int same_as_c = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].question, b[i].question);
    EXPECT_EQ(a[i].answer, b[i].answer);
    same_as_c += a[i].question == c[i].question;
  }
  EXPECT_LT(same_as_c, 20);
  // A shorter run is a prefix of a longer one with the same seed.
  auto shorter = generate_arith(opt, 50, 123);
  for (size_t i = 0; i < shorter.size(); ++i)
    EXPECT_EQ(shorter[i].question, a[i].question);
  EXPECT_TRUE(generate_arith(opt, 0, 1).empty());
}

TEST(GenerateArith, ExhaustsSmallSpaceThenThrows) {
  arith_options one{1, 1, "+"};  // 10 * 10 * 1 questions
  auto all = generate_arith(one, 100, 5);
  std::set<std::string> q;
  for (const auto& e : all)
    q.insert(e.question);
  EXPECT_EQ(q.size(), 100u);
  EXPECT_TRUE(q.count("0+0=?") && q.count("9+9=?"));
  check_examples(all, one);
  EXPECT_THROW(generate_arith(one, 101, 5), std::invalid_argument);
  arith_options two{2, 2, "+-"};  // 90 * 90 * 2
  EXPECT_EQ(generate_arith(two, 16200, 5).size(), 16200u);
  EXPECT_THROW(generate_arith(two, 16201, 5), std::invalid_argument);
}

TEST(GenerateArith, ValidatesOptions) {
  for (const arith_options& bad :
       {arith_options{0, 3, "+-"}, arith_options{3, 2, "+-"}, arith_options{1, 10, "+-"},
        arith_options{1, 3, ""}, arith_options{1, 3, "*"}, arith_options{1, 3, "+*"},
        arith_options{1, 3, "++"}, arith_options{-2, -1, "+"}}) {
    SCOPED_TRACE(std::to_string(bad.min_digits) + ".." + std::to_string(bad.max_digits) + " " +
                 bad.ops);
    EXPECT_THROW(generate_arith(bad, 1, 0), std::invalid_argument);
    EXPECT_THROW(generate_arith_splits(bad, 1, 1, 0), std::invalid_argument);
  }
  EXPECT_NO_THROW(generate_arith(arith_options{9, 9, "-+"}, 10, 0));
}

TEST(GenerateArithSplits, DisjointAndSized) {
  arith_options opt;
  auto s = generate_arith_splits(opt, 1000, 200, 3);
  ASSERT_EQ(s.train.size(), 1000u);
  ASSERT_EQ(s.test.size(), 200u);
  std::set<std::string> train;
  for (const auto& e : s.train)
    train.insert(e.question);
  EXPECT_EQ(train.size(), 1000u);
  for (const auto& e : s.test)
    EXPECT_EQ(train.count(e.question), 0u) << e.question;
  check_examples(s.test, opt);
  // Same seed, same split.
  auto again = generate_arith_splits(opt, 1000, 200, 3);
  for (size_t i = 0; i < s.test.size(); ++i)
    EXPECT_EQ(again.test[i].question, s.test[i].question);
  // The whole small space split in two still has no overlap.
  arith_options one{1, 1, "+"};
  auto full = generate_arith_splits(one, 60, 40, 9);
  std::set<std::string> all;
  for (const auto& e : full.train)
    all.insert(e.question);
  for (const auto& e : full.test)
    all.insert(e.question);
  EXPECT_EQ(all.size(), 100u);
  EXPECT_THROW(generate_arith_splits(one, 60, 41, 9), std::invalid_argument);
  EXPECT_TRUE(generate_arith_splits(opt, 0, 0, 1).train.empty());
}

}  // namespace
}  // namespace asyncrl
