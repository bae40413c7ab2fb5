#pragma once

// How a question becomes prompt ids and an answer becomes response ids. SFT, RL, eval and the
// console must agree on it, so every one of them goes through these functions with the run's
// prompt_format.

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/task/dataset.hpp"
#include "runtime/text/chat_format.hpp"
#include "runtime/text/tokenizer.hpp"

namespace asyncrl {

struct prompt_format {
  chat_format chat = chat_format::none;  // none, qwen or llama3 (never auto_detect)
  std::string system_prompt;             // "" = no system turn
  std::string bos_text;                  // llama3's first token, as text
  int32_t stop_id = -1;                  // ends a response: <eos>, <|im_end|>, <|eot_id|>
};

/// Resolves data.chat_template and data.system_prompt against the tokenizer: `auto` takes the
/// family of its chat template (none for the char tokenizer and for a tokenizer without one),
/// an empty system prompt takes the template's default. Throws std::runtime_error when the
/// tokenizer lacks a token the format needs (naming it and the key to change).
prompt_format make_prompt_format(const tokenizer& tok, chat_format requested,
                                 const std::string& system_prompt);

/// none: <bos> (when the tokenizer has one) question '\n'. Chat formats: the system turn (if
/// any), the example's messages (or one user turn with the question), the assistant header.
std::vector<int32_t> encode_prompt(const tokenizer& tok, const prompt_format& f,
                                   const qa_example& ex);
/// Prompt ids of a bare question (the console's `generate`, `asyncrl generate`).
std::vector<int32_t> encode_prompt(const tokenizer& tok, const prompt_format& f,
                                   const std::string& question);
/// The answer followed by the stop token.
std::vector<int32_t> encode_response(const tokenizer& tok, const prompt_format& f,
                                     const std::string& answer);

/// A worked answer as response tokens with their loss mask. A calculator trace
/// (runtime/tools/builtin_env.hpp: kTraceTurnEnd between a model turn and the tool's answer)
/// becomes model turns each ending in the stop token (mask 1) and the tool's answers (mask 0);
/// any other answer is encode_response's tokens, all 1.
struct encoded_response {
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;
};
encoded_response encode_trace_response(const tokenizer& tok, const prompt_format& f,
                                       const std::string& answer);

}  // namespace asyncrl
