#pragma once

// Between the OpenAI API and the serve engine: a checked request becomes a job (its prompt in
// the model's chat format, its stop tokens and length), and the engine's output becomes the
// API's response bodies, whole or as server-sent-event chunks.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "runtime/serve/openai_request.hpp"
#include "runtime/serve/serve_engine.hpp"
#include "runtime/task/prompting.hpp"

namespace asyncrl {

/// The model a server answers for.
struct served_model {
  std::string id;  // the `model` clients name
  tokenizer_ptr tok;
  prompt_format format;  // chat requests are rendered in it (its stop token ends a turn)
  int64_t created = 0;   // unix seconds, shown by /v1/models
};

/// One choice's whole output.
struct choice_result {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::string finish_reason;
};

/// The job of a checked request: chat messages rendered in the model's format (with `tools`),
/// a completion's prompt encoded as is; stop tokens: the format's end of turn for chat, EOS for
/// completions (as `asyncrl generate` and `--raw`). Errors: an unknown model (404), a prompt
/// that leaves no room to generate or a max_tokens past the context (400).
std::variant<serve_job, api_error> make_job(const api_request& r, const served_model& m,
                                            int64_t max_seq_len, const serve_limits& limits);

/// The response of a finished, non-streamed request.
std::string response_body(const api_request& r, const served_model& m, const std::string& id,
                          int64_t created, const std::vector<choice_result>& choices,
                          int64_t prompt_tokens, int64_t version);

/// Streaming: the `data: ...` chunks one engine update makes (each ends in a blank line).
/// `first` marks choices that have not sent their role yet (chat), and is updated. With
/// tools, a chat choice's text is held in `held` and sent, as content or tool calls, when it
/// ends (a call cannot be recognised before it is complete).
struct stream_state {
  std::vector<bool> role_sent;
  std::vector<std::string> held;
  std::vector<std::vector<int32_t>> tokens;  // for usage
  std::vector<size_t> text_offset;           // completions' logprobs: bytes of text so far
};
std::string stream_chunks(const api_request& r, const served_model& m, const std::string& id,
                          int64_t created, const job_update& u, stream_state& s);
/// The stream's end: the usage chunk (when asked) and `data: [DONE]`.
std::string stream_end(const api_request& r, const served_model& m, const std::string& id,
                       int64_t created, int64_t prompt_tokens, int64_t completion_tokens,
                       int64_t version);

/// GET /v1/models.
std::string models_body(const served_model& m, int64_t version);

}  // namespace asyncrl
