#pragma once

// Messages between `asyncrl train` (the controller's node) and `asyncrl worker` processes
// (docs/cluster.md). Plain data with inspect(); handles travel as caf::actor (CAF turns them
// into proxies on the other node).

#include <caf/actor.hpp>
#include <caf/meta/type_name.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "messages/role_params.hpp"
#include "runtime/cluster/weight_chunks.hpp"

namespace asyncrl {

/// A worker process asks to join the run.
struct join_request {
  std::string host;        // the worker's hostname (logs)
  int32_t pid = 0;         // its process id (logs)
  int32_t rollouters = 0;  // rollouters it will host
  caf::actor agent;        // its node agent (node_agent_actor)
  std::string secret;      // the run's secret (<run_dir>/run.secret) when it has no TLS
};

/// The controller's answer: what the worker needs to build its rollouters.
struct join_reply {
  worker_setup setup;        // the run's parameters for this worker's rollouters
  int32_t first_worker = 0;  // its rollouters are workers first_worker .. first_worker + n - 1
  caf::actor queue;          // queue_actor
  caf::actor reward;         // reward_actor
  caf::actor controller;     // controller_actor
};

/// A data-parallel trainer rank on another machine asks for its place in the run
/// (`asyncrl trainer-rank --connect`, docs/scaling.md), under the same TLS and secret rules as a
/// worker.
struct rank_join_request {
  std::string host;    // the rank's hostname (logs)
  int32_t pid = 0;     // its process id (logs)
  std::string secret;  // the run's secret (<run_dir>/run.secret) when it has no TLS
};

/// The controller's answer: which rank it is and where the ranks' c10d group meets.
struct rank_setup {
  int32_t rank = 0;        // trainer.data_parallel - trainer.remote_ranks .. world - 1
  int32_t world = 0;       // trainer.data_parallel
  std::string store_host;  // the rendezvous: rank 0's TCPStore (trainer.dist_listen)
  int32_t store_port = 0;
  std::string token;        // the group's keys in the store live under this name
  std::string config_yaml;  // the run's resolved config
};

/// One piece of a weight version on its way to a node. The pieces are msgpack bytes of the
/// snapshot (pack_weights) cut at `offset`; the last one completes the version, which is used
/// only if the SHA-256 of all its bytes equals `digest`.
struct weight_chunk {
  int64_t version = 0;
  int32_t index = 0;  // 0 .. count - 1, sent in order
  int32_t count = 0;
  int64_t offset = 0;       // of these bytes in the whole
  int64_t total_bytes = 0;  // of the whole
  std::string digest;       // SHA-256 (hex) of the whole
  std::vector<char> bytes;
};

/// A weight version about to arrive over the node's weights link (cluster.weights_transport=
/// collective) instead of in chunks: the same packed bytes, broadcast by c10d, used only if
/// their SHA-256 equals `digest`. The number and the digest travel here, by CAF.
struct weight_broadcast {
  int64_t version = 0;
  int64_t total_bytes = 0;
  std::string digest;  // SHA-256 (hex) of the packed bytes
};

/// Chunk `index` of the packed bytes of `version` cut in pieces of `chunk_bytes`.
inline weight_chunk make_weight_chunk(const std::vector<char>& packed, int64_t version,
                                      int64_t chunk_bytes, int32_t index,
                                      const std::string& digest) {
  const auto total = static_cast<int64_t>(packed.size());
  const auto span = chunk_at(total, chunk_bytes, index);
  weight_chunk c;
  c.version = version;
  c.index = index;
  c.count = chunk_count(total, chunk_bytes);
  c.offset = span.offset;
  c.total_bytes = total;
  c.digest = digest;
  c.bytes.assign(packed.begin() + span.offset, packed.begin() + span.offset + span.size);
  return c;
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, join_request& x) {
  return f(caf::meta::type_name("join_request"), x.host, x.pid, x.rollouters, x.agent, x.secret);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, join_reply& x) {
  return f(caf::meta::type_name("join_reply"), x.setup, x.first_worker, x.queue, x.reward,
           x.controller);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rank_join_request& x) {
  return f(caf::meta::type_name("rank_join_request"), x.host, x.pid, x.secret);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rank_setup& x) {
  return f(caf::meta::type_name("rank_setup"), x.rank, x.world, x.store_host, x.store_port, x.token,
           x.config_yaml);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, weight_chunk& x) {
  return f(caf::meta::type_name("weight_chunk"), x.version, x.index, x.count, x.offset,
           x.total_bytes, x.digest, x.bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, weight_broadcast& x) {
  return f(caf::meta::type_name("weight_broadcast"), x.version, x.total_bytes, x.digest);
}

}  // namespace asyncrl
