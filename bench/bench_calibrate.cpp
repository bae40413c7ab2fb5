// Measures the costs the simulator models, on this machine, with the demo architecture:
// - a decode step with n active sequences (1 thread), fitted as base + per_seq * n;
// - prefill per context token;
// - training per response token (forward + backward, the e2e benchmark's trainer settings)
//   on 1 thread, and the speed-up on every core;
// - the optimizer step + weight snapshot, and loading a snapshot on a rollouter.
// The result is the `simulate.calibration` file.
//   build/bench/bench_calibrate [--out bench/results/calibration.json] [--reps 3]

#include <ATen/Parallel.h>

#include "bench/bench_samples.hpp"
#include "bench/bench_util.hpp"
#include "runtime/common/rng.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/generation/generator.hpp"
#include "runtime/model/model.hpp"
#include "runtime/model/weight_sync.hpp"
#include "runtime/text/char_tokenizer.hpp"
#include "runtime/train/policy_trainer.hpp"

using namespace asyncrl;

namespace {

constexpr int kPrompt = 12;
constexpr int kResponse = 33;  // the demo model's mean response length

// Seconds per decode step with n sequences of kResponse tokens each (prefill excluded).
double decode_step_s(CausalLM& model, int n, int reps) {
  std::vector<double> per_step;
  for (int r = 0; r < reps; ++r) {
    auto run = [&](int new_tokens) {
      generator_options o;
      o.max_slots = n;
      o.max_seq_len = kPrompt + kResponse + 1;
      o.eos_id = 2;
      generator g(model.ptr(), o);
      for (int i = 0; i < n; ++i) {
        gen_request q;
        q.id = static_cast<uint64_t>(i);
        q.prompt_id = static_cast<uint64_t>(i);
        for (int t = 0; t < kPrompt; ++t)
          q.prompt.push_back(4 + (i * 7 + t) % 90);
        q.max_new_tokens = new_tokens;
        q.ignore_eos = true;
        g.submit(q);
      }
      double t0 = bench::now_s();
      g.run_all();
      return std::make_pair(bench::now_s() - t0, g.stats().decode_steps);
    };
    auto [t_full, steps] = run(kResponse);
    auto [t_prefill, none] = run(1);  // the same prefill and first token, no decode step
    (void)none;
    per_step.push_back((t_full - t_prefill) / double(steps));
  }
  return bench::median(per_step);
}

double prefill_token_s(CausalLM& model, int reps) {
  std::vector<double> v;
  const int n = 64;
  for (int r = 0; r < reps; ++r) {
    std::vector<torch::Tensor> k, vv;
    auto ids = torch::randint(4, 90, {n, kPrompt}, torch::kLong);
    auto pos = torch::arange(kPrompt).unsqueeze(0).expand({n, kPrompt}).contiguous();
    auto last = torch::full({n}, kPrompt - 1, torch::kLong);
    torch::NoGradGuard ng;
    double t0 = bench::now_s();
    model->prefill(ids, pos, last, k, vv);
    v.push_back((bench::now_s() - t0) / double(n * kPrompt));
  }
  return bench::median(v);
}

// (seconds per trained token, seconds per optimizer step + snapshot) on `threads` threads.
std::pair<double, double> train_costs(const model_config& cfg, int threads, int reps) {
  at::set_num_threads(threads);
  auto data = bench::random_samples(128, 8, kPrompt, kResponse);
  std::vector<const scored_sample*> all;
  for (auto& s : data)
    all.push_back(&s);
  policy_trainer_params st;  // as the e2e benchmark runs it: no extra forward passes
  st.use_rollout_logprobs = true;
  st.compute_ref = false;
  policy_trainer t(init_causal_lm(cfg, 0.02, 1, torch::kCPU), st);
  std::vector<double> tok, step;
  for (int r = 0; r < reps + 1; ++r) {
    t.begin_batch();
    double t0 = bench::now_s();
    for (size_t i = 0; i < all.size(); i += 32)
      t.accumulate(
          std::vector<const scored_sample*>(all.begin() + long(i), all.begin() + long(i + 32)));
    double t1 = bench::now_s();
    t.step();
    snapshot_weights(*t.policy(), t.version());
    double t2 = bench::now_s();
    if (r == 0) continue;  // warm-up
    tok.push_back((t1 - t0) / double(all.size() * kResponse));
    step.push_back(t2 - t1);
  }
  return {bench::median(tok), bench::median(step)};
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = std::stoi(bench::arg(argc, argv, "--reps", "3"));
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  run_config rc;
  auto tok = char_tokenizer::builtin();
  auto cfg = model_config::from_init(rc.model.init, tok.vocab_size(), tok.bos_id(), tok.eos_id());
  auto model = init_causal_lm(cfg, 0.02, 1, torch::kCPU);

  at::set_num_threads(1);
  // Least squares over n: step time = base + per_seq * n.
  std::vector<int> ns{4, 8, 16, 32, 64, 128};
  std::vector<double> ts;
  nlohmann::ordered_json points = nlohmann::json::array();
  for (int n : ns) {
    ts.push_back(decode_step_s(model, n, reps) * 1e3);
    points.push_back({{"active", n}, {"step_ms", ts.back()}});
  }
  double mx = 0, my = 0, sxy = 0, sxx = 0;
  for (size_t i = 0; i < ns.size(); ++i)
    mx += ns[i], my += ts[i];
  mx /= double(ns.size()), my /= double(ns.size());
  for (size_t i = 0; i < ns.size(); ++i)
    sxy += (ns[i] - mx) * (ts[i] - my), sxx += (ns[i] - mx) * (ns[i] - mx);
  const double per_seq = sxy / sxx, base = my - per_seq * mx;
  const double prefill = prefill_token_s(model, reps) * 1e3;

  auto [tok1, step1] = train_costs(cfg, 1, reps);
  auto [tokn, stepn] = train_costs(cfg, cores, reps);
  at::set_num_threads(1);
  std::vector<double> loads;
  for (int r = 0; r < reps; ++r) {
    auto snap = snapshot_weights(*model, 1);
    CausalLM other(cfg);
    double t0 = bench::now_s();
    load_snapshot(*other, snap, /*alias=*/true);
    loads.push_back((bench::now_s() - t0) * 1e3);
  }
  nlohmann::ordered_json train_scaling;
  train_scaling["1"] = 1.0;
  train_scaling[std::to_string(cores)] = tok1 / tokn;
  nlohmann::ordered_json j{{"benchmark", "calibration"},
                           {"machine", bench::machine()},
                           {"model_parameters", cfg.num_parameters()},
                           {"decode_base_ms", base},
                           {"decode_per_seq_ms", per_seq},
                           {"decode_points", points},
                           {"prefill_per_token_ms", prefill},
                           {"train_per_token_ms", tok1 * 1e3},
                           {"train_step_ms", step1 * 1e3},
                           {"train_scaling", train_scaling},
                           {"sync_ms", bench::median(loads)},
                           {"reward_ms", 0.05},
                           {"prompt_tokens", kPrompt}};
  bench::emit(argc, argv, j);
  return 0;
}
