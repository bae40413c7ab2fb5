#pragma once

// Writes small random checkpoints in the HF layout for tests, without going through the
// model code: config.json is hand-written text and the weights come from a plain PRNG.

#include <string>

#include "runtime/model/model_config.hpp"
#include "runtime/model/safetensors.hpp"

namespace asyncrl::test {

struct tiny_arch {
  std::string model_type = "qwen2";
  int64_t vocab = 37, hidden = 32, inter = 48, layers = 2, heads = 4, kv_heads = 2;
  bool tie = false;
  bool llama_bias = false;  // llama's attention_bias
  double theta = 10000.0, eps = 1e-6;
  int64_t max_pos = 128;
};

/// Writes `dir`/config.json and `dir`/model.safetensors (dtype f32, f16 or bf16) with weights
/// drawn from `seed`. Returns the config as the loader should read it.
model_config write_tiny_checkpoint(const std::string& dir, const tiny_arch& a, uint64_t seed,
                                   st_dtype dtype = st_dtype::f32);

}  // namespace asyncrl::test
