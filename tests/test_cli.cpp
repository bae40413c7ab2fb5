// The `asyncrl` binary's model commands on a checkpoint the test writes itself.

#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/model/model_io.hpp"
#include "runtime/task/prompting.hpp"
#include "runtime/text/char_tokenizer.hpp"
#include "tests/checkpoint_util.hpp"
#include "tests/test_util.hpp"

using namespace asyncrl;

namespace {

std::string cli() {
  return ASYNCRL_CLI;
}

TEST(Cli, ScorePrintsNextTokenLogprobsOfTheLoadedCheckpoint) {
  test::temp_dir dir("cli");
  test::tiny_arch a;
  test::write_tiny_checkpoint(dir.file("m"), a, 5, st_dtype::bf16);
  test::write_text(dir.file("in.jsonl"),
                   "{\"token_ids\": [1, 5, 9, 33, 2]}\n\n{\"token_ids\": [7]}\n");
  std::string out;
  ASSERT_EQ(test::run_command(cli() + " score --model " + dir.file("m") + " --input " +
                                  dir.file("in.jsonl") + " 2>&1",
                              &out),
            0)
      << out;
  std::istringstream lines(out);
  std::string l1, l2;
  std::getline(lines, l1);
  std::getline(lines, l2);
  auto lp = nlohmann::json::parse(l1).at("logprobs").get<std::vector<double>>();
  ASSERT_EQ(lp.size(), 4u);
  EXPECT_TRUE(nlohmann::json::parse(l2).at("logprobs").empty());

  auto b = load_model_dir(dir.file("m"), torch::kCPU);
  torch::NoGradGuard ng;
  auto ids = torch::tensor({1, 5, 9, 33, 2}, torch::kLong).unsqueeze(0);
  auto logp = torch::log_softmax(b.model->forward(ids, torch::arange(5).unsqueeze(0)), -1)[0];
  for (int i = 1; i < 5; ++i)
    EXPECT_NEAR(lp[i - 1], logp[i - 1][ids[0][i].item<int64_t>()].item<double>(), 1e-6);
}

TEST(Cli, ScoreReportsTheBadLine) {
  test::temp_dir dir("cli");
  test::write_tiny_checkpoint(dir.file("m"), test::tiny_arch{}, 5);
  test::write_text(dir.file("in.jsonl"), "{\"token_ids\": [1, 2]}\n{\"token_ids\": [1, 999]}\n");
  std::string out;
  EXPECT_NE(
      test::run_command(
          cli() + " score -m " + dir.file("m") + " -i " + dir.file("in.jsonl") + " 2>&1", &out),
      0);
  EXPECT_NE(out.find("in.jsonl:2: token id 999 outside the vocabulary of 37"), std::string::npos)
      << out;
  // Text needs the model's tokenizer, which this HF-style checkpoint lacks.
  test::write_text(dir.file("t.jsonl"), "{\"text\": \"12+3\"}\n");
  EXPECT_NE(
      test::run_command(
          cli() + " score -m " + dir.file("m") + " -i " + dir.file("t.jsonl") + " 2>&1", &out),
      0);
  EXPECT_NE(out.find("give token_ids instead of text"), std::string::npos) << out;
}

TEST(Cli, EvalReportsAccuracyAsJson) {
  test::temp_dir dir("cli");
  // A fresh model with the built-in tokenizer: accuracy is near zero, but the JSON must be
  // complete and the numbers in range.
  auto tok = char_tokenizer::builtin();
  model_config c;
  c.vocab_size = tok.vocab_size();
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 64;
  c.eos_token_id = tok.eos_id();
  auto m = init_causal_lm(c, 0.02, 1, torch::kCPU);
  save_model_dir(dir.file("m"), *m, &tok);
  test::write_text(dir.file("d.jsonl"),
                   "{\"question\": \"1+1=?\", \"answer\": \"1+1+0=2 #### 2\"}\n"
                   "{\"question\": \"2+2=?\", \"answer\": \"2+2+0=4 #### 4\"}\n");
  std::string out;
  ASSERT_EQ(test::run_command(cli() + " eval -m " + dir.file("m") + " -d " + dir.file("d.jsonl") +
                                  " --samples 3 --max-new-tokens 8",
                              &out),
            0)
      << out;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j.at("questions"), 2);
  EXPECT_GE(j.at("pass@1").get<double>(), 0.0);
  EXPECT_LE(j.at("pass@1").get<double>(), 1.0);
  EXPECT_TRUE(j.contains("mean@3"));
  EXPECT_LE(j.at("mean_response_tokens").get<double>(), 8.0);
}

TEST(Cli, ConfigErrorsExitWithStatus2) {
  std::string out;
  EXPECT_EQ(test::run_command(cli() + " config sft.stepz=1 2>&1", &out), 2);
  EXPECT_NE(out.find("unknown key 'sft.stepz'"), std::string::npos) << out;
}

}  // namespace
