#pragma once

// Benchmark workloads: response lengths drawn from a distribution instead of the model's EOS,
// so that a balanced or a long-tailed workload can be set up on any model. Torch-free; the
// simulator draws from the same function.

#include <cstdint>

#include "runtime/common/enum_names.hpp"

namespace asyncrl {

/// workload.lengths: where a response's length comes from.
enum class workload_lengths {
  model,      // the model's EOS decides
  fixed,      // always workload.median
  lognormal,  // drawn around workload.median with spread workload.sigma
};
inline constexpr enum_name<workload_lengths> workload_lengths_names[] = {
    {workload_lengths::model, "model"},
    {workload_lengths::fixed, "fixed"},
    {workload_lengths::lognormal, "lognormal"}};
constexpr const auto& enum_names(workload_lengths) {
  return workload_lengths_names;
}

struct workload_section {
  workload_lengths lengths = workload_lengths::model;
  int64_t median = 32;  // fixed length, or the lognormal's median
  double sigma = 1.0;   // lognormal: the spread of log length (long tail ~1)
  int64_t min = 1;
  int64_t max = 256;
};

/// The length of response `sample` of group `group`: a pure function of its arguments (its own
/// RNG stream), clipped to [min, max]. Only meaningful when lengths != workload_lengths::model.
int32_t workload_length(const workload_section& w, uint64_t seed, uint64_t group, uint32_t sample);

}  // namespace asyncrl
