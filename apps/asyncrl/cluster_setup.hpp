#pragma once

// The network side of `asyncrl train` and `asyncrl worker` (docs/cluster.md): CAF's io
// middleman, and its openssl module when cluster.tls.* is set. Torch-free.

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <cstdint>
#include <string>

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

/// Logs every TLS handshake this process refuses (peer address and OpenSSL's reason): CAF
/// 0.17 drops such a connection silently. Call once before publishing.
void log_tls_refusals();

}  // namespace asyncrl
