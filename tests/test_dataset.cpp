#include "runtime/task/dataset.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "tests/test_util.hpp"

namespace asyncrl {
namespace {

// Expects load_jsonl(path) to throw data_error with exactly `prefix` followed by `rest_contains`.
void expect_data_error(const std::string& path, const std::string& prefix,
                       const std::string& rest_contains = "") {
  try {
    load_jsonl(path);
    ADD_FAILURE() << "load_jsonl(" << path << ") did not throw; wanted '" << prefix << "'";
  } catch (const data_error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind(prefix, 0), 0u) << msg;
    EXPECT_NE(msg.find(rest_contains, prefix.size()), std::string::npos) << msg;
  }
}

const char* kGood = R"({"question":"Q1?","answer":"2+3=5\n#### 5"})";

TEST(Gsm8kFinalAnswer, Cases) {
  EXPECT_EQ(gsm8k_final_answer("Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 72"), "72");
  EXPECT_EQ(gsm8k_final_answer("#### 1 then #### 2 "), "2");
  EXPECT_EQ(gsm8k_final_answer("####\t-3.5\r\n"), "-3.5");
  EXPECT_EQ(gsm8k_final_answer("no marker"), "");
  EXPECT_EQ(gsm8k_final_answer("#### "), "");
  EXPECT_EQ(gsm8k_final_answer(""), "");
}

TEST(LoadJsonl, ParsesFieldsSkipsBlanksAndIgnoresExtras) {
  test::temp_dir dir("dataset");
  auto path = dir.file("ok.jsonl");
  test::write_text(path, std::string(kGood) + "\n\n   \t\n" +
                             R"({"answer":"x\n#### 1,234","question":"Q2?","id":7,"meta":{}})" +
                             "\n" + R"({"question":"Q3?","answer":"#### -0.5"})");
  auto ex = load_jsonl(path);
  ASSERT_EQ(ex.size(), 3u);
  EXPECT_EQ(ex[0].question, "Q1?");
  EXPECT_EQ(ex[0].answer, "2+3=5\n#### 5");
  EXPECT_EQ(ex[0].ground_truth, "5");
  EXPECT_EQ(ex[1].question, "Q2?");
  EXPECT_EQ(ex[1].ground_truth, "1,234");
  EXPECT_EQ(ex[2].ground_truth, "-0.5");
}

TEST(LoadJsonl, WindowsLineEndingsAndBom) {
  test::temp_dir dir("dataset");
  auto path = dir.file("crlf.jsonl");
  test::write_text(path, "\xEF\xBB\xBF" + std::string(kGood) + "\r\n\r\n" +
                             R"({"question":"Q2","answer":"#### 9"})" + "\r\n");
  auto ex = load_jsonl(path);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0].question, "Q1?");
  EXPECT_EQ(ex[1].ground_truth, "9");
  // A CRLF file still reports the right line numbers.
  test::write_text(path, std::string(kGood) + "\r\n\r\n{oops}\r\n");
  expect_data_error(path, path + ":3: invalid JSON: ");
}

TEST(LoadJsonl, ErrorsNameFileAndLine) {
  test::temp_dir dir("dataset");
  const std::string good = std::string(kGood) + "\n";
  struct bad_case {
    const char* name;
    std::string text;
    std::string prefix;  // after "<path>"
    std::string detail;
  };
  const bad_case cases[] = {
      {"json.jsonl", good + good + "{\"question\": \"Q\", \"answer\": \n",
       ":3: invalid JSON: ", ""},
      {"trailing.jsonl", good + R"({"question":"Q","answer":"#### 1"} x)",
       ":2: invalid JSON: ", ""},
      {"array.jsonl", "[1, 2]\n", ":1: expected a JSON object", ""},
      {"string.jsonl", good + "\"just text\"\n", ":2: expected a JSON object", ""},
      {"noq.jsonl", good + good + good + R"({"answer":"#### 1"})",
       ":4: missing field 'question' (data.prompt_key)", ""},
      {"numq.jsonl", R"({"question":5,"answer":"#### 1"})",
       ":1: field 'question' must be a string or a list of chat messages", ""},
      {"noa.jsonl", good + "\n" + R"({"question":"Q"})",
       ":3: missing field 'answer' (data.answer_key)", ""},
      {"nulla.jsonl", R"({"question":"Q","answer":null})",
       ":1: field 'answer' must be a string or a number", ""},
      {"nohash.jsonl", good + R"({"question":"Q","answer":"it is 5"})",
       ":2: answer has no numeric final answer", "'it is 5'"},
      {"emptyhash.jsonl", R"({"question":"Q","answer":"it is ####  "})",
       ":1: field 'answer' has no answer", ""},
      {"nan.jsonl", good + R"({"question":"Q","answer":"#### five"})",
       ":2: answer has no numeric final answer", "'five'"},
      {"badutf8.jsonl", "{\"question\":\"\xff\",\"answer\":\"#### 1\"}\n",
       ":1: invalid JSON: ", ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto path = dir.file(c.name);
    test::write_text(path, c.text);
    expect_data_error(path, path + c.prefix, c.detail);
  }
}

// verl/AReaL datasets: other field names, nested ground truths, chat-message prompts, MATH's
// \boxed answers and bare numbers. Catches a key ignored (the defaults would be read), a dotted
// path not followed, the last user turn not taken as the question, and \boxed not unwrapped.
TEST(LoadJsonl, ConfigurableFieldsNestedPathsMessagesAndBoxedAnswers) {
  test::temp_dir dir("dataset");
  auto path = dir.file("verl.jsonl");
  test::write_text(
      path,
      R"({"prompt":[{"role":"system","content":"Be brief."},{"role":"user","content":"1+2?"}],)"
      R"("reward_model":{"ground_truth":"3"}})"
      "\n"
      R"({"prompt":"Half of 9?","reward_model":{"ground_truth":"The answer is \\boxed{4.5}."}})"
      "\n"
      R"({"prompt":"Twice 21?","reward_model":{"ground_truth":42}})"
      "\n");
  jsonl_fields f;
  f.prompt_key = "prompt";
  f.answer_key = "reward_model.ground_truth";
  auto ex = load_jsonl(path, f);
  ASSERT_EQ(ex.size(), 3u);
  ASSERT_EQ(ex[0].messages.size(), 2u);
  EXPECT_EQ(ex[0].messages[0].role, "system");
  EXPECT_EQ(ex[0].messages[1].content, "1+2?");
  EXPECT_EQ(ex[0].question, "1+2?");
  EXPECT_EQ(ex[0].ground_truth, "3");
  EXPECT_TRUE(ex[1].messages.empty());
  EXPECT_EQ(ex[1].question, "Half of 9?");
  EXPECT_EQ(ex[1].ground_truth, "4.5");
  EXPECT_EQ(ex[2].ground_truth, "42");

  // A missing nested field names the key to change.
  f.answer_key = "reward_model.answer";
  try {
    load_jsonl(path, f);
    ADD_FAILURE() << "no error for a missing nested field";
  } catch (const data_error& e) {
    EXPECT_NE(std::string(e.what()).find("missing field 'reward_model.answer' (data.answer_key)"),
              std::string::npos)
        << e.what();
  }
}

TEST(LoadJsonl, NonNumericAnswersOnlyWhenTheRewardIsNotTheNumericRule) {
  test::temp_dir dir("dataset");
  auto path = dir.file("math.jsonl");
  test::write_text(path, R"({"question":"Simplify 2/4.","answer":"So \\boxed{\\frac{1}{2}}"})"
                         "\n");
  EXPECT_THROW(load_jsonl(path), data_error);
  jsonl_fields f;
  f.numeric_answers = false;
  auto ex = load_jsonl(path, f);
  ASSERT_EQ(ex.size(), 1u);
  EXPECT_EQ(ex[0].ground_truth, "\\frac{1}{2}");
}

TEST(LoadJsonl, FileLevelErrors) {
  test::temp_dir dir("dataset");
  auto missing = dir.file("missing.jsonl");
  expect_data_error(missing, missing + ": cannot open");
  auto empty = dir.file("empty.jsonl");
  test::write_text(empty, "");
  expect_data_error(empty, empty + ": no examples");
  auto blank = dir.file("blank.jsonl");
  test::write_text(blank, "\n  \r\n\t\n");
  expect_data_error(blank, blank + ": no examples");
}

TEST(SaveJsonl, RoundTripsAwkwardText) {
  test::temp_dir dir("dataset");
  auto path = dir.file("out.jsonl");
  std::vector<qa_example> in = {
      {"What is \"2+2\"?\nThink.", "2+2=4\n#### 4", "4"},
      {"tab\tand \\ backslash, unicode \xc3\xa9", "steps\r\n#### -1,000", "-1,000"},
  };
  save_jsonl(path, in);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto text = test::read_text(path);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);  // one line per example
  auto out = load_jsonl(path);
  ASSERT_EQ(out.size(), 2u);
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].question, in[i].question);
    EXPECT_EQ(out[i].answer, in[i].answer);
    EXPECT_EQ(out[i].ground_truth, in[i].ground_truth);
  }
}

TEST(SaveJsonl, InvalidUtf8ThrowsAndLeavesNoTempFile) {
  test::temp_dir dir("dataset");
  auto path = dir.file("out.jsonl");
  std::vector<qa_example> in = {{"ok", "#### 1", "1"}, {"bad \xff", "#### 2", "2"}};
  try {
    save_jsonl(path, in);
    ADD_FAILURE() << "save_jsonl did not throw";
  } catch (const data_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": example 1: ", 0), 0u) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

}  // namespace
}  // namespace asyncrl
