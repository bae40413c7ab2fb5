#include "runtime/model/model_io.hpp"

#include <openssl/evp.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "runtime/common/atomic_file.hpp"
#include "runtime/model/model_source.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/text/byte_level.hpp"
#include "runtime/text/char_tokenizer.hpp"
#include "runtime/text/hf_tokenizer.hpp"
#include "runtime/text/sp_tokenizer.hpp"

namespace asyncrl {

namespace fs = std::filesystem;

void load_weights(CausalLMImpl& model, const safetensors_file& file) {
  torch::NoGradGuard no_grad;
  for (auto& [name, param] : model.ordered_parameters()) {
    const auto* info = file.find(name);
    if (info == nullptr)
      throw std::runtime_error(file.source() + ": missing tensor '" + name + "'");
    std::vector<int64_t> want(param.sizes().begin(), param.sizes().end());
    if (info->shape != want) {
      auto fmt = [](const std::vector<int64_t>& s) {
        std::string out = "[";
        for (size_t i = 0; i < s.size(); ++i)
          out += (i ? ", " : "") + std::to_string(s[i]);
        return out + "]";
      };
      throw std::runtime_error(file.source() + ": tensor '" + name + "' has shape " +
                               fmt(info->shape) + ", the model expects " + fmt(want));
    }
    auto values = file.to_f32(*info);  // upcasts F16/BF16
    auto src = torch::from_blob(values.data(), param.sizes(), torch::kFloat32);
    param.copy_(src);
  }
}

tokenizer_ptr load_tokenizer_dir(const std::string& dir) {
  auto path = fs::path(dir) / kTokenizerFile;
  if (fs::exists(path))
    return std::make_shared<char_tokenizer>(char_tokenizer::load(path.string()));
  if (fs::exists(fs::path(dir) / kHfTokenizerFile)) return hf_tokenizer::load_dir(dir);
  if (auto sp = load_sentencepiece_dir(dir)) return sp;  // tokenizer.model only
  return nullptr;
}

model_bundle load_model_dir(const std::string& dir, torch::Device device) {
  if (!fs::is_directory(dir)) throw std::runtime_error(dir + ": not a model directory");
  model_bundle b;
  b.config = model_config::load((fs::path(dir) / kConfigFile).string());
  b.model = CausalLM(b.config);
  auto weights = safetensors_file::read((fs::path(dir) / kWeightsFile).string());
  load_weights(*b.model, weights);
  b.model->to(device);
  b.tokenizer = load_tokenizer_dir(dir);
  if (b.tokenizer) {
    auto tok_path = fs::path(dir) / (b.tokenizer->kind() == std::string("char") ? kTokenizerFile
                                                                                : kHfTokenizerFile);
    if (b.tokenizer->vocab_size() > b.config.vocab_size)
      throw std::runtime_error(tok_path.string() + ": tokenizer has " +
                               std::to_string(b.tokenizer->vocab_size()) +
                               " tokens, the model only " + std::to_string(b.config.vocab_size));
  }
  return b;
}

namespace {

// Writes `j` to `path` atomically: a crash never leaves half a file.
void write_json(const fs::path& path, const nlohmann::ordered_json& j) {
  write_file_atomically(path.string(), j.dump(2) + "\n");
}

// tokenizer_config.json beside char_tokenizer_hf_json's tokenizer.json: the special tokens by
// name, so AutoTokenizer's bos/eos/pad/unk ids are the char tokenizer's.
nlohmann::ordered_json char_tokenizer_config_json(const tokenizer& tok, int64_t max_len) {
  nlohmann::ordered_json j;
  j["tokenizer_class"] = "PreTrainedTokenizerFast";
  j["bos_token"] = tok.token_bytes(tok.bos_id(), false);
  j["eos_token"] = tok.token_bytes(tok.eos_id(), false);
  j["pad_token"] = tok.token_bytes(tok.pad_id(), false);
  j["unk_token"] = "<unk>";
  j["model_max_length"] = max_len;
  j["clean_up_tokenization_spaces"] = false;
  return j;
}

}  // namespace

nlohmann::ordered_json char_tokenizer_hf_json(const tokenizer& tok) {
  // The char tokenizer's specials are ids 0..3 and every other id is one byte (an ASCII
  // character), so token_bytes(id, false) names each id exactly. A byte-level BPE without
  // merges splits text into single bytes, as the char tokenizer does, and it is what
  // transformers 5 rebuilds for a qwen2 config whatever tokenizer_config.json says
  // (Qwen2Tokenizer keeps only vocab and merges): a WordLevel model would lose its
  // pre-tokenizer there and drop every space.
  const int32_t n = tok.vocab_size();
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (int32_t id = 0; id < n; ++id) {
    const auto text = tok.token_bytes(id, /*skip_special=*/false);
    if (id < char_tokenizer::kNumSpecial) {
      vocab[text] = id;
      added.push_back({{"id", id},
                       {"content", text},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", true}});
    } else {
      std::string mapped;  // GPT-2's byte-level alphabet: ' ' is "Ġ", '\n' "Ċ"
      byte_level::encode(text.substr(0, 1), mapped);
      vocab[mapped] = id;
    }
  }
  const nlohmann::ordered_json byte_level = {{"type", "ByteLevel"},
                                             {"add_prefix_space", false},
                                             {"trim_offsets", true},
                                             {"use_regex", false}};
  nlohmann::ordered_json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added;
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = byte_level;
  j["post_processor"] = nullptr;  // asyncrl's encode adds no BOS/EOS; neither does this
  j["decoder"] = byte_level;
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", "<unk>"},  // a byte outside the vocabulary: one <unk> per byte
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", false},
                {"vocab", vocab},
                {"merges", nlohmann::ordered_json::array()}};
  return j;
}

nlohmann::ordered_json generation_config_json(const model_config& config, const tokenizer* tok) {
  int64_t bos = tok ? tok->bos_id() : config.bos_token_id;
  int64_t eos = tok ? tok->eos_id() : config.eos_token_id;
  int64_t pad = tok ? tok->pad_id() : -1;
  nlohmann::ordered_json j;
  if (bos >= 0) j["bos_token_id"] = bos;
  if (eos >= 0) {
    // A chat model ends its turn with its own token; stopping on it too is what its
    // generation_config.json does (Qwen2.5: [<|im_end|>, <|endoftext|>]).
    nlohmann::ordered_json stops = nlohmann::ordered_json::array();
    for (const char* turn_end : {"<|im_end|>", "<|eot_id|>"}) {
      const int64_t id = tok ? tok->special_id(turn_end) : -1;
      if (id >= 0 && id != eos) stops.push_back(id);
    }
    if (stops.empty()) {
      j["eos_token_id"] = eos;
    } else {
      stops.push_back(eos);
      j["eos_token_id"] = stops;
    }
  }
  if (pad >= 0) j["pad_token_id"] = pad;
  j["do_sample"] = false;  // greedy: what `asyncrl generate --temperature 0` and eval do
  return j;
}

void save_model_dir(const std::string& dir, CausalLMImpl& model, const tokenizer* tok,
                    st_dtype dtype) {
  if (dtype != st_dtype::f32 && dtype != st_dtype::bf16)
    throw std::invalid_argument(dir + ": model weights are saved as F32 or BF16, not " +
                                st_dtype_name(dtype));
  const bool bf16 = dtype == st_dtype::bf16;
  const auto torch_type = bf16 ? torch::kBFloat16 : torch::kFloat32;
  fs::create_directories(dir);
  model.config().save((fs::path(dir) / kConfigFile).string(), bf16 ? "bfloat16" : "float32");
  std::vector<torch::Tensor> keep;  // CPU copies in the file's dtype outlive the write
  std::vector<st_write_tensor> out;
  for (auto& [name, p] : model.ordered_parameters()) {
    // to() from float32 (or float64) rounds to nearest even, as torch's own .to(bfloat16).
    auto t = p.detach().to(torch::kCPU, torch_type).contiguous();
    keep.push_back(t);
    out.push_back({name, dtype, std::vector<int64_t>(t.sizes().begin(), t.sizes().end()),
                   t.data_ptr(), static_cast<size_t>(t.numel()) * st_dtype_size(dtype)});
  }
  write_safetensors((fs::path(dir) / kWeightsFile).string(), out, {{"format", "pt"}});
  write_json(fs::path(dir) / kGenerationConfigFile, generation_config_json(model.config(), tok));
  if (tok == nullptr) return;
  tok->save_dir(dir);
  if (tok->kind() == std::string("char")) {
    write_json(fs::path(dir) / kHfTokenizerFile, char_tokenizer_hf_json(*tok));
    write_json(fs::path(dir) / kHfTokenizerConfigFile,
               char_tokenizer_config_json(*tok, model.config().max_position_embeddings));
  }
}

void export_model_dir(const std::string& src, const std::string& out, st_dtype dtype) {
  if (fs::exists(out) && fs::exists(src) && fs::equivalent(src, out))
    throw std::invalid_argument(out + ": export writes a new directory, not over its source");
  auto b = load_model_dir(src, torch::kCPU);
  save_model_dir(out, *b.model, b.tokenizer.get(), dtype);
}

namespace {

tokenizer_ptr init_tokenizer(const model_section& m) {
  if (m.tokenizer.empty()) return std::make_shared<char_tokenizer>(char_tokenizer::builtin());
  auto t = load_tokenizer_dir(m.tokenizer);
  if (!t)
    throw std::runtime_error(m.tokenizer + ": model.tokenizer has neither " + kHfTokenizerFile +
                             " nor " + kTokenizerFile);
  return t;
}

}  // namespace

model_config peek_model_config(const model_section& m) {
  if (!m.path.empty()) {
    if (!fs::is_directory(m.path)) throw std::runtime_error(m.path + ": not a model directory");
    return model_config::load((fs::path(m.path) / kConfigFile).string());
  }
  auto t = init_tokenizer(m);
  return model_config::from_init(m.init, t->vocab_size(), t->bos_id(), t->eos_id());
}

model_bundle load_or_init_policy(const model_section& m, int64_t seed, torch::Device device) {
  if (!m.path.empty()) {
    auto b = load_model_dir(m.path, device);
    if (!b.tokenizer) b.tokenizer = std::make_shared<char_tokenizer>(char_tokenizer::builtin());
    return b;
  }
  model_bundle b;
  b.tokenizer = init_tokenizer(m);
  b.config = model_config::from_init(m.init, b.tokenizer->vocab_size(), b.tokenizer->bos_id(),
                                     b.tokenizer->eos_id());
  b.model = init_causal_lm(b.config, m.init.init_std, static_cast<uint64_t>(seed), device);
  return b;
}

std::string params_sha256(const CausalLMImpl& model) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  for (auto& [name, p] : model.ordered_parameters()) {
    auto t = p.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    EVP_DigestUpdate(ctx, t.data_ptr(), static_cast<size_t>(t.numel()) * sizeof(float));
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

double params_checksum(const CausalLMImpl& model) {
  double total = 0;
  for (auto& [name, p] : model.ordered_parameters())
    total += p.detach().abs().sum().to(torch::kDouble).item<double>();
  return total;
}

}  // namespace asyncrl
