#include "runtime/task/task_tools.hpp"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/task/reward.hpp"
#include "runtime/text/char_tokenizer.hpp"
#include "runtime/tools/builtin_env.hpp"
#include "runtime/tools/calculator.hpp"

namespace asyncrl {
namespace {

void expect_turns(const tool_trace& got, const std::vector<tool_turn>& want) {
  ASSERT_EQ(got.turns.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got.turns[i].model, want[i].model) << "turn " << i;
    EXPECT_EQ(got.turns[i].observation, want[i].observation) << "turn " << i;
  }
}

TEST(ArithToolTrace, TheLeadsExample) {
  auto t = arith_tool_trace({347, 829, 512}, "*+");
  expect_turns(
      t, std::vector<tool_turn>(
             {{"<<347*829>>", "287663\n"}, {"<<287663+512>>", "288175\n"}, {"#### 288175", ""}}));
  // The response text of docs/episodes.md, with '|' for the end-of-turn token.
  EXPECT_EQ(flatten(t, "|"), "<<347*829>>|287663\n<<287663+512>>|288175\n#### 288175");
}

TEST(ArithToolTrace, ProductsBeforeSumsLeftToRight) {
  // The product on the right is computed before it is added.
  expect_turns(arith_tool_trace({12, 34, 56}, "+*"),
               std::vector<tool_turn>(
                   {{"<<34*56>>", "1904\n"}, {"<<12+1904>>", "1916\n"}, {"#### 1916", ""}}));
  // A run of '*' is multiplied out left to right, then each run joins the running value.
  expect_turns(arith_tool_trace({2, 3, 4, 5, 6}, "**-*"),
               std::vector<tool_turn>({{"<<2*3>>", "6\n"},
                                       {"<<6*4>>", "24\n"},
                                       {"<<5*6>>", "30\n"},
                                       {"<<24-30>>", "-6\n"},
                                       {"#### -6", ""}}));
  // A negative running value is written with its sign: the calculator reads "-5-4" as -9.
  expect_turns(
      arith_tool_trace({1, 2, 3, 4}, "-*-"),
      std::vector<tool_turn>(
          {{"<<2*3>>", "6\n"}, {"<<1-6>>", "-5\n"}, {"<<-5-4>>", "-9\n"}, {"#### -9", ""}}));
  // Without a call the trace is only the final answer.
  expect_turns(arith_tool_trace({7}, ""), std::vector<tool_turn>({{"#### 7", ""}}));
}

TEST(ArithToolTrace, RefusesBadInput) {
  EXPECT_THROW(arith_tool_trace({}, ""), std::invalid_argument);
  EXPECT_THROW(arith_tool_trace({1, 2}, ""), std::invalid_argument);
  EXPECT_THROW(arith_tool_trace({1, 2}, "*+"), std::invalid_argument);
  EXPECT_THROW(arith_tool_trace({1, 2}, "/"), std::invalid_argument);
  EXPECT_THROW(arith_tool_trace({999999999999, 999999999999}, "*"), std::overflow_error);
}

TEST(ArithToolTrace, FlattenMarksOnlyTurnsWithAnObservation) {
  tool_trace t;
  t.turns = {{"<<1+1>>", "2\n"}, {"<<x>>", "error: unexpected 'x' at 1\n"}, {"#### 2", ""}};
  EXPECT_EQ(flatten(t, "<eot>"), "<<1+1>><eot>2\n<<x>><eot>error: unexpected 'x' at 1\n#### 2");
  EXPECT_EQ(flatten(tool_trace{}, "<eot>"), "");
}

// A question "t0 op t1 ... =?" split into its terms and ops, checked against the options.
struct parsed_question {
  std::vector<int64_t> terms;
  std::string ops;
};

parsed_question parse_question(const std::string& q, const arith_tools_options& opt) {
  parsed_question p;
  EXPECT_EQ(q.substr(q.size() - 2), "=?") << q;
  std::string digits;
  for (size_t i = 0; i + 2 < q.size(); ++i) {
    const char c = q[i];
    if (c >= '0' && c <= '9') {
      digits += c;
      continue;
    }
    EXPECT_NE(opt.ops.find(c), std::string::npos) << "op '" << c << "' in " << q;
    EXPECT_EQ(static_cast<int>(digits.size()), opt.digits) << q;
    p.terms.push_back(std::stoll(digits));
    p.ops += c;
    digits.clear();
  }
  EXPECT_EQ(static_cast<int>(digits.size()), opt.digits) << q;
  p.terms.push_back(std::stoll(digits));
  // Exactly `digits` digits, so no leading zero.
  for (auto t : p.terms)
    EXPECT_EQ(static_cast<int>(std::to_string(t).size()), opt.digits) << q;
  return p;
}

// Precedence by an accumulator (sum of signed products), in __int128: a different algorithm
// from the generator's, so a shared mistake is unlikely.
int64_t independent_answer(const parsed_question& p) {
  __int128 sum = 0, product = p.terms[0];
  int sign = 1;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const __int128 t = p.terms[i + 1];
    if (p.ops[i] == '*') {
      product *= t;
      continue;
    }
    sum += sign * product;
    sign = p.ops[i] == '+' ? 1 : -1;
    product = t;
  }
  sum += sign * product;
  return static_cast<int64_t>(sum);
}

TEST(ArithTools, EveryTraceReplaysThroughTheCalculator) {
  const arith_tools_options opt;
  const auto problems = generate_arith_tools(opt, 2000, 7);
  const auto tok = char_tokenizer::builtin();
  int three_terms = 0;
  for (const auto& p : problems) {
    SCOPED_TRACE(p.question);
    const auto q = parse_question(p.question, opt);
    ASSERT_GE(static_cast<int>(q.terms.size()), opt.terms_min);
    ASSERT_LE(static_cast<int>(q.terms.size()), opt.terms_max);
    three_terms += q.terms.size() == 3;
    // Hard in the head: a product of two 3-digit terms.
    EXPECT_NE(q.ops.find('*'), std::string::npos);
    EXPECT_EQ(q.terms, p.terms);
    EXPECT_EQ(q.ops, p.ops);
    const int64_t answer = independent_answer(q);
    EXPECT_EQ(p.answer, answer);
    EXPECT_EQ(p.no_tool_answer, "#### " + std::to_string(answer));
    // Each call is answered by the calculator exactly as the trace says; the last turn is the
    // final answer.
    ASSERT_GE(p.trace.turns.size(), 2u);
    for (size_t i = 0; i + 1 < p.trace.turns.size(); ++i) {
      const auto& turn = p.trace.turns[i];
      const auto call = parse_calc_call(turn.model);
      ASSERT_EQ(call.kind, calc_call_kind::call) << turn.model;
      EXPECT_EQ(run_calculator(call.expr), turn.observation) << turn.model;
    }
    const auto& last = p.trace.turns.back();
    EXPECT_EQ(parse_calc_call(last.model).kind, calc_call_kind::final_answer);
    EXPECT_EQ(last.model, "#### " + std::to_string(answer));
    EXPECT_EQ(last.observation, "");
    EXPECT_EQ(score_response(last.model, std::to_string(answer)), 1.0);
    // One call per binary operation.
    EXPECT_EQ(p.trace.turns.size(), q.ops.size() + 1);
    // Everything the model reads or writes is in the character vocabulary.
    for (const auto& turn : p.trace.turns)
      for (auto id : tok.encode(turn.model + turn.observation + p.question))
        ASSERT_NE(id, tok.unk_id()) << turn.model << turn.observation;
  }
  // Both term counts occur.
  EXPECT_GT(three_terms, 500);
  EXPECT_LT(three_terms, 1500);
}

TEST(ArithTools, QuestionsAreUniqueAndDeterministic) {
  const arith_tools_options opt;
  const auto a = generate_arith_tools(opt, 1000, 42);
  const auto b = generate_arith_tools(opt, 1000, 42);
  const auto c = generate_arith_tools(opt, 1000, 43);
  std::set<std::string> questions;
  size_t same_as_c = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    questions.insert(a[i].question);
    EXPECT_EQ(a[i].question, b[i].question);
    EXPECT_EQ(flatten(a[i].trace, "|"), flatten(b[i].trace, "|"));
    same_as_c += a[i].question == c[i].question;
  }
  EXPECT_EQ(questions.size(), a.size());
  EXPECT_LT(same_as_c, 5u);
  // A shorter run is a prefix of a longer one.
  const auto prefix = generate_arith_tools(opt, 100, 42);
  for (size_t i = 0; i < prefix.size(); ++i)
    EXPECT_EQ(prefix[i].question, a[i].question);
}

TEST(ArithTools, SplitsAreDisjointCutsOfOneDraw) {
  const arith_tools_options opt;
  const auto s = generate_arith_tools_splits(opt, 500, 100, 9);
  ASSERT_EQ(s.train.size(), 500u);
  ASSERT_EQ(s.test.size(), 100u);
  std::set<std::string> train;
  for (const auto& p : s.train)
    train.insert(p.question);
  for (const auto& p : s.test)
    EXPECT_EQ(train.count(p.question), 0u) << p.question;
  const auto all = generate_arith_tools(opt, 600, 9);
  EXPECT_EQ(s.train.front().question, all.front().question);
  EXPECT_EQ(s.test.front().question, all[500].question);
  EXPECT_EQ(s.test.back().question, all.back().question);
}

TEST(ArithTools, ExamplesCarryTheChosenAnswer) {
  const arith_tools_options opt;
  const auto problems = generate_arith_tools(opt, 50, 3);
  for (const auto& p : problems) {
    const auto with = to_qa_example(p, tool_answer_style::trace);
    EXPECT_EQ(with.question, p.question);
    EXPECT_EQ(with.answer, flatten(p.trace, kTraceTurnEnd));
    EXPECT_EQ(with.ground_truth, std::to_string(p.answer));
    // The warm start's splitter accepts the trace (it replays every call) and sees the model
    // and tool turns alternate, ending on the final answer.
    const auto spans = split_calculator_trace(with.answer);
    ASSERT_EQ(spans.size(), 2 * p.trace.turns.size() - 1);
    for (size_t i = 0; i < spans.size(); ++i) {
      const auto& turn = p.trace.turns[i / 2];
      EXPECT_EQ(spans[i].model, i % 2 == 0);
      EXPECT_EQ(spans[i].text, i % 2 == 0 ? turn.model : turn.observation);
    }
    const auto without = to_qa_example(p, tool_answer_style::no_tool);
    EXPECT_EQ(without.answer, "#### " + std::to_string(p.answer));
    EXPECT_EQ(without.ground_truth, std::to_string(p.answer));
  }
  const auto s = generate_arith_tools_examples(opt, 20, 5, 3, tool_answer_style::trace);
  ASSERT_EQ(s.train.size(), 20u);
  ASSERT_EQ(s.test.size(), 5u);
  EXPECT_EQ(s.train[0].answer, flatten(problems[0].trace, kTraceTurnEnd));
  EXPECT_EQ(s.test[4].question, problems[24].question);
}

TEST(ArithTools, RefusesBadOptions) {
  auto with = [](auto change) {
    arith_tools_options o;
    change(o);
    return o;
  };
  auto throws = [](const arith_tools_options& o) {
    EXPECT_THROW(generate_arith_tools(o, 1, 1), std::invalid_argument);
  };
  throws(with([](auto& o) { o.terms_min = 1; }));
  throws(with([](auto& o) { o.terms_max = 1; }));
  throws(with([](auto& o) { o.digits = 0; }));
  throws(with([](auto& o) { o.digits = 7; }));  // 7 * 3 > 18: could overflow int64
  throws(with([](auto& o) { o.ops = "+-"; }));  // no product: not a tool task
  throws(with([](auto& o) { o.ops = "*/"; }));
  throws(with([](auto& o) { o.ops = "**+"; }));
  throws(with([](auto& o) { o.ops = ""; }));
  EXPECT_NO_THROW(generate_arith_tools(with([](auto& o) { o.digits = 6; }), 10, 1));
}

TEST(ArithTools, RefusesMoreQuestionsThanExist) {
  arith_tools_options o;
  o.digits = 1;
  o.terms_min = o.terms_max = 2;
  o.ops = "*";
  // 9 x 9 products of 1-digit terms (1..9).
  const auto all = generate_arith_tools(o, 81, 1);
  std::set<std::string> questions;
  for (const auto& p : all)
    questions.insert(p.question);
  EXPECT_EQ(questions.size(), 81u);
  EXPECT_THROW(generate_arith_tools(o, 82, 1), std::invalid_argument);
  // With '+' too, 2 terms: 81 sequences "a*b" only, since '+' alone has no product.
  o.ops = "*+";
  EXPECT_EQ(generate_arith_tools(o, 81, 1).size(), 81u);
  EXPECT_THROW(generate_arith_tools(o, 82, 1), std::invalid_argument);
}

}  // namespace
}  // namespace asyncrl
