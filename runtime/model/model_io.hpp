#pragma once

// Loading and saving model directories in the Hugging Face layout. Pulls in torch.

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "runtime/model/model.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/text/tokenizer.hpp"

namespace asyncrl {

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
inline constexpr const char* kHfTokenizerConfigFile = "tokenizer_config.json";
inline constexpr const char* kGenerationConfigFile = "generation_config.json";

/// The tokenizer of a directory: the built-in format's char_tokenizer.json, else a Hugging Face
/// tokenizer.json (with tokenizer_config.json when present); null when it has neither. The char
/// file wins because a directory saved here with it also holds a tokenizer.json for transformers
/// (a WordLevel rendering of the same vocabulary) that hf_tokenizer does not read. Throws
/// std::runtime_error naming the file and the component it cannot read.
tokenizer_ptr load_tokenizer_dir(const std::string& dir);

/// Loads a model directory onto `device` (F32 as is, BF16/F16 upcast to float32). Throws
/// std::runtime_error naming the file and the tensor on any mismatch.
model_bundle load_model_dir(const std::string& dir, torch::Device device);

/// Copies every parameter of `model` from `file`, checking names and shapes. A tied lm_head
/// present in the file is ignored; a missing tensor is an error.
void load_weights(CausalLMImpl& model, const safetensors_file& file);

/// Writes a directory that both asyncrl and transformers' AutoModelForCausalLM load:
/// config.json, model.safetensors (HF names, `dtype` F32 or BF16, metadata {"format": "pt"}),
/// generation_config.json (greedy, the tokenizer's bos/eos/pad ids) and, if given, the
/// tokenizer: an HF one's files as read; the char one's char_tokenizer.json plus a
/// tokenizer.json + tokenizer_config.json for AutoTokenizer (char_tokenizer_hf_json). BF16
/// rounds each weight to nearest even; asyncrl upcasts it back on load. Throws
/// std::invalid_argument for another dtype.
void save_model_dir(const std::string& dir, CausalLMImpl& model, const tokenizer* tok,
                    st_dtype dtype = st_dtype::f32);

/// Re-saves the model directory `src` into `out` with weights in `dtype` (F32 or BF16): the
/// same files save_model_dir writes, the tokenizer carried over. `asyncrl export`.
void export_model_dir(const std::string& src, const std::string& out, st_dtype dtype);

/// generation_config.json's content: greedy decoding (do_sample false) and the token ids of
/// `tok` (else of `config`); eos_token_id is a list when the tokenizer also has a chat
/// end-of-turn token (<|im_end|>, <|eot_id|>), as Qwen's and Llama's own files do.
nlohmann::ordered_json generation_config_json(const model_config& config, const tokenizer* tok);

/// tokenizer.json for the built-in char vocabulary: a byte-level BPE without merges over the
/// same ids (each character one token) and the four specials as added tokens. Gives asyncrl's
/// ids for text in the vocabulary; where they differ is in docs/hf-models.md.
nlohmann::ordered_json char_tokenizer_hf_json(const tokenizer& tok);

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
