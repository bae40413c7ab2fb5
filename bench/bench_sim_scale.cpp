// The simulator at cluster scale (16-128 devices), with an assumed per-device cost profile for
// a 7B-class model (stated in the output; not measured here):
// 1. periodic vs sync on a balanced workload (generation ~ training), against decoupled sync
//    (the seed's comparison, theory 2x) and colocated sync;
// 2. fully async with staleness_threshold 0 / 0.1 / 0.3 / 0.5, partial rollout off and on, on
//    a long-tail workload, against colocated sync;
// 3. the rollout:train split that minimises step time, per cluster size and workload.
//   build/bench/bench_sim_scale [--quick] [--out bench/results/sim_scale.json]

#include "bench/bench_util.hpp"
#include "runtime/config/params.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/scheduling/simulator.hpp"

using namespace asyncrl;

namespace {

constexpr int64_t kSlots = 64;  // KV-cache slots per rollout device

// Per device, roughly a 7B model on one H100: decode 20 ms + 0.1 ms per active sequence (64
// slots: ~2.4k tokens/s), training 0.4 ms per token (~2.5k tokens/s: 8 x 7e9 FLOP per token
// with activation recomputation at ~140 TFLOP/s), 0.5 s optimizer step, 1 s weight broadcast,
// 0.1 s reward per group. With half the devices on each side, generation and training then take
// about the same time: the balanced case.
sim_costs cluster_costs() {
  sim_costs c;
  c.decode_base_ms = 20;
  c.decode_per_seq_ms = 0.1;
  c.prefill_per_token_ms = 0.01;
  c.train_per_token_ms = 0.4;
  c.train_step_ms = 500;
  c.sync_ms = 1000;
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
  int64_t steps = 16;
  int64_t prompts_per_device = 16;  // B = this x devices; waves = B x 8 / (rollout x kSlots)
};

double step_s(const setup& x) {
  const int64_t B =
      x.prompts_per_device * x.devices;  // weak scaling: the same work per device at every size
  std::vector<std::string> o{
      "async_training.mode=" + x.mode,
      "async_training.colocate=" + std::string(x.colocated ? "true" : "false"),
      "data.train_batch_size=" + std::to_string(B),
      "rollout.n=8",
      "rollout.max_batch=" + std::to_string(kSlots),
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
  p.warmup_steps = 4;  // one sync period: the pipeline fill is not a steady-state step
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

  // Periodic vs sync. Training starts at the first finished group, so the overlap grows with
  // the number of generation waves per step (B x G / slots per rollout device): one wave and
  // every group finishes at about the same time; many and they finish steadily.
  auto periodic_row = [](int64_t d, int64_t ppd) {
    setup x;
    x.devices = d;
    x.rollout = d / 2;
    x.prompts_per_device = ppd;
    x.mode = "sync";
    x.colocated = true;
    double colo = step_s(x);
    x.colocated = false;
    double dec = step_s(x);
    x.mode = "periodic";
    double per = step_s(x);
    return nlohmann::ordered_json{{"devices", d},
                                  {"prompts_per_device", ppd},
                                  {"waves", ppd * 8 / (kSlots / 2)},
                                  {"colocated_sync_s", colo},
                                  {"decoupled_sync_s", dec},
                                  {"periodic_s", per},
                                  {"periodic_vs_decoupled_sync", dec / per},
                                  {"periodic_vs_colocated_sync", colo / per}};
  };
  nlohmann::ordered_json periodic = nlohmann::json::array();
  for (auto d : sizes)
    periodic.push_back(periodic_row(d, 32));
  nlohmann::ordered_json waves = nlohmann::json::array();
  for (int64_t ppd : quick ? std::vector<int64_t>{4, 16} : std::vector<int64_t>{4, 8, 16, 32, 64})
    waves.push_back(periodic_row(quick ? 16 : 64, ppd));

  const int64_t D = quick ? 32 : 64;
  setup base;
  base.devices = D;
  base.rollout = D / 2;
  base.long_tail = true;
  base.prompts_per_device = 4;  // one wave: the longest response holds up a sync step
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
        {"slots", kSlots},
        {"prompt_tokens", 256}}},
      {"workloads",
       {{"balanced",
         "B = 16 x devices prompts x 8 (periodic study: 32), 64 slots per device, lognormal "
         "lengths median 256, sigma 0.25"},
        {"long_tail", "lognormal median 256, sigma 1.0, up to 4096 tokens"}}},
      {"periodic_balanced", periodic},
      {"periodic_waves", waves},
      {"staleness_long_tail", {{"devices", D}, {"colocated_sync_s", colo}, {"runs", stale}}},
      {"split_recommendation", splits}};
  bench::emit(argc, argv, j);
  return 0;
}
