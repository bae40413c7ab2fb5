#pragma once

// What the runtime takes from a Hugging Face tokenizer_config.json: the chat template and the
// bos/eos/pad token strings (each a string or an object with "content"; null or absent = none).

#include <string>

namespace asyncrl {

struct hf_config {
  std::string chat_template;
  std::string bos_token, eos_token, pad_token;

  /// Parses the text of tokenizer_config.json; `file` names it in errors (std::runtime_error).
  /// A list-valued chat_template ([{"name", "template"}...]) gives the one named "default".
  static hf_config parse(const std::string& text, const std::string& file);
};

}  // namespace asyncrl
