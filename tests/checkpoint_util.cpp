#include "tests/checkpoint_util.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "runtime/common/rng.hpp"

namespace asyncrl::test {

model_config write_tiny_checkpoint(const std::string& dir, const tiny_arch& a, uint64_t seed,
                                   st_dtype dtype) {
  std::filesystem::create_directories(dir);
  const int64_t D = a.hidden / a.heads;
  const bool bias = a.model_type == "qwen2" || a.llama_bias;
  {
    std::ofstream cfg(dir + "/config.json");
    cfg << "{\n  \"model_type\": \"" << a.model_type << "\",\n"
        << "  \"vocab_size\": " << a.vocab << ",\n  \"hidden_size\": " << a.hidden << ",\n"
        << "  \"intermediate_size\": " << a.inter << ",\n"
        << "  \"num_hidden_layers\": " << a.layers << ",\n"
        << "  \"num_attention_heads\": " << a.heads << ",\n"
        << "  \"num_key_value_heads\": " << a.kv_heads << ",\n"
        << "  \"max_position_embeddings\": " << a.max_pos << ",\n"
        << "  \"rms_norm_eps\": " << a.eps << ",\n  \"rope_theta\": " << a.theta << ",\n"
        << "  \"tie_word_embeddings\": " << (a.tie ? "true" : "false") << ",\n"
        << (a.model_type == "llama"
                ? std::string("  \"attention_bias\": ") + (a.llama_bias ? "true" : "false") + ",\n"
                : std::string())
        << "  \"bos_token_id\": 1,\n  \"eos_token_id\": 2\n}\n";
  }
  struct spec {
    std::string name;
    std::vector<int64_t> shape;
    bool norm;
  };
  std::vector<spec> specs{{"model.embed_tokens.weight", {a.vocab, a.hidden}, false}};
  for (int64_t l = 0; l < a.layers; ++l) {
    auto p = "model.layers." + std::to_string(l) + ".";
    specs.push_back({p + "input_layernorm.weight", {a.hidden}, true});
    specs.push_back({p + "self_attn.q_proj.weight", {a.heads * D, a.hidden}, false});
    specs.push_back({p + "self_attn.k_proj.weight", {a.kv_heads * D, a.hidden}, false});
    specs.push_back({p + "self_attn.v_proj.weight", {a.kv_heads * D, a.hidden}, false});
    if (bias) {
      specs.push_back({p + "self_attn.q_proj.bias", {a.heads * D}, false});
      specs.push_back({p + "self_attn.k_proj.bias", {a.kv_heads * D}, false});
      specs.push_back({p + "self_attn.v_proj.bias", {a.kv_heads * D}, false});
    }
    specs.push_back({p + "self_attn.o_proj.weight", {a.hidden, a.heads * D}, false});
    specs.push_back({p + "post_attention_layernorm.weight", {a.hidden}, true});
    specs.push_back({p + "mlp.gate_proj.weight", {a.inter, a.hidden}, false});
    specs.push_back({p + "mlp.up_proj.weight", {a.inter, a.hidden}, false});
    specs.push_back({p + "mlp.down_proj.weight", {a.hidden, a.inter}, false});
  }
  specs.push_back({"model.norm.weight", {a.hidden}, true});
  if (!a.tie) specs.push_back({"lm_head.weight", {a.vocab, a.hidden}, false});

  rng_stream rng(seed, 0, 0);
  uint64_t counter = 0;
  std::vector<std::vector<uint8_t>> blobs;
  std::vector<st_write_tensor> out;
  for (auto& s : specs) {
    int64_t n = 1;
    for (auto d : s.shape)
      n *= d;
    std::vector<uint8_t> bytes(n * st_dtype_size(dtype));
    for (int64_t i = 0; i < n; ++i) {
      // Uniform in [-0.25, 0.25); norms around 1 so that a wrong norm is visible.
      float v = static_cast<float>(rng.uniform(counter++) * 0.5 - 0.25);
      if (s.norm) v = 1.0f + v;
      if (dtype == st_dtype::f32) {
        std::memcpy(&bytes[i * 4], &v, 4);
      } else {
        uint16_t h = dtype == st_dtype::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
        std::memcpy(&bytes[i * 2], &h, 2);
      }
    }
    blobs.push_back(std::move(bytes));
    out.push_back({s.name, dtype, s.shape, blobs.back().data(), blobs.back().size()});
  }
  write_safetensors(dir + "/model.safetensors", out);
  return model_config::load(dir + "/config.json");
}

}  // namespace asyncrl::test
