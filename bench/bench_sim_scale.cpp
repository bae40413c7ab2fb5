// The simulator at cluster scale (16-128 devices), with an assumed per-device cost profile for
// a 7B-class model (stated in the output; not measured here):
// 1. periodic vs sync on a balanced workload (generation ~ training), against decoupled sync
//    (the seed's comparison, theory 2x) and colocated sync;
// 2. fully async with staleness_threshold 0 / 0.1 / 0.3 / 0.5, partial rollout off and on, on
//    a long-tail workload, against colocated sync;
// 3. the rollout:train split that minimises step time, per cluster size and workload.
//   build/bench/bench_sim_scale [--quick] [--out bench/results/sim_scale.json]

#include "bench/bench_util.hpp"
#include "runtime/run_config.hpp"
#include "runtime/simulator.hpp"

using namespace asyncrl;

namespace {

// Per device: decode 20 ms + 0.1 ms per active sequence (256 slots: ~5.6k tokens/s), training
// 0.18 ms per token (~5.5k tokens/s), 0.5 s optimizer step, 2 s weight broadcast, 0.1 s reward.
sim_costs cluster_costs() {
  sim_costs c;
  c.decode_base_ms = 20;
  c.decode_per_seq_ms = 0.1;
  c.prefill_per_token_ms = 0.01;
  c.train_per_token_ms = 0.18;
  c.train_step_ms = 500;
  c.sync_ms = 2000;
  c.reward_ms = 100;
  return c;
}

struct setup {
  int64_t devices = 64;
  int64_t rollout = 32;  // decoupled modes: rollout devices (the rest train)
  std::string mode = "sync";
  bool colocated = false;
  double s = 0;
  bool partial = false;
  bool long_tail = false;
  int64_t steps = 8;
};

double step_s(const setup& x) {
  const int64_t B = 4 * x.devices;  // weak scaling: the same work per device at every size
  std::vector<std::string> o{
      "async_training.mode=" + x.mode,
      "async_training.colocate=" + std::string(x.colocated ? "true" : "false"),
      "data.train_batch_size=" + std::to_string(B),
      "rollout.n=8",
      "rollout.max_batch=256",
      "rollout.max_new_tokens=4096",
      "rollout.chunk_tokens=4",
      "trainer.ppo_mini_batch_size=" + std::to_string(B / 4),
      "trainer.total_steps=" + std::to_string(x.steps),
      "workload.lengths=lognormal",
      "workload.median=256",
      "workload.min=16",
      x.long_tail ? "workload.sigma=1.0" : "workload.sigma=0.25",
      x.long_tail ? "workload.max=4096" : "workload.max=1024"};
  if (x.mode == "fully_async") {
    o.push_back("async_training.trigger_parameter_sync_step=4");
    o.push_back("async_training.staleness_threshold=" + std::to_string(x.s));
    o.push_back(std::string("async_training.partial_rollout=") + (x.partial ? "true" : "false"));
  }
  auto lc = load_config("", o);
  auto p = sim_params_from(lc->cfg);
  p.costs = cluster_costs();
  p.prompt_tokens = 256;
  p.warmup_steps = 2;
  p.colocated = x.colocated;
  p.rollout_devices = x.colocated ? x.devices : x.rollout;
  p.train_devices = x.colocated ? x.devices : x.devices - x.rollout;
  return simulate(p).mean_step_ms / 1000.0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = bench::flag(argc, argv, "--quick");
  std::vector<int64_t> sizes =
      quick ? std::vector<int64_t>{16, 64} : std::vector<int64_t>{16, 32, 64, 128};

  nlohmann::ordered_json periodic = nlohmann::json::array();
  for (auto d : sizes) {
    setup x;
    x.devices = d;
    x.rollout = d / 2;
    x.mode = "sync";
    x.colocated = true;
    double colo = step_s(x);
    x.colocated = false;
    double dec = step_s(x);
    x.mode = "periodic";
    double per = step_s(x);
    periodic.push_back({{"devices", d},
                        {"colocated_sync_s", colo},
                        {"decoupled_sync_s", dec},
                        {"periodic_s", per},
                        {"periodic_vs_decoupled_sync", dec / per},
                        {"periodic_vs_colocated_sync", colo / per}});
  }

  const int64_t D = quick ? 32 : 64;
  setup base;
  base.devices = D;
  base.rollout = D / 2;
  base.long_tail = true;
  base.mode = "sync";
  base.colocated = true;
  const double colo = step_s(base);
  base.colocated = false;
  nlohmann::ordered_json stale = nlohmann::json::array();
  base.mode = "periodic";
  stale.push_back({{"mode", "periodic"}, {"step_s", step_s(base)}});
  for (double s : {0.0, 0.1, 0.3, 0.5})
    for (bool partial : {false, true}) {
      if (partial && s == 0) continue;  // partial rollout needs s > 0
      setup x = base;
      x.mode = "fully_async";
      x.s = s;
      x.partial = partial;
      stale.push_back({{"mode", "fully_async"},
                       {"staleness_threshold", s},
                       {"partial_rollout", partial},
                       {"step_s", step_s(x)}});
    }
  for (auto& row : stale)
    row["speedup_vs_colocated_sync"] = colo / row["step_s"].get<double>();

  nlohmann::ordered_json splits = nlohmann::json::array();
  for (auto d : sizes)
    for (bool tail : {false, true}) {
      nlohmann::ordered_json curve = nlohmann::json::array();
      int64_t best = 0;
      double best_s = 1e300;
      for (int64_t r = d / 8; r <= d - d / 8; r += d / 8) {
        setup x;
        x.devices = d;
        x.rollout = r;
        x.long_tail = tail;
        x.mode = "fully_async";
        x.s = 0.5;
        x.partial = true;
        double t = step_s(x);
        curve.push_back({{"rollout_devices", r}, {"train_devices", d - r}, {"step_s", t}});
        if (t < best_s) best_s = t, best = r;
      }
      splits.push_back({{"devices", d},
                        {"workload", tail ? "long_tail" : "balanced"},
                        {"recommended_rollout_devices", best},
                        {"recommended_train_devices", d - best},
                        {"step_s", best_s},
                        {"curve", curve}});
    }

  auto c = cluster_costs();
  nlohmann::ordered_json j{
      {"benchmark", "sim_scale"},
      {"machine", bench::machine()},
      {"assumed_costs_per_device",
       {{"decode_base_ms", c.decode_base_ms},
        {"decode_per_seq_ms", c.decode_per_seq_ms},
        {"prefill_per_token_ms", c.prefill_per_token_ms},
        {"train_per_token_ms", c.train_per_token_ms},
        {"train_step_ms", c.train_step_ms},
        {"sync_ms", c.sync_ms},
        {"reward_ms", c.reward_ms},
        {"slots", 256},
        {"prompt_tokens", 256}}},
      {"workloads",
       {{"balanced", "B = 4 x devices prompts x 8, lognormal lengths median 256, sigma 0.25"},
        {"long_tail", "lognormal median 256, sigma 1.0, up to 4096 tokens"}}},
      {"periodic_balanced", periodic},
      {"staleness_long_tail", {{"devices", D}, {"colocated_sync_s", colo}, {"runs", stale}}},
      {"split_recommendation", splits}};
  bench::emit(argc, argv, j);
  return 0;
}
