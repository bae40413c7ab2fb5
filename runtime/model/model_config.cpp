#include "runtime/model/model_config.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "runtime/model/model_source.hpp"

namespace asyncrl {

namespace {

[[noreturn]] void fail(const std::string& src, const std::string& key, const std::string& what) {
  throw std::runtime_error(src + ": key '" + key + "': " + what);
}

int64_t get_int(const nlohmann::json& j, const std::string& src, const std::string& key,
                bool required, int64_t fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) fail(src, key, "missing");
    return fallback;
  }
  if (!it->is_number_integer()) fail(src, key, "expected an integer, got " + it->dump());
  return it->get<int64_t>();
}

double get_num(const nlohmann::json& j, const std::string& src, const std::string& key,
               double fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) fail(src, key, "expected a number, got " + it->dump());
  return it->get<double>();
}

bool get_bool(const nlohmann::json& j, const std::string& src, const std::string& key,
              bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail(src, key, "expected true or false, got " + it->dump());
  return it->get<bool>();
}

// HF allows eos_token_id to be a list; the first entry is the one generation stops on.
int64_t get_token_id(const nlohmann::json& j, const std::string& src, const std::string& key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return -1;
  if (it->is_array() && !it->empty() && (*it)[0].is_number_integer())
    return (*it)[0].get<int64_t>();
  if (!it->is_number_integer()) fail(src, key, "expected an integer, got " + it->dump());
  return it->get<int64_t>();
}

}  // namespace

model_config model_config::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open model config");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + ": invalid JSON: " + e.what());
  }
  if (!j.is_object()) throw std::runtime_error(path + ": expected a JSON object");
  model_config c;
  auto type = j.find("model_type");
  if (type == j.end() || !type->is_string()) fail(path, "model_type", "missing or not a string");
  auto arch = parse_enum<model_arch>(type->get<std::string>());
  if (!arch)
    fail(path, "model_type",
         "unsupported '" + type->get<std::string>() + "' (expected qwen2 or llama)");
  c.model_type = *arch;
  c.vocab_size = get_int(j, path, "vocab_size", true, 0);
  c.hidden_size = get_int(j, path, "hidden_size", true, 0);
  c.intermediate_size = get_int(j, path, "intermediate_size", true, 0);
  c.num_hidden_layers = get_int(j, path, "num_hidden_layers", true, 0);
  c.num_attention_heads = get_int(j, path, "num_attention_heads", true, 0);
  c.num_key_value_heads = get_int(j, path, "num_key_value_heads", false, c.num_attention_heads);
  c.head_dim = get_int(j, path, "head_dim", false,
                       c.num_attention_heads > 0 ? c.hidden_size / c.num_attention_heads : 0);
  c.max_position_embeddings = get_int(j, path, "max_position_embeddings", true, 0);
  c.rms_norm_eps = get_num(j, path, "rms_norm_eps", 1e-6);
  c.rope_theta = get_num(j, path, "rope_theta", 10000.0);
  c.tie_word_embeddings = get_bool(j, path, "tie_word_embeddings", false);
  c.attention_bias =
      c.model_type == model_arch::qwen2 ? true : get_bool(j, path, "attention_bias", false);
  c.bos_token_id = get_token_id(j, path, "bos_token_id");
  c.eos_token_id = get_token_id(j, path, "eos_token_id");
  c.validate(path);
  return c;
}

void model_config::validate(const std::string& src) const {
  auto pos = [&](const char* key, int64_t v) {
    if (v <= 0) fail(src, key, "must be > 0, got " + std::to_string(v));
  };
  pos("vocab_size", vocab_size);
  pos("hidden_size", hidden_size);
  pos("intermediate_size", intermediate_size);
  pos("num_hidden_layers", num_hidden_layers);
  pos("num_attention_heads", num_attention_heads);
  pos("num_key_value_heads", num_key_value_heads);
  pos("head_dim", head_dim);
  pos("max_position_embeddings", max_position_embeddings);
  if (num_attention_heads % num_key_value_heads != 0)
    fail(src, "num_key_value_heads", "must divide num_attention_heads");
  if (head_dim % 2 != 0) fail(src, "head_dim", "must be even for rotary embeddings");
  if (rms_norm_eps <= 0) fail(src, "rms_norm_eps", "must be > 0");
  if (rope_theta <= 0) fail(src, "rope_theta", "must be > 0");
  if (eos_token_id >= vocab_size) fail(src, "eos_token_id", "outside the vocabulary");
  if (bos_token_id >= vocab_size) fail(src, "bos_token_id", "outside the vocabulary");
}

void model_config::save(const std::string& path, const std::string& dtype) const {
  nlohmann::ordered_json j;
  const bool qwen2 = model_type == model_arch::qwen2;
  j["architectures"] = {qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM"};
  j["model_type"] = to_string(model_type);
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  j["head_dim"] = head_dim;
  j["max_position_embeddings"] = max_position_embeddings;
  j["rms_norm_eps"] = rms_norm_eps;
  // rope_theta for transformers 4.x, rope_parameters for 5.x (which also reads rope_theta).
  j["rope_theta"] = rope_theta;
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", rope_theta}};
  j["tie_word_embeddings"] = tie_word_embeddings;
  if (qwen2) {
    // Qwen2Config's defaults would switch sliding-window attention on for layers past
    // max_window_layers when use_sliding_window is true; this model attends to everything.
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = num_hidden_layers;
  } else {
    j["attention_bias"] = attention_bias;
    j["mlp_bias"] = false;
    j["pretraining_tp"] = 1;
  }
  j["attention_dropout"] = 0.0;
  j["hidden_act"] = "silu";
  j["initializer_range"] = 0.02;
  j["use_cache"] = true;
  // "dtype" is transformers 5's name; 4.x reads "torch_dtype".
  j["dtype"] = dtype;
  j["torch_dtype"] = dtype;
  if (bos_token_id >= 0) j["bos_token_id"] = bos_token_id;
  if (eos_token_id >= 0) j["eos_token_id"] = eos_token_id;
  auto tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw std::runtime_error(path + ": cannot write model config");
    out << j.dump(2) << "\n";
    if (!out) throw std::runtime_error(path + ": write failed");
  }
  std::filesystem::rename(tmp, path);
}

model_config model_config::from_init(const model_init_config& init, int64_t vocab_size,
                                     int64_t bos_id, int64_t eos_id) {
  model_config c;
  c.model_type = init.arch;
  c.vocab_size = vocab_size;
  c.hidden_size = init.hidden_size;
  c.intermediate_size = init.intermediate_size;
  c.num_hidden_layers = init.num_hidden_layers;
  c.num_attention_heads = init.num_attention_heads;
  c.num_key_value_heads = init.num_key_value_heads;
  c.head_dim = init.hidden_size / init.num_attention_heads;
  c.max_position_embeddings = init.max_position_embeddings;
  c.rms_norm_eps = init.rms_norm_eps;
  c.rope_theta = init.rope_theta;
  c.tie_word_embeddings = init.tie_word_embeddings;
  c.attention_bias = init.arch == model_arch::qwen2;
  c.bos_token_id = bos_id;
  c.eos_token_id = eos_id;
  c.validate("model.init");
  return c;
}

int64_t model_config::num_parameters() const {
  int64_t h = hidden_size, q = num_attention_heads * head_dim, kv = num_key_value_heads * head_dim;
  int64_t attn = h * q + 2 * h * kv + q * h + (attention_bias ? q + 2 * kv : 0);
  int64_t mlp = 3 * h * intermediate_size;
  int64_t layer = attn + mlp + 2 * h;
  int64_t emb = vocab_size * h;
  return emb + (tie_word_embeddings ? 0 : emb) + num_hidden_layers * layer + h;
}

}  // namespace asyncrl
