#pragma once

// Synthetic trainer input for the benchmarks: `count` samples in groups of `group`, each with
// `prompt` and `response` random character tokens (ids 4..93 of the char tokenizer), behaviour
// log-prob -1, version 0 and an advantage in [-0.5, 0.5). Fixed seed: every benchmark that asks
// for the same shape trains on the same data.

#include <cstdint>
#include <vector>

#include "runtime/common/rng.hpp"
#include "runtime/train/samples.hpp"

namespace asyncrl::bench {

inline std::vector<scored_sample> random_samples(int count, int group, int prompt, int response) {
  std::vector<scored_sample> out;
  rng_stream rng(3, 0, 0);
  uint64_t c = 0;
  for (int i = 0; i < count; ++i) {
    scored_sample s;
    s.uid = static_cast<uint64_t>(i);
    s.group_id = static_cast<uint64_t>(i / group);
    for (int t = 0; t < prompt; ++t)
      s.prompt.push_back(4 + static_cast<int32_t>(rng.bits(c++) % 90));
    for (int t = 0; t < response; ++t) {
      s.response.push_back(4 + static_cast<int32_t>(rng.bits(c++) % 90));
      s.logprobs.push_back(-1.0f);
      s.versions.push_back(0);
    }
    s.advantage = rng.uniform(c++) - 0.5;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace asyncrl::bench
