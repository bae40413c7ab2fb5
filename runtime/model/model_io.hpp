#pragma once

// Loading and saving model directories in the Hugging Face layout. Pulls in torch.

#include <memory>
#include <optional>
#include <string>

#include "runtime/model/model.hpp"
#include "runtime/text/tokenizer.hpp"

namespace asyncrl {

class safetensors_file;
struct model_section;

/// A policy as stored on disk: `config.json`, `model.safetensors`, and its tokenizer:
/// `tokenizer.json` (+ `tokenizer_config.json`) of a Hugging Face model, `char_tokenizer.json`
/// for models trained here from the built-in vocabulary.
struct model_bundle {
  model_config config;
  CausalLM model{nullptr};
  tokenizer_ptr tokenizer;  // null when the directory has none
};

/// File names inside a model directory.
inline constexpr const char* kConfigFile = "config.json";
inline constexpr const char* kWeightsFile = "model.safetensors";
inline constexpr const char* kTokenizerFile = "char_tokenizer.json";
inline constexpr const char* kHfTokenizerFile = "tokenizer.json";  // Hugging Face

/// The tokenizer of a directory: a Hugging Face tokenizer.json (with tokenizer_config.json when
/// present) or the built-in format's char_tokenizer.json; null when it has neither. Throws
/// std::runtime_error naming the file and the component it cannot read.
tokenizer_ptr load_tokenizer_dir(const std::string& dir);

/// Loads a model directory onto `device` (F32 as is, BF16/F16 upcast to float32). Throws
/// std::runtime_error naming the file and the tensor on any mismatch.
model_bundle load_model_dir(const std::string& dir, torch::Device device);

/// Copies every parameter of `model` from `file`, checking names and shapes. A tied lm_head
/// present in the file is ignored; a missing tensor is an error.
void load_weights(CausalLMImpl& model, const safetensors_file& file);

/// Writes config.json, model.safetensors (F32, HF names) and the tokenizer if given.
void save_model_dir(const std::string& dir, CausalLMImpl& model, const tokenizer* tok);

/// The architecture load_or_init_policy(m, ...) builds, read without allocating any weight:
/// model.path's config.json, or model.init with its tokenizer's vocabulary. What a run checks
/// against the memory it has before it allocates (apps/asyncrl/run_setup.cpp).
model_config peek_model_config(const model_section& m);

/// The starting policy of a run: model.path when set (its tokenizer, else the built-in one),
/// else a fresh model from model.init with the built-in tokenizer, seeded by `seed`
/// (runtime.seed).
model_bundle load_or_init_policy(const model_section& m, int64_t seed, torch::Device device);

/// SHA-256 (hex) of the parameters' float32 bytes, concatenated in ordered_parameters() order.
std::string params_sha256(const CausalLMImpl& model);

/// Sum of |w| over all parameters: a cheap fingerprint for per-step metrics.
double params_checksum(const CausalLMImpl& model);

}  // namespace asyncrl
