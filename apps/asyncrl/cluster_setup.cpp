#include "apps/asyncrl/cluster_setup.hpp"

#include <spdlog/spdlog.h>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "messages/interfaces.hpp"
#include "runtime/cluster/address.hpp"
#include "runtime/common/atomic_file.hpp"
#include "runtime/common/progress.hpp"
#include "runtime/config/schema.hpp"

namespace asyncrl {

void configure_network(caf::actor_system_config& cfg, const cluster_section& c) {
  cfg.load<caf::io::middleman>();
  // BASP heartbeats: a peer whose connection goes silent (cut off, no RST) is dropped after
  // the connection timeout, and its actors' monitors fire.
  cfg.set("middleman.heartbeat-interval", caf::timespan{std::chrono::seconds(1)});
  cfg.set("middleman.connection-timeout", caf::timespan{std::chrono::seconds(10)});
  if (!c.tls.enabled()) return;
  cfg.load<caf::openssl::manager>();
  cfg.openssl_certificate = c.tls.certificate;
  cfg.openssl_key = c.tls.key;
  cfg.openssl_cafile = c.tls.ca;
}

uint16_t publish_controller(caf::actor_system& sys, const caf::actor& ctrl,
                            const cluster_section& c) {
  const auto [host, port] = split_host_port(c.listen);
  auto handle = caf::actor_cast<controller_actor>(ctrl);
  auto res = c.tls.enabled() ? caf::openssl::publish(handle, port, host.c_str(), true)
                             : sys.middleman().publish(handle, port, host.c_str(), true);
  if (!res)
    throw std::runtime_error("cluster.listen " + c.listen +
                             ": cannot listen: " + sys.render(res.error()));
  return *res;
}

void write_cluster_json(const std::string& run_dir, const std::string& host, uint16_t port,
                        bool tls) {
  // Atomic: a reader (a worker script, the console) never sees half a file.
  write_file_atomically(run_dir + "/cluster.json",
                        nlohmann::json{{"host", host}, {"port", port}, {"tls", tls}}.dump() + "\n");
}

caf::actor connect_controller(caf::actor_system& sys, const std::string& host, uint16_t port,
                              const cluster_section& c) {
  // CAF's remote_actor blocks without a bound; a peer that accepts and never answers must not
  // hang the worker, so it runs on a thread we wait for with a deadline.
  auto task = std::make_shared<std::packaged_task<caf::expected<controller_actor>()>>(
      [&sys, host, port, tls = c.tls.enabled()]() -> caf::expected<controller_actor> {
        if (tls) return caf::openssl::remote_actor<controller_actor>(sys, host, port);
        return sys.middleman().remote_actor<controller_actor>(host, port);
      });
  auto result = task->get_future();
  std::thread([task] { (*task)(); }).detach();
  const auto where = host + ":" + std::to_string(port);
  if (result.wait_for(std::chrono::milliseconds(c.request_timeout_ms)) != std::future_status::ready)
    throw std::runtime_error("no answer from the controller at " + where + " within " +
                             std::to_string(c.request_timeout_ms) +
                             " ms (cluster.request_timeout_ms)");
  auto h = result.get();
  if (!h)
    throw std::runtime_error(
        "cannot reach the controller at " + where + ": " + sys.render(h.error()) +
        (c.tls.enabled() ? " (TLS: is the controller's CA the one in cluster.tls.ca?)"
                         : " (if the controller uses TLS, give --tls-dir or cluster.tls.*)"));
  return caf::actor_cast<caf::actor>(*h);
}

join_settings read_join_settings(const std::string& who, const std::string& connect,
                                 const std::string& tls_dir, std::vector<std::string> overrides,
                                 const std::vector<std::string>& allowed) {
  for (auto& o : overrides) {
    const auto key = o.substr(0, o.find('='));
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::string keys;
    for (auto& k : allowed)
      keys += (keys.empty() ? "" : ", ") + k;
    throw config_error(who + ": key '" + key +
                       "' comes from the run's config (the controller's); a " + who +
                       " may set only " + keys);
  }
  if (!tls_dir.empty()) {
    overrides.push_back("cluster.tls.certificate=" + tls_dir + "/node.pem");
    overrides.push_back("cluster.tls.key=" + tls_dir + "/node.key");
    overrides.push_back("cluster.tls.ca=" + tls_dir + "/ca.pem");
  }
  join_settings j;
  j.local = load_config("", overrides);
  init_logging(j.local->cfg.runtime.log_level);
  try {
    std::tie(j.host, j.port) = split_host_port(connect);
  } catch (const std::invalid_argument& e) {
    throw config_error(who + ": --connect: " + e.what());
  }
  j.overrides = std::move(overrides);
  return j;
}

std::string this_hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

}  // namespace asyncrl
