// Generation throughput of the default demo model: KV-cache decoding vs recomputing the whole
// context for every token, interleaved in one run so that machine noise hits both alike.
//   build/bench/bench_generation [--requests 64] [--new-tokens 48] [--reps 3] [--out FILE]

#include <ATen/Parallel.h>

#include "bench/bench_util.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/generation/generator.hpp"
#include "runtime/model/model.hpp"
#include "runtime/text/char_tokenizer.hpp"

using namespace asyncrl;

int main(int argc, char** argv) {
  const int64_t requests = std::stoll(bench::arg(argc, argv, "--requests", "64"));
  const int32_t new_tokens = std::stoi(bench::arg(argc, argv, "--new-tokens", "48"));
  const int reps = std::stoi(bench::arg(argc, argv, "--reps", "3"));
  const int threads = std::stoi(
      bench::arg(argc, argv, "--threads", std::to_string(std::thread::hardware_concurrency())));
  at::set_num_threads(threads);

  run_config rc;  // the demo architecture's defaults
  auto tok = char_tokenizer::builtin();
  auto cfg = model_config::from_init(rc.model.init, tok.vocab_size(), tok.bos_id(), -1);
  auto model = init_causal_lm(cfg, 0.02, 1, torch::kCPU);

  auto run = [&](bool cache) {
    generator_options o;
    o.max_slots = requests;
    o.max_seq_len = 16 + new_tokens;
    o.seed = 3;
    o.eos_id = -1;  // fixed lengths: every request generates exactly new_tokens
    o.use_kv_cache = cache;
    generator g(model.ptr(), o);
    for (int64_t i = 0; i < requests; ++i) {
      gen_request r;
      r.id = static_cast<uint64_t>(i);
      r.prompt_id = static_cast<uint64_t>(i);
      r.prompt = tok.encode("Q" + std::to_string(100 + i) + "+" + std::to_string(7 * i) + "=?");
      r.max_new_tokens = new_tokens;
      g.submit(r);
    }
    double t0 = bench::now_s();
    g.run_all();
    double dt = bench::now_s() - t0;
    return static_cast<double>(g.stats().tokens_generated) / dt;
  };

  run(true);  // warm-up
  std::vector<double> kv, full;
  for (int r = 0; r < reps; ++r) {
    kv.push_back(run(true));
    full.push_back(run(false));
  }
  double a = bench::median(kv), b = bench::median(full);
  nlohmann::ordered_json j{{"benchmark", "generation_kv_cache_vs_recompute"},
                           {"machine", bench::machine()},
                           {"threads", threads},
                           {"model_parameters", cfg.num_parameters()},
                           {"requests", requests},
                           {"new_tokens", new_tokens},
                           {"reps", reps},
                           {"kv_cache_tokens_per_s", a},
                           {"recompute_tokens_per_s", b},
                           {"speedup", a / b},
                           {"kv_cache_runs", kv},
                           {"recompute_runs", full}};
  bench::emit(argc, argv, j);
  return 0;
}
