#pragma once

// `asyncrl serve`: the OpenAI API (/v1/chat/completions, /v1/completions, /v1/models) over a
// model directory, or following a run's newest saved weights (docs/serve.md).

#include <cstdint>
#include <string>

#include "apps/asyncrl/model_options.hpp"
#include "runtime/serve/openai_request.hpp"
#include "runtime/text/chat_format.hpp"

namespace asyncrl {

struct serve_command {
  common_model_options model;
  std::string follow;         // a run directory whose newest saved model to serve; "" = off
  double follow_every_s = 5;  // how often to look for a newer one
  std::string host = "127.0.0.1";
  int port = 8000;                // 0 = any free port (printed)
  std::string served_model_name;  // "" = the model directory's name
  std::string api_key;            // "" = none (loopback only); also ASYNCRL_API_KEY
  std::string tls_cert, tls_key;
  bool allow_insecure = false;                  // plain HTTP on a non-loopback address
  chat_format chat = chat_format::auto_detect;  // how chat messages become the prompt
  std::string system_prompt;
  int64_t max_batch = 64;       // choices decoded together
  int64_t max_context = 0;      // prompt + response; 0 = the model's max_position_embeddings
  int32_t steps_per_round = 4;  // decode steps between looks at new requests
  uint64_t seed = 0;            // of the generator's streams (a request's seed picks its stream)
  serve_limits limits;
};

/// Serves until SIGINT/SIGTERM. Returns the exit code; throws on bad options or a model that
/// cannot be loaded.
int run_serve_command(const serve_command& c);

}  // namespace asyncrl
