#pragma once

// The requests of the OpenAI API that `asyncrl serve` answers (/v1/chat/completions,
// /v1/completions), parsed and checked before anything is generated. A parameter we do not
// implement is refused by name rather than ignored, so a client never gets a response that
// silently differs from what it asked for. Errors are values with the OpenAI error body's
// fields and the HTTP status to send.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runtime/text/chat_template.hpp"

namespace asyncrl {

enum class api_endpoint : uint8_t { chat, completions };

/// What one server accepts. Each bound is a guard against a request that would hold the
/// generator (or memory) for everyone else.
struct serve_limits {
  size_t max_body_bytes = 1 << 20;  // HTTP request body
  int32_t max_tokens = 1024;        // per choice, also bounded by the model's context
  int32_t max_n = 16;               // choices per request
  int32_t max_concurrent = 64;      // requests in flight; more get 429
  int32_t max_stop = 4;             // stop strings per request (OpenAI's own limit)
};

/// A checked request.
struct api_request {
  api_endpoint endpoint = api_endpoint::chat;
  std::string model;
  std::vector<chat_message> messages;  // chat
  std::string tools_json;              // chat: the `tools` array as JSON; "" = none
  std::string prompt;                  // completions
  double temperature = 1.0;            // 0 = greedy
  double top_p = 1.0;
  std::optional<int32_t> max_tokens;  // unset: up to the context, at most limits.max_tokens
  std::vector<std::string> stop;
  int32_t n = 1;
  std::optional<int64_t> seed;  // same seed, same request: same output, whatever else runs
  bool logprobs = false;        // the sampled tokens' log-probabilities
  bool stream = false;          // server-sent events
  bool include_usage = false;   // stream_options.include_usage: a last chunk with usage
};

/// An OpenAI-style error: {"error": {"message", "type", "param", "code"}} with `status`.
struct api_error {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::string param;  // "" = null
  std::string code;   // "" = null
};

/// Parses and checks a request body for `endpoint`. The error names the parameter.
std::variant<api_request, api_error> parse_api_request(api_endpoint endpoint, std::string_view body,
                                                       const serve_limits& limits);

/// The JSON body of an error response.
std::string error_body(const api_error& e);

}  // namespace asyncrl
