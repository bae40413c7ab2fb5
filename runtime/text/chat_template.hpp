#pragma once

// Chat prompts rendered natively in the formats of the model families asyncrl supports. A
// Hugging Face chat_template is Jinja; rather than embed a Jinja engine, we recognise the two
// families' templates and render their output for plain role/content messages, checked
// against the reference renderer (tests/fixtures/tokenizer/chat_expected.jsonl). A template
// we do not recognise is refused, never approximated.

#include <string>
#include <vector>

#include "runtime/text/chat_format.hpp"

namespace asyncrl {

struct chat_message {
  std::string role;  // system, user, assistant
  std::string content;
};

/// The family of a tokenizer_config.json chat_template: qwen (<|im_start|>), llama3
/// (<|start_header_id|>), or none when `jinja` is empty. Throws std::runtime_error naming
/// `source` for any other template.
chat_format detect_chat_format(const std::string& jinja, const std::string& source);

/// The system prompt a Qwen template adds when the messages have none ("You are Qwen, created
/// by Alibaba Cloud. You are a helpful assistant." in Qwen2.5's), or "" if it adds none.
std::string default_system_prompt(const std::string& jinja);

/// The text of `messages` followed by the assistant's generation prompt, as the family's
/// template renders it with add_generation_prompt=true. `bos_text` is the BOS token's text
/// (Llama-3 starts with it). `format` is qwen or llama3.
std::string render_chat(chat_format format, const std::vector<chat_message>& messages,
                        const std::string& bos_text);

}  // namespace asyncrl
