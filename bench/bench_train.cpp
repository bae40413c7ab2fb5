// Training throughput of the default demo model: tokens through forward + backward + AdamW
// step per second, at the warm-start's batch shape.
//   build/bench/bench_train [--batch 64] [--seq 40] [--steps 20] [--out FILE]

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/nn/functional/loss.h>

#include "bench/bench_util.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/model/model.hpp"
#include "runtime/text/char_tokenizer.hpp"
#include "runtime/train/optimizer.hpp"

using namespace asyncrl;

int main(int argc, char** argv) {
  const int64_t B = std::stoll(bench::arg(argc, argv, "--batch", "64"));
  const int64_t T = std::stoll(bench::arg(argc, argv, "--seq", "40"));
  const int steps = std::stoi(bench::arg(argc, argv, "--steps", "20"));
  const int threads = std::stoi(
      bench::arg(argc, argv, "--threads", std::to_string(std::thread::hardware_concurrency())));
  at::set_num_threads(threads);

  run_config rc;
  auto tok = char_tokenizer::builtin();
  auto cfg = model_config::from_init(rc.model.init, tok.vocab_size(), tok.bos_id(), tok.eos_id());
  auto model = init_causal_lm(cfg, 0.02, 1, torch::kCPU);
  policy_optimizer opt(model->parameters(), optimizer_options{});
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  auto ids = torch::randint(4, tok.vocab_size(), {B, T + 1}, gen, torch::kLong);
  auto pos = torch::arange(T).unsqueeze(0).expand({B, T});

  std::vector<double> per_step;
  for (int s = 0; s < steps + 2; ++s) {
    double t0 = bench::now_s();
    opt.zero_grad();
    auto logits = model->forward(ids.narrow(1, 0, T), pos);
    auto loss = torch::nn::functional::cross_entropy(logits.reshape({B * T, -1}),
                                                     ids.narrow(1, 1, T).reshape({B * T}));
    loss.backward();
    opt.step(1e-3);
    if (s >= 2) per_step.push_back(bench::now_s() - t0);  // two warm-up steps
  }
  double step_s = bench::median(per_step);
  nlohmann::ordered_json j{{"benchmark", "train_throughput"},
                           {"machine", bench::machine()},
                           {"threads", threads},
                           {"model_parameters", cfg.num_parameters()},
                           {"batch", B},
                           {"seq_len", T},
                           {"steps", steps},
                           {"median_step_s", step_s},
                           {"tokens_per_s", double(B * T) / step_s}};
  bench::emit(argc, argv, j);
  return 0;
}
