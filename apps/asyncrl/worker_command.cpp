#include "apps/asyncrl/worker_command.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>
#include <caf/all.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include "actors/env.hpp"
#include "actors/node_agent.hpp"
#include "apps/asyncrl/cluster_setup.hpp"
#include "apps/asyncrl/run_secret.hpp"
#include "apps/asyncrl/run_setup.hpp"
#include "apps/asyncrl/signals.hpp"
#include "messages/errors.hpp"
#include "messages/type_ids.hpp"
#include "runtime/cluster/address.hpp"
#include "runtime/common/progress.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/model/model_io.hpp"

namespace asyncrl {

namespace {

// The run's config comes from the controller; a worker may only set what concerns this
// machine. Anything else would silently make its rollouts differ from the run's.
const std::vector<std::string> kLocalKeys = {
    "cluster.tls.certificate",  "cluster.tls.key",
    "cluster.tls.ca",           "cluster.request_timeout_ms",
    "runtime.device",           "rollout.device",
    "runtime.log_level",        "runtime.caf_threads",
    "rollout.threads",          "model.path",
    "runtime.affinity",         "rollout.devices",
    "cluster.weights_transport"};

std::set<std::string> keys_of(const std::vector<std::string>& overrides) {
  std::set<std::string> keys;
  for (auto& o : overrides)
    keys.insert(o.substr(0, o.find('=')));
  return keys;
}

// The run's parameters with what this node set itself (kLocalKeys on its command line): its
// device (rollout.device, else runtime.device), threads, CPU pinning and model directory.
worker_setup with_local_settings(worker_setup s, const run_config& own,
                                 const std::set<std::string>& given) {
  // The run's rollout.devices name the controller's machine: this node uses its own.
  if (given.count("rollout.device") || given.count("runtime.device") ||
      given.count("rollout.devices")) {
    s.rollouter.device = rollout_device(own.rollout, own.runtime);
    s.rollouter.devices = own.rollout.devices;
  }
  if (given.count("rollout.threads")) s.node.rollout_threads = own.rollout.threads;
  if (given.count("runtime.affinity")) s.node.affinity = own.runtime.affinity;
  if (given.count("model.path")) s.model.path = own.model.path;
  return s;
}

// Tries to reach the controller again, once a second, for `window_s` seconds; an invalid handle
// when it could not (or a signal came). A controller that still holds the old connection
// refuses the new one until its heartbeat timeout drops it, so early tries may fail.
caf::actor rejoin(caf::actor_system& sys, const std::pair<std::string, uint16_t>& where,
                  const cluster_section& cluster, int64_t window_s,
                  const std::atomic<bool>& interrupted) {
  using clock = std::chrono::steady_clock;
  const auto until = clock::now() + std::chrono::seconds(window_s);
  for (int attempt = 1; !interrupted && clock::now() < until; ++attempt) {
    const auto next = clock::now() + std::chrono::seconds(1);
    try {
      return connect_controller(sys, where.first, where.second, cluster);
    } catch (const std::exception& e) {
      const auto left =
          std::chrono::duration_cast<std::chrono::seconds>(until - clock::now()).count();
      spdlog::warn("worker: rejoin attempt {} failed ({} s left): {}", attempt,
                   std::max<int64_t>(0, left), e.what());
    }
    while (!interrupted && clock::now() < next)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return {};
}

}  // namespace

int run_worker_command(const worker_options& opt) {
  if (opt.reward_workers > 0)
    throw config_error(
        "worker: --reward-workers is not supported yet; reward workers run in the train process "
        "(reward.num_workers)");
  if (opt.rollouters < 1) throw config_error("worker: --rollouters must be at least 1");
  // This node's own settings: defaults plus the overrides (the run's config arrives later).
  auto js = read_join_settings("worker", opt.connect, opt.tls_dir, opt.overrides, kLocalKeys);
  const auto& local = js.local;
  const auto& overrides = js.overrides;
  const std::pair<std::string, uint16_t> where{js.host, js.port};
  const auto& cluster = local->cfg.cluster;

  caf::actor_system_config sys_cfg;
  register_message_types(sys_cfg);
  register_error_category(sys_cfg);
  sys_cfg.set("scheduler.max-threads",
              static_cast<size_t>(std::max<int64_t>(1, local->cfg.runtime.caf_threads)));
  // As in train: idle scheduler threads block instead of polling (train_command.cpp).
  sys_cfg.set("scheduler.policy", caf::atom("sharing"));
  configure_network(sys_cfg, cluster);
  caf::actor_system sys{sys_cfg};
  const auto secret = read_run_secret(opt.secret_file, "");
  // The CPUs this process may use (taskset, cgroups), not every CPU of the machine.
  const int cores = std::max(1, static_cast<int>(allowed_cpus().size()));
  auto env_for = [own = local->cfg, given = keys_of(overrides), n = opt.rollouters,
                  cores](const worker_setup& run) {
    auto s = with_local_settings(run, own, given);
    // This process's rollouters share its cores (unless rollout.threads says otherwise).
    s.node.rollouters = n;
    if (s.node.rollout_threads == 0) s.node.rollout_threads = std::max(1, cores / n);
    // The architecture and tokenizer; the weights arrive from the controller. The memory check
    // reads a config: this node's, with the run's model and rollout dtype.
    auto cfg = own;
    cfg.model = s.model;
    cfg.runtime.seed = s.seed;
    cfg.rollout.dtype = s.rollouter.dtype;
    cfg.rollout.device = s.rollouter.device;
    cfg.rollout.num_workers = n;
    auto policy = load_fitting_policy(cfg, torch::Device(torch::kCPU), n, /*with_trainer=*/false);
    role_params p;
    p.rollouter = s.rollouter;
    p.node = s.node;
    p.model = s.model;
    // No trainer here: with runtime.affinity=roles the rollouters split every allowed CPU.
    return make_env(p, policy.config, policy.tokenizer, /*detached=*/true,
                    /*has_trainer=*/false);
  };

  // SIGINT/SIGTERM: leave the run (the controller regenerates what our rollouters held), and
  // never rejoin. The watcher thread and this one share the current agent.
  std::mutex agent_mu;
  caf::actor current_agent;
  std::atomic<bool> interrupted{false};
  interrupt_watch signals([&](int) {
    interrupted = true;
    std::lock_guard<std::mutex> lock(agent_mu);
    if (current_agent)
      caf::anon_send(current_agent,
                     caf::exit_msg{caf::actor_addr{},
                                   caf::make_error(errc::interrupted, "worker interrupted")});
  });

  // The first connection fails at once (a wrong address is a usage error); after a loss, the
  // worker tries again for --rejoin-s seconds, once a second. A node the controller dropped (a
  // missed deadline, a partition) joins again as a new node: new rollouter ids, a new
  // incarnation, the current weights; its old incarnations stay fenced.
  caf::actor ctrl = connect_controller(sys, where.first, where.second, cluster);
  spdlog::info("worker: connected to {}{}", opt.connect, cluster.tls.enabled() ? " (TLS)" : "");
  for (int joins = 0;; ++joins) {
    node_agent_args na;
    na.controller = caf::actor_cast<controller_actor>(ctrl);
    na.rollouters = opt.rollouters;
    na.host = this_hostname();
    na.pid = static_cast<int32_t>(getpid());
    na.timeout = std::chrono::milliseconds(cluster.request_timeout_ms);
    na.secret = secret;
    na.make_env = env_for;
    // The run decides the transport; a worker can only decline the link (and get CAF chunks).
    na.collective_weights = !(keys_of(overrides).count("cluster.weights_transport") &&
                              local->cfg.cluster.weights == weights_transport::caf);
    auto lost = na.lost;
    auto agent = spawn_node_agent(sys, std::move(na));
    {
      std::lock_guard<std::mutex> lock(agent_mu);
      current_agent = caf::actor_cast<caf::actor>(agent);
    }
    if (interrupted)  // a signal between two joins: the new agent leaves at once
      caf::anon_send_exit(agent, caf::exit_reason::user_shutdown);
    caf::error reason;
    {
      caf::scoped_actor self{sys};
      self->monitor(agent);
      self->receive([&](caf::down_msg& dm) { reason = std::move(dm.reason); });
    }
    if (!lost->load() || interrupted || opt.rejoin_s <= 0) {
      if (!reason) return 0;
      std::cerr << "worker: stopped: " << sys.render(reason) << std::endl;
      return 1;
    }
    ctrl = rejoin(sys, where, cluster, opt.rejoin_s, interrupted);
    if (!ctrl) {
      std::cerr << "worker: could not rejoin the controller at " << opt.connect << " within "
                << opt.rejoin_s << " s (--rejoin-s)" << std::endl;
      return 1;
    }
    spdlog::info("worker: reconnected to {} (rejoin {}); joining as a new node", opt.connect,
                 joins + 1);
  }
}

}  // namespace asyncrl
