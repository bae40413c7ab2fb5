#pragma once

// CAF 0.17.6 serializes float and double with its own IEEE-754 packing (caf/detail/
// ieee_754.hpp), which turns -0 into +0, NaN into 1 and subnormals into huge values, and never
// returns on +-inf (it halves infinity until it is below 2). A log-prob or reward that crosses a
// node boundary must arrive bit for bit, so payloads carry these as their raw bits instead.

#include <cstdint>
#include <cstring>
#include <vector>

namespace asyncrl {

inline uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

inline uint64_t double_bits(double x) {
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

inline double bits_double(uint64_t u) {
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

inline std::vector<uint32_t> floats_bits(const std::vector<float>& xs) {
  std::vector<uint32_t> out(xs.size());
  if (!xs.empty()) std::memcpy(out.data(), xs.data(), xs.size() * sizeof(float));
  return out;
}

inline std::vector<float> bits_floats(const std::vector<uint32_t>& us) {
  std::vector<float> out(us.size());
  if (!us.empty()) std::memcpy(out.data(), us.data(), us.size() * sizeof(float));
  return out;
}

}  // namespace asyncrl
