#include "apps/asyncrl/trainer_rank_command.hpp"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <csignal>

#include "actors/env.hpp"
#include "actors/role_params.hpp"
#include "apps/asyncrl/run_setup.hpp"
#include "runtime/cluster/address.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/dist/dist_group.hpp"
#include "runtime/model/model_io.hpp"
#include "runtime/model/weight_sync.hpp"
#include "runtime/train/dp_follower.hpp"
#include "runtime/train/policy_trainer.hpp"

namespace asyncrl {

int run_trainer_rank_command(const trainer_rank_options& o) {
  auto lc = load_config(o.config, o.overrides);
  const auto& cfg = lc->cfg;
  apply_runtime(cfg.runtime);
  const int world = static_cast<int>(data_parallel_ranks(cfg.trainer));
  if (o.rank < 1 || o.rank >= world)
    throw config_error("trainer-rank: --rank " + std::to_string(o.rank) + " is not in [1, " +
                       std::to_string(world) + ") (trainer.data_parallel of " + o.config + ")");
  const auto params = make_role_params(cfg);
  const auto device = trainer_rank_device(params.trainer, o.rank);
  check_device(device, cfg.trainer.devices.empty()
                           ? std::string("trainer.device")
                           : "trainer.devices[" + std::to_string(o.rank) + "]");
  // The architecture; the weights are rank 0's (join_data_parallel broadcasts them).
  auto policy = load_or_init_policy(cfg.model, cfg.runtime.seed, torch::Device(device));
  const auto env = make_env(params, policy.config, policy.tokenizer, /*detached=*/false);
  set_torch_threads(env->trainer_threads);
  for (auto& p : policy.model->parameters())
    p.set_requires_grad(true);

  const auto [host, port] = split_host_port(o.join);
  dist_options d;
  d.host = host;
  d.port = port;
  d.rank = o.rank;
  d.world = world;
  d.timeout = std::chrono::milliseconds(static_cast<int64_t>(cfg.trainer.dist_timeout_s * 1000));
  auto group = dist_group::connect(d);
  policy_trainer pt(policy.model, params.trainer.policy);
  pt.join_data_parallel(*group, params.trainer.shard_optimizer);
  spdlog::info("trainer rank {} of {}: joined {}:{}, on {}", o.rank, world, host, port, device);

  follower_options fo;
  const auto kill_at = cfg.faults.kill_trainer_rank_at_step;
  fo.before_step = [&](int64_t step, bool resumed) {
    if (kill_at > 0 && o.rank == world - 1 && step == kill_at && !resumed) {
      spdlog::warn("trainer rank {}: faults.kill_trainer_rank_at_step={}: SIGKILL", o.rank,
                   kill_at);
      std::raise(SIGKILL);
    }
  };
  follow_rank_zero(pt, *group, fo);
  spdlog::info("trainer rank {}: the run is over", o.rank);
  return 0;
}

}  // namespace asyncrl
