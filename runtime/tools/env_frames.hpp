#pragma once

// The wire format of the external environment protocol (docs/env-protocol.md): a frame is a
// 4-byte big-endian unsigned length followed by that many bytes holding one msgpack map.
// Requests (reset, step, close) go from asyncrl to the environment; reset and step get exactly
// one answer each, in order; close gets none. Torch-free and CAF-free.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace asyncrl {

/// Largest request frame body asyncrl sends (16 MiB); a larger one is not sent.
inline constexpr uint32_t kMaxEnvRequestBytes = 16u << 20;

/// An answer frame may hold this much besides its observation (keys, reward, `info`). A frame
/// longer than max_observation_bytes + this is a flood, refused unread.
inline constexpr uint32_t kEnvAnswerSlackBytes = 64u << 10;

/// The default cap of one observation (env.max_observation_bytes), in bytes of UTF-8.
inline constexpr int64_t kDefaultMaxObservationBytes = 16384;

/// What a request asks.
enum class env_request_type { reset, step, close };
const char* to_string(env_request_type t);

/// A request. reset uses task, ground_truth and seed; step uses turn and text; close only the
/// episode.
struct env_request {
  env_request_type type = env_request_type::reset;
  uint64_t episode = 0;
  std::string task;          // reset: the question as the data set has it
  std::string ground_truth;  // reset
  uint64_t seed = 0;         // reset: the episode's seed (the same when it is replayed)
  int32_t turn = 0;          // step: the model turn, 1-based
  std::string text;          // step: the model's turn, decoded, end-of-turn token excluded
};

/// A decoded answer to reset or step.
struct env_reply {
  uint64_t episode = 0;
  std::string observation;  // step: required; reset: optional (then "")
  bool has_observation = false;
  bool done = false;  // step only
  bool has_reward = false;
  double reward = 0;
  std::string info;  // the `info` value rendered as text; "" when absent
};

/// Why an answer was refused.
enum class env_reply_problem {
  malformed,  // not a valid answer: decoding, keys, types, another episode
  flood,      // an observation over its cap
};

struct env_reply_error {
  env_reply_problem problem = env_reply_problem::malformed;
  std::string why;  // "done is not a boolean", "episode 7 does not match the request's 6", ...
};

/// The whole frame (header + body) of `r`.
std::string encode_env_request(const env_request& r);

/// Decodes a request body (the environment's side: tests and C++ environments). nullopt when it
/// is not a well-formed request.
std::optional<env_request> decode_env_request(std::string_view body);

/// Decodes the answer body to a request of type `type` (reset or step) for `episode`. It must
/// be exactly one msgpack map with string keys; `episode` a non-negative integer equal to the
/// request's; reset: `ok` the boolean true, `observation` an optional string; step:
/// `observation` a string, `done` a boolean, `reward` optional, an integer or a finite float
/// (nil = absent); `info` optional, any value; other keys are ignored. An observation of more
/// than `max_observation_bytes` bytes is a flood.
std::variant<env_reply, env_reply_error> decode_env_reply(std::string_view body,
                                                          env_request_type type, uint64_t episode,
                                                          std::size_t max_observation_bytes);

/// Encodes an answer frame (the environment's side: tests). A reset answer when `reset`:
/// {episode, ok: true, observation?}; else a step answer {episode, observation, done, reward?}.
std::string encode_env_reply(bool reset, const env_reply& a);

}  // namespace asyncrl
