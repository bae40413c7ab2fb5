#pragma once

// Tool calls in each chat family's own syntax, for multi-turn episodes: what a model's turn
// calls (parse_tool_calls) and the JSON the templates print. Rendering a tool loop (a turn's
// calls, the responses an episode appends) is chat_template.hpp's render_assistant_turn and
// render_tool_responses; all of it is checked byte for byte against Hugging Face transformers'
// apply_chat_template with the real templates (tests/fixtures/chat/tool_expected.jsonl).
//
//   qwen, qwen3  <tool_call>\n{"name": "N", "arguments": {...}}\n</tool_call>, any number per turn;
//                responses: <|im_start|>user\n<tool_response>\n...\n</tool_response><|im_end|>
//   llama3_1     the whole turn is {"name": "N", "parameters": {...}}, one call per turn;
//                responses: <|start_header_id|>ipython<|end_header_id|>\n\n"<JSON
//                string>"<|eot_id|>
//   llama3       no tool-call syntax (Llama-3-Instruct's template has none): every turn is final

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "runtime/text/chat_format.hpp"
#include "runtime/text/chat_template.hpp"

namespace asyncrl {

/// What a model wrote in one assistant turn (decoded, without its end-of-turn token).
struct parsed_turn {
  std::string content;              // the text outside the calls (Qwen3: with its <think> block)
  std::vector<tool_call> calls;     // the well-formed calls, in order
  std::vector<std::string> errors;  // one "invalid tool call: <why>" per malformed call
};

/// The tool calls of `assistant_text` in `format`'s syntax. Never throws: a malformed call
/// (unparseable JSON, no "name", arguments that are not an object, an unclosed <tool_call>)
/// becomes an `errors` entry, which the environment answers as an observation.
parsed_turn parse_tool_calls(chat_format format, const std::string& assistant_text);

/// `j` as Python's json.dumps(j, ensure_ascii=False) writes it: the text the templates' tojson
/// filter prints (", " and ": " separators; with indent >= 0, one item a line). Key order is
/// kept, so parse JSON text as ordered_json first.
std::string to_python_json(const nlohmann::ordered_json& j, int indent = -1);

}  // namespace asyncrl
