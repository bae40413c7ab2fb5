#pragma once

// Limits for decoding msgpack from outside (a node's weights, a scorer's answers). msgpack
// allocates for a declared count (map and array entries, string, binary and ext bytes) before
// it reads the entries, so a 10-byte frame declaring 2^32 map entries asked for 256 GB (found
// by tests/fuzz/fuzz_scorer_frames and fuzz_weights). No count can exceed the input's size in
// bytes, each entry taking at least one: bounding every count by it bounds the allocation by a
// small multiple of the input, and a larger count is a decode error.

#include <msgpack.hpp>

#include <algorithm>
#include <cstddef>

namespace asyncrl {

inline msgpack::unpack_limit msgpack_limits(std::size_t input_bytes, std::size_t max_depth) {
  const std::size_t n = std::min<std::size_t>(input_bytes, 0xffffffff);
  return msgpack::unpack_limit(n, n, n, n, n, max_depth);
}

}  // namespace asyncrl
