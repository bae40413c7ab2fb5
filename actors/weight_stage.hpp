#pragma once

// Sending one weight version to a node's agent (docs/cluster.md): the packed bytes cut into
// weight_chunk requests, a few in flight, each acknowledged within a deadline. Chunks to one
// agent arrive in the order sent (one sender, one receiver). Used by the synchronizer and by
// bench/bench_cluster.cpp, so that the benchmark measures this code.

#include <caf/all.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "messages/interfaces.hpp"

namespace asyncrl {

struct stage_params {
  int64_t version = 0;
  std::shared_ptr<const std::vector<char>> packed;  // pack_weights of the version
  std::string digest;                               // sha256_hex of `packed`
  int64_t chunk_bytes = 4 << 20;
  int32_t window = 4;  // chunks in flight
  std::chrono::milliseconds timeout{30000};
};

/// `done` is called once: with "" when every chunk was acknowledged, else with why not.
template <class Self, class Handle>
void stage_weights(Self* self, Handle agent, stage_params sp,
                   std::function<void(const std::string&)> done) {
  const auto total = static_cast<int64_t>(sp.packed->size());
  const auto count = chunk_count(total, sp.chunk_bytes);
  struct progress {
    int32_t sent = 0, acked = 0;
    bool over = false;
  };
  auto p = std::make_shared<progress>();
  auto params = std::make_shared<const stage_params>(std::move(sp));
  auto send_next = std::make_shared<std::function<void()>>();
  *send_next = [=]() {
    const auto& s = *params;
    while (!p->over && p->sent < count && p->sent - p->acked < s.window) {
      const auto i = p->sent++;
      self->request(agent, s.timeout, stage_atom::value,
                    make_weight_chunk(*s.packed, s.version, s.chunk_bytes, i, s.digest))
          .then(
              [=](int64_t) {
                if (p->over) return;
                if (++p->acked == count) {
                  p->over = true;
                  done("");
                  *send_next = nullptr;  // breaks the closure's cycle
                  return;
                }
                (*send_next)();
              },
              [=](const caf::error& e) {
                if (p->over) return;
                p->over = true;
                done("weights v" + std::to_string(params->version) + " chunk " + std::to_string(i) +
                     ": " + self->system().render(e));
                *send_next = nullptr;
              });
    }
  };
  (*send_next)();
}

}  // namespace asyncrl
