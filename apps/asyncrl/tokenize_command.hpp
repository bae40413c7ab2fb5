#pragma once

// `asyncrl tokenize`: text to token ids and back with a model directory's tokenizer (a Hugging
// Face tokenizer.json or the built-in char_tokenizer.json); no weights are read.

#include <string>

namespace asyncrl {

struct tokenize_command {
  std::string model_dir;
  std::string input_path;  // "-" = standard input
  bool decode = false;
  bool skip_special = false;  // --decode: drop special tokens, as decode(..., true) in HF
};

/// Encode: each JSONL line {"text": "..."} prints {"ids": [...]} (no BOS/EOS added; special
/// tokens written in the text are matched). --decode: {"ids": [...]} prints {"text": "..."}.
/// Blank lines are skipped; a bad line throws naming file:line after the lines before it were
/// printed.
int run_tokenize_command(const tokenize_command& c);

}  // namespace asyncrl
