// Model directories for other tools (docs/hf-models.md, "Output others can load"): the files
// save_model_dir writes beside the weights, and the bf16 round trip. transformers itself is
// checked by tests/hf/hf_export_test.py (label hf).

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "runtime/model/model_io.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/text/char_tokenizer.hpp"
#include "tests/test_util.hpp"
#include "tests/tiny_model.hpp"

namespace asyncrl {
namespace {

nlohmann::json read_json(const std::string& path) {
  return nlohmann::json::parse(test::read_text(path));
}

CausalLM tiny_char_model(const char_tokenizer& tok, model_arch arch) {
  auto c = test::tiny_model_config(tok.vocab_size());
  c.model_type = arch;
  c.attention_bias = arch == model_arch::qwen2;
  c.bos_token_id = tok.bos_id();
  c.eos_token_id = tok.eos_id();
  c.rope_theta = 5000;
  c.rms_norm_eps = 1e-5;
  return init_causal_lm(c, 0.5, 7, torch::kCPU);  // large std: many weights not bf16-exact
}

TEST(HfExport, ConfigNamesEveryFieldTransformersReads) {
  test::temp_dir dir("hfx");
  auto tok = char_tokenizer::builtin();
  auto qwen = tiny_char_model(tok, model_arch::qwen2);
  save_model_dir(dir.file("q"), *qwen, &tok, st_dtype::bf16);
  auto q = read_json(dir.file("q/config.json"));
  EXPECT_EQ(q.at("architectures"), nlohmann::json::array({"Qwen2ForCausalLM"}));
  EXPECT_EQ(q.at("dtype"), "bfloat16");
  EXPECT_EQ(q.at("torch_dtype"), "bfloat16");
  EXPECT_EQ(q.at("rope_theta"), 5000.0);
  EXPECT_EQ(q.at("rope_parameters").at("rope_theta"), 5000.0);
  EXPECT_EQ(q.at("rope_parameters").at("rope_type"), "default");
  EXPECT_EQ(q.at("rms_norm_eps"), 1e-5);
  EXPECT_EQ(q.at("use_sliding_window"), false);
  EXPECT_EQ(q.at("head_dim"), 8);
  EXPECT_EQ(q.at("bos_token_id"), 1);
  EXPECT_EQ(q.at("eos_token_id"), 2);

  auto llama = tiny_char_model(tok, model_arch::llama);
  save_model_dir(dir.file("l"), *llama, &tok);
  auto l = read_json(dir.file("l/config.json"));
  EXPECT_EQ(l.at("architectures"), nlohmann::json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(l.at("attention_bias"), false);
  EXPECT_EQ(l.at("mlp_bias"), false);
  EXPECT_EQ(l.at("dtype"), "float32");
  // asyncrl reads back what it wrote.
  auto back = model_config::load(dir.file("l/config.json"));
  EXPECT_EQ(back.rope_theta, 5000);
  EXPECT_EQ(back.rms_norm_eps, 1e-5);
  EXPECT_FALSE(back.attention_bias);
}

TEST(HfExport, GenerationConfigIsGreedyWithTheTokenizersIds) {
  auto tok = char_tokenizer::builtin();
  auto m = tiny_char_model(tok, model_arch::qwen2);
  auto g = generation_config_json(m->config(), &tok);
  EXPECT_EQ(g.dump(), R"({"bos_token_id":1,"eos_token_id":2,"pad_token_id":0,"do_sample":false})");
  // Without a tokenizer: the config's ids, no pad.
  auto c = m->config();
  c.bos_token_id = -1;
  c.eos_token_id = 5;
  EXPECT_EQ(generation_config_json(c, nullptr).dump(), R"({"eos_token_id":5,"do_sample":false})");
}

TEST(HfExport, Bf16RoundTripRoundsToNearestEvenAndLoadsBack) {
  test::temp_dir dir("hfx");
  auto tok = char_tokenizer::builtin();
  auto m = tiny_char_model(tok, model_arch::qwen2);
  save_model_dir(dir.file("b"), *m, &tok, st_dtype::bf16);
  auto file = safetensors_file::read(dir.file("b/model.safetensors"));
  EXPECT_EQ(file.metadata().at("format"), "pt");
  int64_t inexact = 0;
  for (auto& [name, p] : m->ordered_parameters()) {
    const auto* info = file.find(name);
    ASSERT_NE(info, nullptr) << name;
    ASSERT_EQ(info->dtype, st_dtype::bf16) << name;
    const auto* raw = reinterpret_cast<const uint16_t*>(file.data(*info));
    auto src = p.detach().contiguous();
    const float* f = src.data_ptr<float>();
    for (int64_t i = 0; i < src.numel(); ++i) {
      ASSERT_EQ(raw[i], f32_to_bf16(f[i])) << name << "[" << i << "]";
      inexact += bf16_to_f32(raw[i]) != f[i];
    }
  }
  EXPECT_GT(inexact, 0);  // the rounding was exercised
  // asyncrl loads the bf16 directory (upcast), and a re-save as bf16 is bit-identical.
  auto b = load_model_dir(dir.file("b"), torch::kCPU);
  ASSERT_TRUE(b.tokenizer);
  EXPECT_STREQ(b.tokenizer->kind(), "char");
  for (auto& [name, p] : b.model->ordered_parameters())
    EXPECT_TRUE(
        torch::equal(p, m->named_parameters()[name].to(torch::kBFloat16).to(torch::kFloat32)))
        << name;
  export_model_dir(dir.file("b"), dir.file("c"), st_dtype::bf16);
  EXPECT_EQ(test::read_text(dir.file("b/model.safetensors")),
            test::read_text(dir.file("c/model.safetensors")));
  EXPECT_THROW(export_model_dir(dir.file("b"), dir.file("b"), st_dtype::f32),
               std::invalid_argument);
  EXPECT_THROW(save_model_dir(dir.file("d"), *m, &tok, st_dtype::f16), std::invalid_argument);
}

TEST(HfExport, CharTokenizerJsonHasTheSameIds) {
  auto tok = char_tokenizer::builtin();
  auto j = char_tokenizer_hf_json(tok);
  const auto& vocab = j.at("model").at("vocab");
  EXPECT_EQ(static_cast<int32_t>(vocab.size()), tok.vocab_size());
  // Byte-level names: printable ASCII as itself, ' ' as U+0120 and '\n' as U+010A.
  for (auto [c, name] : std::vector<std::pair<char, std::string>>{
           {'0', "0"}, {'+', "+"}, {'z', "z"}, {'~', "~"}, {' ', "\xC4\xA0"}, {'\n', "\xC4\x8A"}}) {
    auto ids = tok.encode(std::string(1, c));
    ASSERT_EQ(ids.size(), 1u);
    EXPECT_EQ(vocab.at(name), ids[0]) << "'" << c << "'";
  }
  EXPECT_EQ(vocab.at("<eos>"), tok.eos_id());
  EXPECT_EQ(j.at("added_tokens").size(), 4u);
  EXPECT_EQ(j.at("model").at("type"), "BPE");
  EXPECT_TRUE(j.at("model").at("merges").empty());

  // The directory keeps char_tokenizer.json, which asyncrl prefers over the tokenizer.json
  // written for transformers.
  test::temp_dir dir("hfx");
  auto m = tiny_char_model(tok, model_arch::llama);
  save_model_dir(dir.path().string(), *m, &tok);
  for (const char* f :
       {"char_tokenizer.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    EXPECT_TRUE(std::filesystem::exists(dir.path() / f)) << f;
  auto t = load_tokenizer_dir(dir.path().string());
  ASSERT_TRUE(t);
  EXPECT_STREQ(t->kind(), "char");
  auto tc = read_json(dir.file("tokenizer_config.json"));
  EXPECT_EQ(tc.at("eos_token"), "<eos>");
  EXPECT_EQ(tc.at("pad_token"), "<pad>");
}

}  // namespace
}  // namespace asyncrl
