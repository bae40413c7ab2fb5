#include "apps/asyncrl/trainer_rank_command.hpp"

#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <unistd.h>
#include <caf/all.hpp>

#include <csignal>
#include <cstdlib>

#include "actors/env.hpp"
#include "actors/role_params.hpp"
#include "apps/asyncrl/cluster_setup.hpp"
#include "apps/asyncrl/run_secret.hpp"
#include "apps/asyncrl/run_setup.hpp"
#include "messages/errors.hpp"
#include "messages/interfaces.hpp"
#include "messages/type_ids.hpp"
#include "runtime/cluster/address.hpp"
#include "runtime/common/progress.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/dist/dist_group.hpp"
#include "runtime/model/model_io.hpp"
#include "runtime/model/weight_sync.hpp"
#include "runtime/train/dp_follower.hpp"
#include "runtime/train/policy_trainer.hpp"

namespace asyncrl {

namespace {

// What a rank on another machine may set itself; the rest is the run's (the controller's).
const std::vector<std::string> kRankLocalKeys = {
    "cluster.tls.certificate", "cluster.tls.key", "cluster.tls.ca", "cluster.request_timeout_ms",
    "runtime.log_level",       "model.path",      "trainer.device"};

struct rank_place {
  int rank = 0;
  std::string host;  // the store
  int port = 0;
  std::string prefix;      // the group's keys in the store
  std::string device;      // empty: the run's trainer.devices[rank] (or trainer.device)
  std::string device_key;  // what names it, for errors
};

// Joins the group at `at` and replays rank 0's commands until the run ends.
int serve_rank(const run_config& cfg, const rank_place& at) {
  apply_runtime(cfg.runtime);
  const int world = static_cast<int>(data_parallel_ranks(cfg.trainer));
  const auto params = make_role_params(cfg);
  const auto device = at.device.empty() ? trainer_rank_device(params.trainer, at.rank) : at.device;
  check_device(device, !at.device_key.empty() ? at.device_key
                       : cfg.trainer.devices.empty()
                           ? std::string("trainer.device")
                           : "trainer.devices[" + std::to_string(at.rank) + "]");
  // The architecture; the weights are rank 0's (join_data_parallel broadcasts them).
  auto policy = load_or_init_policy(cfg.model, cfg.runtime.seed, torch::Device(device));
  const auto env = make_env(params, policy.config, policy.tokenizer, /*detached=*/false);
  set_torch_threads(env->trainer_threads);
  for (auto& p : policy.model->parameters())
    p.set_requires_grad(true);

  dist_options d;
  d.host = at.host;
  d.port = at.port;
  d.rank = at.rank;
  d.world = world;
  d.prefix = at.prefix;
  d.timeout = std::chrono::milliseconds(static_cast<int64_t>(cfg.trainer.dist_timeout_s * 1000));
  auto group = dist_group::connect(d);
  policy_trainer pt(policy.model, params.trainer.policy);
  pt.join_data_parallel(*group, params.trainer.shard_optimizer);
  spdlog::info("trainer rank {} of {}: joined {}:{}, on {}", at.rank, world, at.host, at.port,
               device);

  follower_options fo;
  const auto kill_at = cfg.faults.kill_trainer_rank_at_step;
  fo.before_step = [&](int64_t step, bool resumed) {
    if (kill_at > 0 && at.rank == world - 1 && step == kill_at && !resumed) {
      spdlog::warn("trainer rank {}: faults.kill_trainer_rank_at_step={}: SIGKILL", at.rank,
                   kill_at);
      std::raise(SIGKILL);
    }
  };
  follow_rank_zero(pt, *group, fo);
  spdlog::info("trainer rank {}: the run is over", at.rank);
  return 0;
}

// A local rank (train started it): the run's config file, the rank and the store on the
// command line, the group's token in the environment.
int run_local_rank(const trainer_rank_options& o) {
  const char* token = std::getenv(kDistTokenEnv);
  if (!token || !*token)
    throw config_error(std::string("trainer-rank --join: no group token in $") + kDistTokenEnv +
                       " (asyncrl train sets it for the ranks it starts); a rank on another "
                       "machine joins with --connect HOST:PORT, the run's cluster listener");
  if (o.config.empty() || o.rank < 0)
    throw config_error("trainer-rank --join needs --config and --rank");
  auto lc = load_config(o.config, o.overrides);
  const int world = static_cast<int>(data_parallel_ranks(lc->cfg.trainer));
  if (o.rank < 1 || o.rank >= world)
    throw config_error("trainer-rank: --rank " + std::to_string(o.rank) + " is not in [1, " +
                       std::to_string(world) + ") (trainer.data_parallel of " + o.config + ")");
  rank_place at;
  at.rank = o.rank;
  std::tie(at.host, at.port) = split_host_port(o.join);
  at.prefix = dist_prefix(token);
  return serve_rank(lc->cfg, at);
}

// A rank on another machine: it asks the controller for its place, under the cluster's TLS or
// the run's secret, and gets the run's config with it.
int run_remote_rank(const trainer_rank_options& o) {
  if (!o.config.empty() || o.rank >= 0)
    throw config_error(
        "trainer-rank --connect: the rank and the config come from the run; drop --config and "
        "--rank");
  auto js = read_join_settings("trainer rank", o.connect, o.tls_dir, o.overrides, kRankLocalKeys);
  const std::pair<std::string, uint16_t> where{js.host, js.port};
  const auto& cluster = js.local->cfg.cluster;
  const auto secret = read_run_secret(o.secret_file, "");
  rank_setup setup;
  {
    caf::actor_system_config sys_cfg;
    register_message_types(sys_cfg);
    register_error_category(sys_cfg);
    sys_cfg.set("scheduler.max-threads", size_t{1});
    sys_cfg.set("scheduler.policy", caf::atom("sharing"));
    configure_network(sys_cfg, cluster);
    caf::actor_system sys{sys_cfg};
    auto ctrl = caf::actor_cast<controller_actor>(
        connect_controller(sys, where.first, where.second, cluster));
    caf::scoped_actor self{sys};
    std::string refused;
    self->request(ctrl, std::chrono::milliseconds(cluster.request_timeout_ms), join_atom::value,
                  rank_join_request{this_hostname(), static_cast<int32_t>(getpid()), secret})
        .receive([&](rank_setup& s) { setup = std::move(s); },
                 [&](caf::error& e) { refused = sys.render(e); });
    if (!refused.empty())
      throw std::runtime_error("trainer-rank: the run at " + o.connect + " refused: " + refused);
  }  // the rank needs no CAF connection once it has its place: c10d carries the rest
  spdlog::info("trainer rank {} of {}: place given by {}{}", setup.rank, setup.world, o.connect,
               cluster.tls.enabled() ? " (TLS)" : "");
  // The run's config; this machine's model directory, device and log level over it.
  std::vector<std::string> mine;
  for (auto& ov : o.overrides)
    if (ov.rfind("cluster.", 0) != 0) mine.push_back(ov);
  auto lc = load_config_text(setup.config_yaml, "the run's config (from " + o.connect + ")", mine);
  rank_place at;
  at.rank = setup.rank;
  at.host = setup.store_host;
  at.port = setup.store_port;
  at.prefix = dist_prefix(setup.token);
  for (auto& ov : o.overrides)
    if (ov.rfind("trainer.device=", 0) == 0) {
      at.device = lc->cfg.trainer.device;
      at.device_key = "trainer.device";
    }
  return serve_rank(lc->cfg, at);
}

}  // namespace

int run_trainer_rank_command(const trainer_rank_options& o) {
  if (o.connect.empty() == o.join.empty())
    throw config_error(
        "trainer-rank: give --connect HOST:PORT (the run's cluster listener; a rank on another "
        "machine) or --join (what asyncrl train uses for its local ranks), not both");
  return o.connect.empty() ? run_local_rank(o) : run_remote_rank(o);
}

}  // namespace asyncrl
