#pragma once

// The network side of `asyncrl train` and `asyncrl worker` (docs/cluster.md): CAF's io
// middleman, and its openssl module when cluster.tls.* is set. Torch-free.

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/config/run_config.hpp"
#include "runtime/config/sections.hpp"

namespace asyncrl {

/// Loads the middleman (and openssl with TLS) into `cfg`, with heartbeats so that a peer that
/// is cut off without a reset is noticed.
void configure_network(caf::actor_system_config& cfg, const cluster_section& c);

/// Publishes `ctrl` on cluster.listen; returns the port. Throws naming the key on failure.
uint16_t publish_controller(caf::actor_system& sys, const caf::actor& ctrl,
                            const cluster_section& c);

/// Writes <run_dir>/cluster.json: {"host", "port", "tls"}.
void write_cluster_json(const std::string& run_dir, const std::string& host, uint16_t port,
                        bool tls);

/// Connects to a published controller (TLS when configured). Throws with the reason (a
/// refused handshake, no such port, no answer within cluster.request_timeout_ms).
caf::actor connect_controller(caf::actor_system& sys, const std::string& host, uint16_t port,
                              const cluster_section& c);

/// What a process that joins a run (worker, trainer rank) knows before it asks: its own
/// settings and where the controller is.
struct join_settings {
  std::unique_ptr<loaded_config> local;  // the defaults and this machine's keys
  std::vector<std::string> overrides;    // those keys, with the TLS files of --tls-dir
  std::string host;                      // the controller (--connect HOST:PORT)
  uint16_t port = 0;
};

/// A joining process takes the run's config from the controller; on its command line it may
/// set only `allowed` (what concerns its own machine). Throws config_error naming the first
/// other key, or a bad --connect, as `who` ("worker"). Starts logging at its log level.
join_settings read_join_settings(const std::string& who, const std::string& connect,
                                 const std::string& tls_dir, std::vector<std::string> overrides,
                                 const std::vector<std::string>& allowed);

/// This machine's host name (what a joining process reports, for the logs).
std::string this_hostname();

/// Logs every TLS handshake this process refuses (peer address and OpenSSL's reason): CAF
/// 0.17 drops such a connection silently. Call once before publishing.
void log_tls_refusals();

}  // namespace asyncrl
