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
  // The sender holds itself only weakly; each chunk's response handler holds it strongly. So it
  // lives exactly as long as a chunk is in flight: when every chunk is acknowledged, or when the
  // owner quits and CAF drops its response handlers, it is freed together with `done` (which
  // may hold a response promise, and through it the actor waiting for the sync). A closure that
  // held itself lived on after its owner quit, and with it that actor: the actor system then
  // waited forever for the detached trainer at shutdown.
  auto send_next = std::make_shared<std::function<void()>>();
  std::weak_ptr<std::function<void()>> weak_next = send_next;
  *send_next = [=]() {
    auto next = weak_next.lock();
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
                  return;
                }
                (*next)();
              },
              [=](const caf::error& e) {
                if (p->over) return;
                p->over = true;
                done("weights v" + std::to_string(params->version) + " chunk " + std::to_string(i) +
                     ": " + self->system().render(e));
              });
    }
  };
  (*send_next)();
}

}  // namespace asyncrl
