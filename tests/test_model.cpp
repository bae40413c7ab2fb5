// The Qwen2/Llama forward pass against the independent double-precision reference in
// reference_model.hpp, on checkpoints written by the test itself.

#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include "runtime/model/model_io.hpp"
#include "runtime/model/safetensors.hpp"
#include "tests/checkpoint_util.hpp"
#include "tests/reference_model.hpp"
#include "tests/test_util.hpp"

using namespace asyncrl;

namespace {

// Max |a - b| between the model's logits (1, T, V) and the reference's T x V values.
double max_diff(const torch::Tensor& logits, const std::vector<double>& ref) {
  auto l = logits.to(torch::kDouble).contiguous();
  auto* p = l.data_ptr<double>();
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    worst = std::max(worst, std::abs(p[i] - ref[i]));
  return worst;
}

torch::Tensor as_tensor(const std::vector<int64_t>& v) {
  return torch::tensor(v, torch::kLong).unsqueeze(0);
}

struct arch_case {
  const char* name;
  test::tiny_arch arch;
  st_dtype dtype;
};

// Keeps ctest's test names readable.
void PrintTo(const arch_case& c, std::ostream* os) {
  *os << c.name;
}

class ModelVsReference : public ::testing::TestWithParam<arch_case> {};

// Tolerance: float32 model vs double reference on logits of magnitude ~1.
constexpr double kLogitTol = 2e-5;

TEST_P(ModelVsReference, LogitsMatchWithCausalMask) {
  test::temp_dir dir("model");
  auto cfg = test::write_tiny_checkpoint(dir.path().string(), GetParam().arch, 7, GetParam().dtype);
  auto bundle = load_model_dir(dir.path().string(), torch::kCPU);
  auto st = safetensors_file::read(dir.file("model.safetensors"));
  test::ref_model ref(cfg, st);

  std::vector<int64_t> ids{1, 5, 9, 33, 2, 17, 4, 4, 30};
  std::vector<int64_t> pos(ids.size());
  for (size_t i = 0; i < pos.size(); ++i)
    pos[i] = static_cast<int64_t>(i);
  torch::NoGradGuard ng;
  auto logits = bundle.model->forward(as_tensor(ids), as_tensor(pos));
  ASSERT_EQ(logits.sizes(), (torch::IntArrayRef{1, 9, cfg.vocab_size}));
  EXPECT_LT(max_diff(logits, ref.logits(ids, pos)), kLogitTol);
}

// Shared-prompt packing needs explicit positions and an arbitrary mask: a prompt of 3 and two
// responses of 2 that both restart at position 3 and see only the prompt and themselves.
TEST_P(ModelVsReference, LogitsMatchWithExplicitPositionsAndMask) {
  test::temp_dir dir("model");
  auto cfg =
      test::write_tiny_checkpoint(dir.path().string(), GetParam().arch, 11, GetParam().dtype);
  auto bundle = load_model_dir(dir.path().string(), torch::kCPU);
  test::ref_model ref(cfg, safetensors_file::read(dir.file("model.safetensors")));

  std::vector<int64_t> ids{1, 7, 8, 20, 21, 30, 31};
  std::vector<int64_t> pos{0, 1, 2, 3, 4, 3, 4};
  std::vector<int> seg{0, 0, 0, 1, 1, 2, 2};
  const size_t T = ids.size();
  std::vector<std::vector<bool>> allowed(T, std::vector<bool>(T, false));
  auto mask = torch::zeros({1, int64_t(T), int64_t(T)}, torch::kBool);
  for (size_t t = 0; t < T; ++t)
    for (size_t u = 0; u <= t; ++u)
      if (seg[u] == 0 || seg[u] == seg[t]) {
        allowed[t][u] = true;
        mask[0][t][u] = true;
      }
  torch::NoGradGuard ng;
  auto logits = bundle.model->forward(as_tensor(ids), as_tensor(pos), mask);
  EXPECT_LT(max_diff(logits, ref.logits(ids, pos, allowed)), kLogitTol);
}

INSTANTIATE_TEST_SUITE_P(
    Archs, ModelVsReference,
    ::testing::Values(
        arch_case{"qwen2_gqa_untied_f32", {"qwen2", 37, 32, 48, 2, 4, 2, false}, st_dtype::f32},
        arch_case{"qwen2_tied_bf16", {"qwen2", 37, 32, 48, 2, 4, 1, true}, st_dtype::bf16},
        arch_case{"llama_mha_tied_f16", {"llama", 41, 24, 40, 3, 3, 3, true}, st_dtype::f16},
        arch_case{"llama_bias_gqa", {"llama", 43, 32, 64, 1, 8, 2, false, true}, st_dtype::f32}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ModelIo, SaveLoadRoundTripIsBitExact) {
  test::temp_dir dir("model");
  test::tiny_arch a;
  auto cfg = test::write_tiny_checkpoint(dir.file("a"), a, 3);
  auto first = load_model_dir(dir.file("a"), torch::kCPU);
  save_model_dir(dir.file("b"), *first.model, nullptr);
  auto second = load_model_dir(dir.file("b"), torch::kCPU);
  EXPECT_EQ(params_sha256(*first.model), params_sha256(*second.model));
  EXPECT_EQ(second.config.num_hidden_layers, cfg.num_hidden_layers);
  EXPECT_EQ(second.config.attention_bias, true);
}

TEST(ModelIo, HfParameterNames) {
  test::tiny_arch a;
  a.layers = 1;
  test::temp_dir dir("model");
  auto cfg = test::write_tiny_checkpoint(dir.path().string(), a, 1);
  CausalLM m(cfg);
  std::vector<std::string> names;
  for (auto& [n, p] : m->ordered_parameters())
    names.push_back(n);
  std::vector<std::string> want{"model.embed_tokens.weight",
                                "model.layers.0.self_attn.q_proj.weight",
                                "model.layers.0.self_attn.q_proj.bias",
                                "model.layers.0.self_attn.k_proj.weight",
                                "model.layers.0.self_attn.k_proj.bias",
                                "model.layers.0.self_attn.v_proj.weight",
                                "model.layers.0.self_attn.v_proj.bias",
                                "model.layers.0.self_attn.o_proj.weight",
                                "model.layers.0.mlp.gate_proj.weight",
                                "model.layers.0.mlp.up_proj.weight",
                                "model.layers.0.mlp.down_proj.weight",
                                "model.layers.0.input_layernorm.weight",
                                "model.layers.0.post_attention_layernorm.weight",
                                "model.norm.weight",
                                "lm_head.weight"};
  EXPECT_EQ(names, want);
  EXPECT_EQ(cfg.num_parameters(), [&] {
    int64_t n = 0;
    for (auto& [_, p] : m->ordered_parameters())
      n += p.numel();
    return n;
  }());
}

TEST(ModelIo, MissingOrMisshapenTensorIsAClearError) {
  test::temp_dir dir("model");
  test::tiny_arch a;
  test::write_tiny_checkpoint(dir.path().string(), a, 1);
  // Same file, but the config claims a wider MLP: every mlp tensor now has the wrong shape.
  auto text = test::read_text(dir.file("config.json"));
  auto at = text.find("\"intermediate_size\": 48");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 23, "\"intermediate_size\": 50");
  test::write_text(dir.file("config.json"), text);
  try {
    load_model_dir(dir.path().string(), torch::kCPU);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find("mlp.gate_proj.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[48, 32]"), std::string::npos) << msg;
  }
}

TEST(ModelIo, BadConfigNamesTheKey) {
  test::temp_dir dir("model");
  test::write_text(dir.file("config.json"),
                   "{\"model_type\": \"qwen2\", \"vocab_size\": \"many\"}");
  try {
    model_config::load(dir.file("config.json"));
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("vocab_size"), std::string::npos) << msg;
  }
}

}  // namespace
