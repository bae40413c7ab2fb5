// Generation throughput with continuous batching vs static batches on a long-tailed workload:
// the demo architecture (fresh init), N requests whose lengths are lognormal (median 16,
// sigma 1, clipped to [4, 112]) and forced with ignore_eos, S KV-cache slots.
// - continuous: one generator with max_slots = S, every request submitted, run_all(); a
//   finished request's slot is refilled at the next step.
// - static: batches of S requests, each run to completion before the next is submitted, so
//   every batch lasts as long as its longest response.
// Interleaved repetitions, with 1 torch thread and with every core.
//   build/bench/bench_continuous_batching [--requests 256] [--slots 32] [--reps 3] [--quick]
//                                         [--out FILE]

#include <ATen/Parallel.h>

#include "bench/bench_util.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/generation/generator.hpp"
#include "runtime/model/model.hpp"
#include "runtime/scheduling/workload.hpp"
#include "runtime/text/char_tokenizer.hpp"

using namespace asyncrl;

namespace {

struct run_stats {
  double seconds = 0;
  int64_t tokens = 0;
  int64_t decode_steps = 0;
  int64_t prefills = 0;
  double utilisation = 0;  // mean active slots per decode step / S
};

}  // namespace

int main(int argc, char** argv) {
  const bool quick = bench::flag(argc, argv, "--quick");
  const int64_t n = std::stoll(bench::arg(argc, argv, "--requests", quick ? "96" : "256"));
  const int64_t S = std::stoll(bench::arg(argc, argv, "--slots", "32"));
  const int reps = std::stoi(bench::arg(argc, argv, "--reps", quick ? "2" : "3"));
  const int cores = static_cast<int>(std::thread::hardware_concurrency());

  run_config rc;  // the demo architecture's defaults
  auto tok = char_tokenizer::builtin();
  auto cfg = model_config::from_init(rc.model.init, tok.vocab_size(), tok.bos_id(), tok.eos_id());
  auto model = init_causal_lm(cfg, 0.02, 1, torch::kCPU);

  workload_section w;
  w.lengths = workload_lengths::lognormal;
  w.median = 16;
  w.sigma = 1.0;
  w.min = 4;
  w.max = 112;
  std::vector<gen_request> requests;
  int64_t total_tokens = 0, max_prompt = 0;
  for (int64_t i = 0; i < n; ++i) {
    gen_request r;
    r.id = static_cast<uint64_t>(i);
    r.prompt_id = static_cast<uint64_t>(i);
    r.prompt = {tok.bos_id()};
    for (auto id : tok.encode(std::to_string(100 + 7 * i) + "+" + std::to_string(3 * i) + "=?\n"))
      r.prompt.push_back(id);
    r.max_new_tokens = workload_length(w, 11, static_cast<uint64_t>(i), 0);
    r.ignore_eos = true;
    total_tokens += r.max_new_tokens;
    max_prompt = std::max<int64_t>(max_prompt, static_cast<int64_t>(r.prompt.size()));
    requests.push_back(std::move(r));
  }

  generator_options o;
  o.max_slots = S;
  o.max_seq_len = max_prompt + w.max;
  o.seed = 3;
  o.eos_id = tok.eos_id();

  auto finish = [&](generator& g, double t0) {
    run_stats s;
    s.seconds = bench::now_s() - t0;
    const auto& st = g.stats();
    s.tokens = st.tokens_generated;
    s.decode_steps = st.decode_steps;
    s.prefills = st.prefills;
    // Each request's first token comes from its prefill; every other one from a decode step.
    s.utilisation = st.decode_steps > 0 ? static_cast<double>(st.tokens_generated - n) /
                                              static_cast<double>(st.decode_steps * S)
                                        : 0.0;
    return s;
  };
  auto continuous = [&] {
    generator g(model.ptr(), o);
    double t0 = bench::now_s();
    for (auto& r : requests)
      g.submit(r);
    g.run_all();
    return finish(g, t0);
  };
  auto fixed = [&] {
    generator g(model.ptr(), o);
    double t0 = bench::now_s();
    for (int64_t b = 0; b < n; b += S) {
      for (int64_t i = b; i < std::min(n, b + S); ++i)
        g.submit(requests[static_cast<size_t>(i)]);
      g.run_all();
    }
    return finish(g, t0);
  };

  nlohmann::ordered_json by_threads = nlohmann::ordered_json::array();
  std::vector<int> thread_counts{1};
  if (cores > 1) thread_counts.push_back(cores);
  for (int threads : thread_counts) {
    at::set_num_threads(threads);
    continuous();  // warm-up
    std::vector<double> c_tps, s_tps;
    run_stats c, s;
    for (int r = 0; r < reps; ++r) {
      c = continuous();
      s = fixed();
      c_tps.push_back(static_cast<double>(c.tokens) / c.seconds);
      s_tps.push_back(static_cast<double>(s.tokens) / s.seconds);
    }
    const double a = bench::median(c_tps), b = bench::median(s_tps);
    by_threads.push_back(
        {{"threads", threads},
         {"continuous_tokens_per_s", a},
         {"static_tokens_per_s", b},
         {"speedup", a / b},
         {"continuous_decode_steps", c.decode_steps},
         {"static_decode_steps", s.decode_steps},
         {"decode_step_ratio", static_cast<double>(s.decode_steps) /
                                   static_cast<double>(std::max<int64_t>(1, c.decode_steps))},
         {"continuous_slot_utilisation", c.utilisation},
         {"static_slot_utilisation", s.utilisation},
         {"continuous_prefills", c.prefills},
         {"static_prefills", s.prefills},
         {"tokens_generated", c.tokens},
         {"continuous_runs_tokens_per_s", c_tps},
         {"static_runs_tokens_per_s", s_tps}});
  }
  nlohmann::ordered_json j{
      {"benchmark", "continuous_vs_static_batching"},
      {"machine", bench::machine()},
      {"model_parameters", cfg.num_parameters()},
      {"requests", n},
      {"slots", S},
      {"workload",
       {{"lengths", "lognormal"},
        {"median", 16},
        {"sigma", 1.0},
        {"min", 4},
        {"max", 112},
        {"mean", static_cast<double>(total_tokens) / n}}},
      {"reps", reps},
      {"method",
       "tokens/s = tokens generated / wall time of the whole workload (median of interleaved "
       "reps); slot utilisation = (tokens - requests) / (decode steps * slots)"},
      {"results", by_threads}};
  bench::emit(argc, argv, j);
  return 0;
}
