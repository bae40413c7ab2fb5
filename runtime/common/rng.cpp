#include "runtime/common/rng.hpp"

namespace asyncrl {

uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

rng_stream::rng_stream(uint64_t seed, uint64_t prompt_id, uint64_t sample_index) {
  // Chained mixing keeps (1, 2, 3) and (2, 1, 3) apart, unlike a plain xor of the parts.
  key_ = mix64(mix64(mix64(seed) ^ prompt_id) ^ (sample_index + 0x632BE59BD9B4E019ULL));
}

uint64_t rng_stream::bits(uint64_t counter) const {
  return mix64(key_ ^ mix64(counter + 0xD1B54A32D192ED03ULL));
}

double rng_stream::uniform(uint64_t counter) const {
  return static_cast<double>(bits(counter) >> 11) * 0x1.0p-53;
}

}  // namespace asyncrl
