// Shared-prompt attention (docs/algorithms.md §11): one policy forward + backward over a group
// packed as [prompt, r_1..r_K] vs K separate sequences, at several (Lp, Lr, K), beside the token
// ratio K (Lp + Lr) / (Lp + K Lr) and the attention cost ratio
// rho = (Lp^2 + K Lr (Lp + Lr)) / (K (Lp + Lr)^2) of the reference notes. Our packed attention
// uses a dense (T, T) mask, so its attention work is (Lp + K Lr)^2 / (K (Lp + Lr)^2) of the
// unpacked one, which is also reported ("dense_attention_ratio").
//   build/bench/bench_shared_prompt [--reps 5] [--shapes 256,16,8;64,64,8;512,32,16] [--out F]

#include <ATen/Parallel.h>

#include <sstream>

#include "bench/bench_util.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/text/char_tokenizer.hpp"
#include "runtime/train/policy_trainer.hpp"

using namespace asyncrl;

int main(int argc, char** argv) {
  const int reps = std::stoi(bench::arg(argc, argv, "--reps", "5"));
  const auto shapes_arg = bench::arg(argc, argv, "--shapes", "256,16,8;64,64,8;512,32,16;128,8,16");
  at::set_num_threads(static_cast<int>(std::thread::hardware_concurrency()));

  run_config rc;
  auto tok = char_tokenizer::builtin();
  auto init = rc.model.init;
  init.max_position_embeddings = 2048;
  auto cfg = model_config::from_init(init, tok.vocab_size(), tok.bos_id(), tok.eos_id());

  nlohmann::ordered_json results = nlohmann::json::array();
  std::stringstream ss(shapes_arg);
  for (std::string shape; std::getline(ss, shape, ';');) {
    int64_t Lp = 0, Lr = 0, K = 0;
    std::sscanf(shape.c_str(), "%ld,%ld,%ld", &Lp, &Lr, &K);
    std::vector<scored_sample> samples(K);
    for (int64_t k = 0; k < K; ++k) {
      auto& s = samples[k];
      s.uid = static_cast<uint64_t>(k);
      for (int64_t i = 0; i < Lp; ++i)
        s.prompt.push_back(4 + static_cast<int32_t>(i % 90));
      for (int64_t j = 0; j < Lr; ++j) {
        s.response.push_back(4 + static_cast<int32_t>((7 * j + k) % 90));
        s.logprobs.push_back(-1.0f);
        s.versions.push_back(0);
      }
      s.advantage = k % 2 ? 0.5 : -0.5;
    }
    std::vector<const scored_sample*> all;
    for (auto& s : samples)
      all.push_back(&s);
    auto run = [&](bool packed, int64_t* processed) {
      policy_trainer_params st;
      st.use_rollout_logprobs = true;  // only the policy forward + backward
      st.compute_ref = false;
      st.shared_prompt_attention = packed;
      policy_trainer t(init_causal_lm(cfg, 0.02, 1, torch::kCPU), st);
      double t0 = bench::now_s();
      t.accumulate(all);
      double dt = bench::now_s() - t0;
      *processed = t.step().tokens_processed;
      return dt * 1e3;
    };
    int64_t tp = 0, tu = 0;
    run(true, &tp);  // warm-up
    std::vector<double> packed_ms, plain_ms;
    for (int r = 0; r < reps; ++r) {
      packed_ms.push_back(run(true, &tp));
      plain_ms.push_back(run(false, &tu));
    }
    const double a = bench::median(packed_ms), b = bench::median(plain_ms);
    const double lp = double(Lp), lr = double(Lr), k = double(K);
    results.push_back(
        {{"Lp", Lp},
         {"Lr", Lr},
         {"K", K},
         {"packed_ms", a},
         {"unpacked_ms", b},
         {"speedup", b / a},
         {"tokens_packed", tp},
         {"tokens_unpacked", tu},
         {"token_ratio", double(tu) / double(tp)},
         {"rho", (lp * lp + k * lr * (lp + lr)) / (k * (lp + lr) * (lp + lr))},
         {"dense_attention_ratio", (lp + k * lr) * (lp + k * lr) / (k * (lp + lr) * (lp + lr))}});
    std::cerr << "Lp=" << Lp << " Lr=" << Lr << " K=" << K << ": speedup " << b / a << "\n";
  }
  nlohmann::ordered_json j{{"benchmark", "shared_prompt_attention"},
                           {"machine", bench::machine()},
                           {"model_parameters", cfg.num_parameters()},
                           {"reps", reps},
                           {"shapes", results}};
  bench::emit(argc, argv, j);
  return 0;
}
