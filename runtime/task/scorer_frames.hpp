#pragma once

// The wire format of the external scorer protocol (docs/reward-protocol.md): a frame is a 4-byte
// big-endian unsigned length followed by that many bytes holding one msgpack map. Requests go
// from the trainer to the scorer, answers come back, one answer per request, in order.
// Torch-free and CAF-free.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace asyncrl {

/// Largest frame body either side accepts (16 MiB). A longer answer is malformed.
inline constexpr uint32_t kMaxScorerFrameBytes = 16u << 20;

/// One value of a request's `extra` map.
using scorer_extra_value = std::variant<int64_t, std::string>;

/// A request: {uid, prompt, response, ground_truth, extra}.
struct scorer_request {
  uint64_t uid = 0;
  std::string prompt;
  std::string response;
  std::string ground_truth;
  std::vector<std::pair<std::string, scorer_extra_value>> extra;  // packed in this order
};

/// A decoded answer: {uid, score, info}.
struct scorer_answer {
  uint64_t uid = 0;
  double score = 0.0;
  std::string info;  // the `info` value rendered as JSON-like text; "" when absent
};

/// The whole frame of `r`: header + msgpack map with the keys uid, prompt, response,
/// ground_truth, extra.
std::string encode_scorer_request(const scorer_request& r);

/// The frame header of a body of `n` bytes.
std::string scorer_frame_header(uint32_t n);

/// The body length a 4-byte header announces.
uint32_t scorer_frame_length(const unsigned char* header);

/// Decodes an answer body. Returns the answer, or what is wrong with it ("score is not a
/// number", "uid 7 does not match the request's 6", ...): it must be exactly one msgpack map
/// with string keys, `uid` a non-negative integer equal to `expected_uid`, `score` an integer or
/// a finite float; `info` is optional and any value; other keys are ignored.
std::variant<scorer_answer, std::string> decode_scorer_answer(std::string_view body,
                                                              uint64_t expected_uid);

/// Decodes a request body (the scorer's side; the tests' fake scorers and the bench use it).
/// nullopt when it is not a request map.
std::optional<scorer_request> decode_scorer_request(std::string_view body);

/// Encodes an answer frame (the scorer's side): {uid, score, info: {}} plus the header.
std::string encode_scorer_answer(uint64_t uid, double score);

}  // namespace asyncrl
