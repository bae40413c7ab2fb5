#include "runtime/task/reward.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

namespace asyncrl {
namespace {

TEST(ExtractFinalAnswer, TakesTextAfterHashesToEndOfLine) {
  EXPECT_EQ(extract_final_answer("7+5+0=12 4+8+1=13 0+3+1=4 #### 432"), "432");
  EXPECT_EQ(extract_final_answer("work\n####   72  \nthanks"), "72");
  EXPECT_EQ(extract_final_answer("#### 5\r\n"), "5");
  EXPECT_EQ(extract_final_answer("####-23"), "-23");
}

TEST(ExtractFinalAnswer, LastHashesWins) {
  EXPECT_EQ(extract_final_answer("#### 1\nmore work\n#### 2"), "2");
  EXPECT_EQ(extract_final_answer("#### 1 #### 3"), "3");
  // The last "####" inside "#####" starts one character in, leaving " 9".
  EXPECT_EQ(extract_final_answer("##### 9"), "9");
}

TEST(ExtractFinalAnswer, HashesWithNothingAfterIsEmpty) {
  EXPECT_EQ(extract_final_answer("so the answer is ####"), "");
  EXPECT_EQ(extract_final_answer("####\n42"), "");
}

TEST(ExtractFinalAnswer, BoxedWhenNoHashes) {
  EXPECT_EQ(extract_final_answer("The answer is \\boxed{18}."), "18");
  EXPECT_EQ(extract_final_answer("\\boxed{1} then \\boxed{ 2 }"), "2");
  EXPECT_EQ(extract_final_answer("\\boxed{\\frac{1}{2}}"), "\\frac{1}{2}");
  EXPECT_EQ(extract_final_answer("\\boxed{{{7}}}"), "{{7}}");
  EXPECT_EQ(extract_final_answer("\\boxed{}"), "");
}

TEST(ExtractFinalAnswer, HashesBeatBoxed) {
  EXPECT_EQ(extract_final_answer("\\boxed{5}\n#### 6"), "6");
  EXPECT_EQ(extract_final_answer("#### 6\n\\boxed{5}"), "6");
}

TEST(ExtractFinalAnswer, TruncatedBoxFallsBackToEarlierComplete) {
  EXPECT_EQ(extract_final_answer("\\boxed{5} and \\boxed{6"), "5");
  EXPECT_EQ(extract_final_answer("\\boxed{\\frac{1}{2}"), std::nullopt);
}

TEST(ExtractFinalAnswer, NothingToExtract) {
  EXPECT_EQ(extract_final_answer(""), std::nullopt);
  EXPECT_EQ(extract_final_answer("the answer is 42"), std::nullopt);
  EXPECT_EQ(extract_final_answer("### 42"), std::nullopt);
  EXPECT_EQ(extract_final_answer("boxed{42}"), std::nullopt);
  EXPECT_EQ(extract_final_answer("\\boxed"), std::nullopt);
}

TEST(ExtractFinalAnswer, HugeAndBinaryInput) {
  std::string huge(1 << 20, 'x');
  EXPECT_EQ(extract_final_answer(huge), std::nullopt);
  std::string opens;
  for (int i = 0; i < 20000; ++i)
    opens += "\\boxed{";
  EXPECT_EQ(extract_final_answer(opens), std::nullopt);
  EXPECT_EQ(extract_final_answer(huge + "#### 7"), "7");
  const char raw[] = "\xff\xfe\x00\x80 #### 3\xc3\xa9";
  std::string binary(raw, sizeof(raw) - 1);
  EXPECT_EQ(extract_final_answer(binary), "3\xc3\xa9");
}

TEST(ParseAnswerNumber, Accepts) {
  EXPECT_EQ(parse_answer_number("432"), 432.0);
  EXPECT_EQ(parse_answer_number("-23"), -23.0);
  EXPECT_EQ(parse_answer_number("+5"), 5.0);
  EXPECT_EQ(parse_answer_number("0"), 0.0);
  EXPECT_EQ(parse_answer_number("1,234"), 1234.0);
  EXPECT_EQ(parse_answer_number("1,234,567.25"), 1234567.25);
  EXPECT_EQ(parse_answer_number("3.50"), 3.5);
  EXPECT_EQ(parse_answer_number(".5"), 0.5);
  EXPECT_EQ(parse_answer_number("$5"), 5.0);
  EXPECT_EQ(parse_answer_number("-$5"), -5.0);
  EXPECT_EQ(parse_answer_number("$1,000"), 1000.0);
  EXPECT_EQ(parse_answer_number("72."), 72.0);
  EXPECT_EQ(parse_answer_number("3.50."), 3.5);
  EXPECT_EQ(parse_answer_number("50%"), 50.0);
  EXPECT_EQ(parse_answer_number("  18 \n"), 18.0);
  EXPECT_EQ(parse_answer_number("007"), 7.0);
}

TEST(ParseAnswerNumber, Rejects) {
  for (const char* bad :
       {"",    "   ",  "abc", "1,23", "1,2345", "1234,567", ",123",    "1,",  "--5",
        "+-5", "$$5",  "-",   "$",    ".",      "1.2.3",    "12abc",   "1e5", "1 234",
        "5..", "72.%", "x5",  "0x10", "inf",    "nan",      "\xc3\xa9"})
    EXPECT_EQ(parse_answer_number(bad), std::nullopt) << "'" << bad << "'";
}

TEST(ParseAnswerNumber, OverflowIsRejectedNotInfinite) {
  EXPECT_EQ(parse_answer_number(std::string(400, '9')), std::nullopt);
  auto big = parse_answer_number(std::string(300, '9'));
  ASSERT_TRUE(big.has_value());
  EXPECT_DOUBLE_EQ(*big, 1e300);
}

TEST(ScoreResponse, ExactAndTolerance) {
  EXPECT_EQ(score_response("7+5+0=12 4+8+1=13 0+3+1=4 #### 432", "432"), 1.0);
  EXPECT_EQ(score_response("#### 431", "432"), 0.0);
  EXPECT_EQ(score_response("neg 2-7-0=5b 5-1-1=3 #### -35", "-35"), 1.0);
  EXPECT_EQ(score_response("#### 35", "-35"), 0.0);
  EXPECT_EQ(score_response("#### 1,234", "1234"), 1.0);
  EXPECT_EQ(score_response("#### $3.50", "3.5"), 1.0);
  EXPECT_EQ(score_response("\\boxed{18}", "18"), 1.0);
  // Tolerance is 1e-6 absolute below 1 and relative above.
  EXPECT_EQ(score_response("#### 0.0000005", "0"), 1.0);
  EXPECT_EQ(score_response("#### 0.000002", "0"), 0.0);
  EXPECT_EQ(score_response("#### 1000000.5", "1000000"), 1.0);
  EXPECT_EQ(score_response("#### 1000002", "1000000"), 0.0);
}

TEST(ScoreResponse, MalformedScoresZero) {
  EXPECT_EQ(score_response("", "5"), 0.0);
  EXPECT_EQ(score_response("5", "5"), 0.0);  // no final-answer marker
  EXPECT_EQ(score_response("####", "5"), 0.0);
  EXPECT_EQ(score_response("#### five", "5"), 0.0);
  EXPECT_EQ(score_response("#### 5", "five"), 0.0);
  EXPECT_EQ(score_response("#### 5", ""), 0.0);
  EXPECT_EQ(score_response(std::string(1 << 20, '#'), "5"), 0.0);
  EXPECT_EQ(score_response(std::string("\x00\xff#### 5", 8), "5"), 1.0);
}

// The table of docs/reward-protocol.md's "The built-in rule" is the rule's specification: every
// row is scored here. Catches the doc and the code drifting apart (a rule written from the doc
// must agree with the reference), and a table that stops parsing (fewer rows than written).
TEST(BuiltInRule, TheDocumentedCasesScoreAsDocumented) {
  std::ifstream in(std::string(ASYNCRL_SOURCE_DIR) + "/docs/reward-protocol.md");
  ASSERT_TRUE(in) << "docs/reward-protocol.md not found";
  std::string line;
  while (std::getline(in, line) && line != "## The built-in rule") {
  }
  ASSERT_EQ(line, "## The built-in rule");
  // The code spans of a table row, with "\\n" read as a line break.
  auto spans = [](const std::string& row) {
    std::vector<std::string> out;
    for (size_t b = row.find('`'); b != std::string::npos; b = row.find('`', b + 1)) {
      const auto e = row.find('`', b + 1);
      if (e == std::string::npos) break;
      std::string x = row.substr(b + 1, e - b - 1);
      for (size_t p = x.find("\\n"); p != std::string::npos; p = x.find("\\n", p))
        x.replace(p, 2, "\n");
      out.push_back(x);
      b = e;
    }
    return out;
  };
  int rows = 0;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line.rfind("| response |", 0) == 0) {
      in_table = true;
      continue;
    }
    if (!in_table || line.rfind("| ---", 0) == 0) continue;
    if (line.rfind("| `", 0) != 0) break;  // the end of the table
    // | `response` | `truth` | score | why |
    const auto cells = spans(line);
    ASSERT_GE(cells.size(), 2u) << line;
    const auto truth_end = line.find('|', line.find('|', 1) + 1);  // the score cell follows
    const double score = std::stod(line.substr(truth_end + 1));
    EXPECT_EQ(score_response(cells[0], cells[1]), score) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 31);
}

}  // namespace
}  // namespace asyncrl
