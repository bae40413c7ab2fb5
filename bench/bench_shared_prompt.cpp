// Packing (docs/algorithms.md §11), one policy forward + backward per measurement:
// 1. Shared prompts: a group packed as [prompt, r_1..r_K] with per-block attention (the
//    padding-free default, "packed"), the same with a dense (T, T) mask ("dense_mask"), and K
//    separate padded sequences ("unpacked"), at several (Lp, Lr, K), beside the token ratio
//    K (Lp + Lr) / (Lp + K Lr), the block-sparse attention ratio
//    rho = (Lp^2 + K Lr (Lp + Lr)) / (K (Lp + Lr)^2) of the reference notes, the dense mask's
//    (Lp + K Lr)^2 / (K (Lp + Lr)^2), and the per-block plan's measured score elements.
// 2. Long tail: a micro-batch of responses with lognormal lengths (median 16, sigma 1, 4..112,
//    the e2e long-tail workload) padded to the longest vs padding-free, with processed / real
//    tokens of each.
//   build/bench/bench_shared_prompt [--reps 5] [--shapes 256,16,8;64,64,8] [--micro 32] [--out F]

#include <ATen/Parallel.h>

#include <cmath>
#include <random>
#include <sstream>

#include "bench/bench_util.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/text/char_tokenizer.hpp"
#include "runtime/train/packing.hpp"
#include "runtime/train/policy_trainer.hpp"

using namespace asyncrl;

// Appends `len` response tokens (ids from `stride` * j + `offset`) with behaviour log-prob -1
// and version 0.
static void add_response(scored_sample& s, int64_t len, int64_t stride, int64_t offset) {
  for (int64_t j = 0; j < len; ++j) {
    s.response.push_back(4 + static_cast<int32_t>((stride * j + offset) % 90));
    s.logprobs.push_back(-1.0f);
    s.versions.push_back(0);
  }
}

int main(int argc, char** argv) {
  const int reps = std::stoi(bench::arg(argc, argv, "--reps", "5"));
  const auto shapes_arg = bench::arg(argc, argv, "--shapes", "256,16,8;64,64,8;512,32,16;128,8,16");
  at::set_num_threads(static_cast<int>(std::thread::hardware_concurrency()));

  run_config rc;
  auto tok = char_tokenizer::builtin();
  auto init = rc.model.init;
  init.max_position_embeddings = 2048;
  auto cfg = model_config::from_init(init, tok.vocab_size(), tok.bos_id(), tok.eos_id());

  // One forward + backward of `samples`; `processed` receives the positions computed.
  auto run = [&](const std::vector<const scored_sample*>& samples, bool shared, bool padding_free,
                 int64_t* processed, int64_t* real = nullptr) {
    policy_trainer_params st;
    st.use_rollout_logprobs = true;  // only the policy forward + backward
    st.compute_ref = false;
    st.shared_prompt_attention = shared;
    st.padding_free = padding_free;
    policy_trainer t(init_causal_lm(cfg, 0.02, 1, torch::kCPU), st);
    double t0 = bench::now_s();
    t.accumulate(samples);
    double dt = bench::now_s() - t0;
    auto u = t.step();
    *processed = u.tokens_processed;
    if (real != nullptr) *real = u.tokens_real;
    return dt * 1e3;
  };
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
      add_response(s, Lr, 7, k);
      s.advantage = k % 2 ? 0.5 : -0.5;
    }
    std::vector<const scored_sample*> all;
    for (auto& s : samples)
      all.push_back(&s);
    int64_t tp = 0, tu = 0, td = 0;
    run(all, true, true, &tp);  // warm-up
    std::vector<double> packed_ms, plain_ms, dense_ms;
    for (int r = 0; r < reps; ++r) {
      packed_ms.push_back(run(all, true, true, &tp));
      dense_ms.push_back(run(all, true, false, &td));
      plain_ms.push_back(run(all, false, false, &tu));
    }
    const double a = bench::median(packed_ms), b = bench::median(plain_ms);
    const double d = bench::median(dense_ms);
    const double lp = double(Lp), lr = double(Lr), k = double(K);
    auto plan = pack_samples(all, true, torch::kCPU, true).segments;
    results.push_back(
        {{"Lp", Lp},
         {"Lr", Lr},
         {"K", K},
         {"packed_ms", a},
         {"dense_mask_ms", d},
         {"unpacked_ms", b},
         {"speedup", b / a},
         {"dense_mask_speedup", b / d},
         {"tokens_packed", tp},
         {"tokens_unpacked", tu},
         {"token_ratio", double(tu) / double(tp)},
         {"rho", (lp * lp + k * lr * (lp + lr)) / (k * (lp + lr) * (lp + lr))},
         {"dense_attention_ratio", (lp + k * lr) * (lp + k * lr) / (k * (lp + lr) * (lp + lr))},
         {"segment_attention_ratio", double(plan.score_elements) / (k * (lp + lr) * (lp + lr))}});
    std::cerr << "Lp=" << Lp << " Lr=" << Lr << " K=" << K << ": speedup " << b / a
              << " (dense mask " << b / d << ")\n";
  }

  // Long tail: `micro` responses to distinct prompts of 12 tokens, lognormal lengths.
  const int64_t micro = std::stoi(bench::arg(argc, argv, "--micro", "32"));
  std::mt19937_64 gen(7);
  std::lognormal_distribution<double> len_dist(std::log(16.0), 1.0);
  std::vector<scored_sample> tail(micro);
  for (int64_t m = 0; m < micro; ++m) {
    auto& s = tail[m];
    s.uid = static_cast<uint64_t>(m);
    s.group_id = static_cast<uint64_t>(m);
    for (int64_t i = 0; i < 12; ++i)
      s.prompt.push_back(4 + static_cast<int32_t>((i + m) % 90));
    const auto L = std::clamp<int64_t>(std::llround(len_dist(gen)), 4, 112);
    add_response(s, L, 5, m);
    s.advantage = m % 2 ? 0.5 : -0.5;
  }
  std::vector<const scored_sample*> tail_ptrs;
  for (auto& s : tail)
    tail_ptrs.push_back(&s);
  int64_t pad_proc = 0, pad_real = 0, free_proc = 0, free_real = 0;
  run(tail_ptrs, false, true, &free_proc, &free_real);  // warm-up
  std::vector<double> pad_ms, free_ms;
  for (int r = 0; r < reps; ++r) {
    free_ms.push_back(run(tail_ptrs, false, true, &free_proc, &free_real));
    pad_ms.push_back(run(tail_ptrs, false, false, &pad_proc, &pad_real));
  }
  const double pm = bench::median(pad_ms), fm = bench::median(free_ms);
  nlohmann::ordered_json long_tail{
      {"responses", micro},
      {"lengths", "lognormal(median 16, sigma 1) in [4, 112], prompts of 12"},
      {"padded_ms", pm},
      {"padding_free_ms", fm},
      {"speedup", pm / fm},
      {"processed_over_real_padded", double(pad_proc) / double(pad_real)},
      {"processed_over_real_padding_free", double(free_proc) / double(free_real)}};
  std::cerr << "long tail: padded " << pm << " ms, padding-free " << fm << " ms, processed/real "
            << double(pad_proc) / double(pad_real) << " -> "
            << double(free_proc) / double(free_real) << "\n";
  nlohmann::ordered_json j{{"benchmark", "shared_prompt_attention"},
                           {"machine", bench::machine()},
                           {"model_parameters", cfg.num_parameters()},
                           {"reps", reps},
                           {"shapes", results},
                           {"long_tail", long_tail}};
  bench::emit(argc, argv, j);
  return 0;
}
