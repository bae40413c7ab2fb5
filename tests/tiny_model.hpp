#pragma once

// A tiny Qwen2-style config shared by the tensor tests.

#include "runtime/model/model_config.hpp"

namespace asyncrl::test {

inline model_config tiny_model_config(int64_t vocab = 23) {
  model_config c;
  c.model_type = model_arch::qwen2;
  c.vocab_size = vocab;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 512;
  c.tie_word_embeddings = false;
  c.attention_bias = true;
  c.eos_token_id = 2;
  return c;
}

}  // namespace asyncrl::test
