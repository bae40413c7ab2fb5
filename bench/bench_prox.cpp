// A-3PO: the cost of the proximal log-probs per step, loglinear interpolation vs recomputing
// them with a forward pass of the old policy, and the whole step time with each. Both run in
// the same process, interleaved, on the same samples.
//   build/bench/bench_prox [--groups 16] [--group-size 8] [--response 32] [--reps 5] [--out F]

#include <ATen/Parallel.h>

#include "bench/bench_util.hpp"
#include "runtime/common/rng.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/text/char_tokenizer.hpp"
#include "runtime/train/policy_trainer.hpp"

using namespace asyncrl;

int main(int argc, char** argv) {
  const int groups = std::stoi(bench::arg(argc, argv, "--groups", "16"));
  const int G = std::stoi(bench::arg(argc, argv, "--group-size", "8"));
  const int resp = std::stoi(bench::arg(argc, argv, "--response", "32"));
  const int reps = std::stoi(bench::arg(argc, argv, "--reps", "5"));
  at::set_num_threads(static_cast<int>(std::thread::hardware_concurrency()));

  run_config rc;
  auto tok = char_tokenizer::builtin();
  auto cfg = model_config::from_init(rc.model.init, tok.vocab_size(), tok.bos_id(), tok.eos_id());
  // Samples one step old (d = 1), the case where the two methods differ.
  std::vector<scored_sample> samples;
  rng_stream rng(5, 0, 0);
  uint64_t c = 0;
  for (int g = 0; g < groups; ++g)
    for (int k = 0; k < G; ++k) {
      scored_sample s;
      s.uid = static_cast<uint64_t>(g * G + k);
      s.group_id = static_cast<uint64_t>(g);
      s.prompt = tok.encode("12" + std::to_string(g) + "+34=?");
      for (int j = 0; j < resp; ++j) {
        s.response.push_back(4 + static_cast<int32_t>(rng.bits(c++) % 90));
        s.logprobs.push_back(-static_cast<float>(rng.uniform(c++) * 4));
        s.versions.push_back(0);
      }
      s.advantage = rng.uniform(c++) - 0.5;
      samples.push_back(std::move(s));
    }
  std::vector<const scored_sample*> all;
  for (auto& s : samples)
    all.push_back(&s);

  auto run = [&](prox_method prox, double* step_ms) {
    policy_trainer_params st;
    st.loss = loss_kind::decoupled;
    st.prox_logp = prox;
    st.compute_ref = false;  // isolate the proximal cost
    policy_trainer t(init_causal_lm(cfg, 0.02, 1, torch::kCPU), st);
    t.set_version(1);
    t.begin_batch();
    double t0 = bench::now_s();
    for (size_t i = 0; i < all.size(); i += 32)
      t.accumulate(std::vector<const scored_sample*>(
          all.begin() + static_cast<long>(i),
          all.begin() + static_cast<long>(std::min(all.size(), i + 32))));
    auto u = t.step();
    *step_ms = (bench::now_s() - t0) * 1e3;
    return u.prox_time_ms;
  };

  double ignore = 0;
  run(prox_method::loglinear, &ignore);  // warm-up
  std::vector<double> ll, rc_ms, ll_step, rc_step;
  for (int r = 0; r < reps; ++r) {
    double s1 = 0, s2 = 0;
    ll.push_back(run(prox_method::loglinear, &s1));
    rc_ms.push_back(run(prox_method::recompute, &s2));
    ll_step.push_back(s1);
    rc_step.push_back(s2);
  }
  double a = bench::median(ll), b = bench::median(rc_ms);
  nlohmann::ordered_json j{{"benchmark", "a3po_prox_cost"},
                           {"machine", bench::machine()},
                           {"samples", groups * G},
                           {"response_tokens", resp},
                           {"reps", reps},
                           {"loglinear_prox_ms", a},
                           {"recompute_prox_ms", b},
                           {"prox_cost_ratio", b / a},
                           {"loglinear_step_ms", bench::median(ll_step)},
                           {"recompute_step_ms", bench::median(rc_step)},
                           {"step_speedup", bench::median(rc_step) / bench::median(ll_step)}};
  bench::emit(argc, argv, j);
  return 0;
}
