#include "runtime/model/model_io.hpp"

#include <openssl/evp.h>

#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "runtime/model/model_source.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/text/char_tokenizer.hpp"
#include "runtime/text/hf_tokenizer.hpp"

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
  if (fs::exists(fs::path(dir) / kHfTokenizerFile)) return hf_tokenizer::load_dir(dir);
  auto path = fs::path(dir) / kTokenizerFile;
  if (fs::exists(path))
    return std::make_shared<char_tokenizer>(char_tokenizer::load(path.string()));
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

void save_model_dir(const std::string& dir, CausalLMImpl& model, const tokenizer* tok) {
  fs::create_directories(dir);
  model.config().save((fs::path(dir) / kConfigFile).string());
  std::vector<torch::Tensor> keep;  // CPU float32 copies outlive the write
  std::vector<st_write_tensor> out;
  for (auto& [name, p] : model.ordered_parameters()) {
    auto t = p.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    keep.push_back(t);
    out.push_back({name, st_dtype::f32, std::vector<int64_t>(t.sizes().begin(), t.sizes().end()),
                   t.data_ptr(), static_cast<size_t>(t.numel()) * sizeof(float)});
  }
  write_safetensors((fs::path(dir) / kWeightsFile).string(), out, {{"format", "pt"}});
  if (tok != nullptr) tok->save_dir(dir);
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
