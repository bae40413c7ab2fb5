#pragma once

// Chat prompts rendered natively in the formats of the model families asyncrl supports. A
// Hugging Face chat_template is Jinja; rather than embed a Jinja engine, we recognise the
// families' templates and render their output for role/content messages, tool calls and tool
// responses, checked against the reference renderer (tests/fixtures/chat/expected.jsonl,
// tool_expected.jsonl). A template we do not recognise is refused, never approximated. The
// tool-call syntax of each family is in runtime/text/tool_calls.hpp.

#include <string>
#include <vector>

#include "runtime/text/chat_format.hpp"

namespace asyncrl {

/// One call an assistant turn makes.
struct tool_call {
  std::string name;
  std::string arguments_json;  // a JSON object, e.g. {"expression": "2 + 3"}
};

struct chat_message {
  std::string role;  // system, user, assistant, tool (a tool's response)
  std::string content;
  std::vector<tool_call> tool_calls;  // assistant turns only
};

/// The family of a tokenizer_config.json chat_template: qwen (<|im_start|>), qwen3 (that and
/// <think>), llama3 (<|start_header_id|>), llama3_1 (that and "Cutting Knowledge Date"), or none
/// when `jinja` is empty. Throws std::runtime_error naming `source` for any other template,
/// including Llama-3.2's, whose "Today Date" is the day it is rendered.
chat_format detect_chat_format(const std::string& jinja, const std::string& source);

/// The system prompt a Qwen template adds when the messages have none ("You are Qwen, created
/// by Alibaba Cloud. You are a helpful assistant." in Qwen2.5's), or "" if it adds none.
std::string default_system_prompt(const std::string& jinja);

/// The text of `messages` followed by the assistant's generation prompt, as the family's
/// template renders it with add_generation_prompt=true and `tools` (a JSON array of tool
/// schemas; "" = no tools). `bos_text` is the BOS token's text (Llama-3 starts with it).
/// `format` is a chat family. No default system turn is added: the caller passes the
/// template's (default_system_prompt; runtime/task/prompting.cpp does). Throws
/// std::invalid_argument for what the template refuses (Llama-3.1: two calls in one turn, tools
/// without a first user turn) and for tools or arguments that are not JSON.
std::string render_chat(chat_format format, const std::vector<chat_message>& messages,
                        const std::string& bos_text, const std::string& tools_json = "");

/// The text a model writes for assistant turn `m` after the generation prompt, up to (not
/// including) its end-of-turn token, as the template renders a turn of a tool loop (for Qwen3:
/// after the last user query, so its <think> block is kept). parse_tool_calls
/// (runtime/text/tool_calls.hpp) inverts it. Throws std::invalid_argument where the template
/// refuses the turn (Llama-3.1: two calls).
std::string render_assistant_turn(chat_format format, const chat_message& m);

/// The text that follows an assistant turn whose calls got `responses` (one per call, in
/// order), after the turn's end-of-turn token (<|im_end|>, <|eot_id|>; not part of this text),
/// up to and including the next assistant generation prompt. Appending it token by token gives
/// what the template renders for the whole conversation. `format` is a chat family.
std::string render_tool_responses(chat_format format, const std::vector<std::string>& responses);

}  // namespace asyncrl
