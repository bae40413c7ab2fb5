#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace asyncrl {

/// Bad data input: the message names file:line and what was wrong.
class data_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One GSM8K-style example. `answer` holds the worked solution ending in "#### <number>";
/// `ground_truth` is the text after the last "####", trimmed.
struct qa_example {
  std::string question;
  std::string answer;
  std::string ground_truth;
};

/// Loads a JSONL file with GSM8K's fields `question` and `answer` (extra fields are ignored;
/// blank lines are skipped). Throws data_error "path:line: what" for unreadable files, invalid
/// JSON, a missing or non-string field, or an answer without "#### <number>".
std::vector<qa_example> load_jsonl(const std::string& path);

/// Writes examples as JSONL with fields `question` and `answer` (atomically).
void save_jsonl(const std::string& path, const std::vector<qa_example>& examples);

/// The text after the last "####" in a GSM8K answer, trimmed; empty if there is none.
std::string gsm8k_final_answer(const std::string& answer);

}  // namespace asyncrl
