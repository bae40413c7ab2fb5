#pragma once

// Where a run's model comes from (the model section of the config): a model directory, or a
// fresh initialisation of a given architecture. Torch-free.

#include <cstdint>
#include <string>

#include "runtime/model/model_arch.hpp"

namespace asyncrl {

/// Architecture of a freshly initialised policy (used when model.path is empty).
struct model_init_config {
  model_arch arch = model_arch::qwen2;
  int64_t hidden_size = 128;
  int64_t intermediate_size = 384;
  int64_t num_hidden_layers = 4;
  int64_t num_attention_heads = 4;
  int64_t num_key_value_heads = 2;
  int64_t max_position_embeddings = 256;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = true;
  double init_std = 0.02;
};

struct model_section {
  std::string path;  // starting model directory (HF layout); empty = initialise from model.init
  // A fresh model's tokenizer: a directory with a Hugging Face tokenizer.json (and optionally
  // tokenizer_config.json); empty = the built-in char vocabulary. Only with an empty path.
  std::string tokenizer;
  model_init_config init;
};

}  // namespace asyncrl
