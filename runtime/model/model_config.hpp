#pragma once

#include <cstdint>
#include <string>

#include "runtime/model/model_arch.hpp"

namespace asyncrl {

/// rollout.fused_decode and CausalLMImpl::fused_decode: decode steps by the fused kernels.
inline constexpr bool kFusedDecodeDefault = true;

struct model_init_config;

/// The architecture fields of a Hugging Face `config.json` for Qwen2 or Llama models.
struct model_config {
  model_arch model_type = model_arch::qwen2;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;  // hidden_size / num_attention_heads unless config.json says otherwise
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  bool attention_bias = true;  // q/k/v biases: always for qwen2, `attention_bias` for llama
  int64_t bos_token_id = -1;
  int64_t eos_token_id = -1;

  /// Reads `config.json`; throws std::runtime_error "<path>: key '<k>': <what>" on a missing,
  /// mistyped or inconsistent field.
  static model_config load(const std::string& path);
  /// Writes `config.json` in HF form (atomically), with every field transformers reads for
  /// the architecture spelled out (no default of theirs is relied on). `dtype` is the weights'
  /// dtype as HF names it ("float32", "bfloat16"): what from_pretrained(dtype="auto") loads.
  void save(const std::string& path, const std::string& dtype = "float32") const;
  /// A fresh config from the YAML `model.init` section and a vocabulary.
  static model_config from_init(const model_init_config& init, int64_t vocab_size, int64_t bos_id,
                                int64_t eos_id);
  /// Throws std::runtime_error naming `source` if the fields are inconsistent.
  void validate(const std::string& source) const;
  /// Parameters of the model (embedding counted once when tied).
  int64_t num_parameters() const;
};

}  // namespace asyncrl
