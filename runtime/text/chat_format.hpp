#pragma once

// The chat formats a question can be rendered in (data.chat_template). Each table lists
// the names in the order `asyncrl config --describe` shows them; the config parses them
// (runtime/config/modes.hpp includes this file).

#include "runtime/common/enum_names.hpp"

namespace asyncrl {

/// data.chat_template: how a question becomes a prompt (runtime/text/chat_template.hpp).
enum class chat_format {
  auto_detect,  // from the tokenizer: its tokenizer_config.json chat_template, else none
  none,         // <bos> question '\n' (the built-in task's format)
  qwen,         // <|im_start|>role\n...<|im_end|>\n (Qwen2, Qwen2.5)
  llama3,       // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> (Llama-3)
  // Appended, so that the values above keep their numbers in anything already serialized.
  qwen3,     // qwen, plus Qwen3's <think> handling of assistant turns
  llama3_1,  // llama3, plus Llama-3.1's dated system turn and JSON tool calls
};
inline constexpr enum_name<chat_format> chat_format_names[] = {
    {chat_format::auto_detect, "auto"}, {chat_format::none, "none"},
    {chat_format::qwen, "qwen"},        {chat_format::qwen3, "qwen3"},
    {chat_format::llama3, "llama3"},    {chat_format::llama3_1, "llama3.1"}};
constexpr const auto& enum_names(chat_format) {
  return chat_format_names;
}

}  // namespace asyncrl
