#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/text/chat_template.hpp"  // chat_message

namespace asyncrl {

/// Bad data input: the message names file:line and what was wrong.
class data_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One example. `answer` holds the worked solution (GSM8K: ending in "#### <number>"; MATH:
/// with "\boxed{...}") or the bare answer; `ground_truth` is what the reward compares with.
struct qa_example {
  std::string question;  // the last user turn when the prompt is a message list
  std::string answer;
  std::string ground_truth;
  std::vector<chat_message> messages;  // the prompt as chat messages; empty = one user turn
};

/// Which fields of a JSONL line hold the prompt and the answer, and what the answer must be.
struct jsonl_fields {
  std::string prompt_key = "question";  // dotted path; a string or a list of {role, content}
  std::string answer_key = "answer";    // dotted path; a string or a number
  bool numeric_answers = true;          // the built-in rule compares numbers: refuse others
};

/// The ground truth of an answer text: after the last "####" (GSM8K), else the last
/// \boxed{...} (MATH), else the whole text; trimmed.
std::string ground_truth_of(const std::string& answer);

/// Loads a JSONL file (extra fields are ignored; blank lines are skipped). Throws data_error
/// "path:line: what" for unreadable files, invalid JSON, a missing field (naming the key),
/// a field of the wrong type, an empty answer, or with numeric_answers an answer that is not a
/// number.
std::vector<qa_example> load_jsonl(const std::string& path, const jsonl_fields& fields = {});

/// One example from a parsed record (a JSONL line, a Parquet row): the same checks as
/// load_jsonl, each error prefixed with `where` ("path:line" or "path: row N").
qa_example example_of(const nlohmann::json& obj, const jsonl_fields& fields,
                      const std::string& where);

/// Writes examples as JSONL with fields `question` and `answer` (atomically).
void save_jsonl(const std::string& path, const std::vector<qa_example>& examples);

/// The text after the last "####" in a GSM8K answer, trimmed; empty if there is none.
std::string gsm8k_final_answer(const std::string& answer);

}  // namespace asyncrl
