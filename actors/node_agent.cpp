#include "actors/node_agent.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include <algorithm>

#include <memory>
#include <optional>

#include "actors/errors.hpp"
#include "actors/rollouter.hpp"
#include "runtime/cluster/weight_chunks.hpp"

namespace asyncrl {

namespace {

struct agent_state {
  static inline const char* name = "node_agent";
  node_agent_args args;
  env_ptr env;
  join_reply joined;
  bool has_joined = false;
  weight_assembler assembler;
  weight_snapshot staged;  // the newest complete version (blob empty until one arrived)
  std::vector<rollouter_actor> rollouters;
  size_t alive = 0;
};

using agent_ptr = node_agent_actor::stateful_pointer<agent_state>;

caf::error no_version(agent_ptr self, int64_t v) {
  return caf::make_error(errc::not_ready, "node agent: v" + std::to_string(v) +
                                              " is not staged (have v" +
                                              std::to_string(self->state.staged.version) + ")");
}

void join(agent_ptr self) {
  auto& st = self->state;
  join_request req{st.args.host, st.args.pid, st.args.rollouters, caf::actor_cast<caf::actor>(self),
                   st.args.secret};
  self->request(st.args.controller, st.args.timeout, join_atom::value, std::move(req))
      .then(
          [self](join_reply& r) {
            auto& st = self->state;
            try {
              st.env = st.args.make_env(r.setup);
            } catch (const std::exception& e) {
              spdlog::error("worker: cannot run this job: {}", e.what());
              self->quit(caf::make_error(errc::bad_request, e.what()));
              return;
            }
            st.joined = std::move(r);
            st.has_joined = true;
            spdlog::info("worker: joined as rollouter(s) {}..{}; waiting for the weights",
                         st.joined.first_worker, st.joined.first_worker + st.args.rollouters - 1);
          },
          [self](const caf::error& e) {
            spdlog::error("worker: the controller refused or did not answer the join: {}",
                          self->system().render(e));
            self->quit(e);
          });
}

node_agent_actor::behavior_type agent_fn(agent_ptr self, node_agent_args args) {
  self->state.args = std::move(args);
  install_exception_handler(self, "node agent");
  // The run's end, or its controller's node gone (killed, cut off): nothing left to work for.
  self->monitor(self->state.args.controller);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    if (dm.source == caf::actor_cast<caf::actor_addr>(st.args.controller)) {
      spdlog::warn("worker: lost the controller: {}", self->system().render(dm.reason));
      st.args.lost->store(true);
      for (auto& r : st.rollouters)
        self->send_exit(r, caf::exit_reason::user_shutdown);
      self->quit(dm.reason);
      return;
    }
    // A rollouter that is gone (it crashed, or the console removed it) gets no more loads: a
    // load to it would fail the node's sync and take its other rollouters down with it.
    auto& rs = st.rollouters;
    rs.erase(std::remove_if(rs.begin(), rs.end(),
                            [&](const rollouter_actor& r) { return r.address() == dm.source; }),
             rs.end());
    if (--st.alive == 0) {
      spdlog::info("worker: every rollouter has stopped");
      self->quit();
    }
  });
  // Asked to leave: by a signal to the worker process, or by the controller, which dropped this
  // node (it missed a deadline; its rollouters are already fenced there). The rollouters go with
  // the agent.
  self->set_exit_handler([self](caf::exit_msg& em) {
    if (em.source == caf::actor_cast<caf::actor_addr>(self->state.args.controller)) {
      spdlog::warn("worker: the controller dropped this node: {}",
                   self->system().render(em.reason));
      self->state.args.lost->store(true);
    }
    for (auto& r : self->state.rollouters)
      self->send_exit(r, em.reason);
    self->quit(em.reason);
  });
  join(self);
  return {
      [self](stage_atom, weight_chunk& c) -> caf::result<int64_t> {
        auto& st = self->state;
        if (!st.has_joined) return caf::make_error(errc::not_ready, "node agent: not joined yet");
        auto why = st.assembler.add(c.version, c.index, c.count, c.offset, c.total_bytes, c.digest,
                                    c.bytes);
        if (!why.empty()) return caf::make_error(errc::bad_weights, "node agent: " + why);
        if (!st.assembler.complete()) return st.assembler.received();
        const auto bytes = st.assembler.take();
        try {
          st.staged = unpack_weights(bytes.data(), bytes.size());
        } catch (const std::exception& e) {
          return caf::make_error(errc::bad_weights,
                                 std::string("node agent: weights unusable: ") + e.what());
        }
        if (st.staged.version != c.version)
          return caf::make_error(errc::bad_weights, "node agent: chunks of v" +
                                                        std::to_string(c.version) + " hold v" +
                                                        std::to_string(st.staged.version));
        spdlog::debug("worker: v{} staged ({} bytes)", c.version, bytes.size());
        return static_cast<int64_t>(bytes.size());
      },
      [self](launch_atom, int64_t v) -> caf::result<std::vector<caf::actor>> {
        auto& st = self->state;
        if (!st.staged.blob || st.staged.version != v) return no_version(self, v);
        if (!st.rollouters.empty())
          return caf::make_error(errc::bad_request, "node agent: already launched");
        std::vector<caf::actor> out;
        auto& sys = self->system();
        for (int32_t i = 0; i < st.args.rollouters; ++i) {
          rollouter_args ra{st.joined.first_worker + i,
                            st.env,
                            st.staged,
                            caf::actor_cast<queue_actor>(st.joined.queue),
                            caf::actor_cast<reward_actor>(st.joined.reward),
                            caf::actor_cast<controller_actor>(st.joined.controller)};
          auto r = spawn_rollouter(sys, std::move(ra));
          self->monitor(r);
          st.rollouters.push_back(r);
          out.push_back(caf::actor_cast<caf::actor>(r));
        }
        st.alive = st.rollouters.size();
        spdlog::info("worker: {} rollouter(s) started at weight version {}", out.size(), v);
        return out;
      },
      [self](load_atom, int64_t v) -> caf::result<int64_t> {
        auto& st = self->state;
        if (!st.staged.blob || st.staged.version != v) return no_version(self, v);
        auto rp = self->make_response_promise<int64_t>();
        auto left = std::make_shared<size_t>(st.rollouters.size());
        auto failed = std::make_shared<bool>(false);
        if (*left == 0) return v;
        for (auto& r : st.rollouters)
          self->request(r, st.args.timeout, load_atom::value, st.staged)
              .then(
                  [rp, left, failed, v](int64_t) mutable {
                    if (--*left == 0 && !*failed) rp.deliver(v);
                  },
                  [rp, left, failed, v](caf::error& e) mutable {
                    // A rollouter gone meanwhile (removed, or crashed: the controller learns
                    // that from its own monitor) is not a failure of this node's load.
                    if (e == caf::sec::request_receiver_down) {
                      if (--*left == 0 && !*failed) rp.deliver(v);
                      return;
                    }
                    if (*failed) return;
                    *failed = true;
                    rp.deliver(std::move(e));
                  });
        return rp;
      },
      [self](stop_atom) {
        spdlog::info("worker: the run is over");
        self->quit();
      },
  };
}

}  // namespace

node_agent_actor spawn_node_agent(caf::actor_system& sys, node_agent_args args) {
  return sys.spawn(agent_fn, std::move(args));
}

}  // namespace asyncrl
