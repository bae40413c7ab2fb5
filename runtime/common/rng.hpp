#pragma once

#include <cstdint>

namespace asyncrl {

/// splitmix64's finaliser: a bijective 64-bit mix.
uint64_t mix64(uint64_t x);

/// A counter-based random stream. The u-th draw of stream (seed, prompt_id, sample_index) is a
/// pure function of those four numbers, so a response depends neither on the rest of the batch,
/// nor on timing, nor on whether it was interrupted and resumed.
class rng_stream {
 public:
  rng_stream() = default;
  rng_stream(uint64_t seed, uint64_t prompt_id, uint64_t sample_index);

  /// Uniform double in [0, 1) for draw number `counter` (53 random bits).
  double uniform(uint64_t counter) const;
  uint64_t bits(uint64_t counter) const;
  uint64_t key() const { return key_; }

 private:
  uint64_t key_ = 0;
};

}  // namespace asyncrl
