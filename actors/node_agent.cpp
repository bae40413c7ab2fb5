#include "actors/node_agent.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include <algorithm>

#include <memory>
#include <optional>

#include "actors/errors.hpp"
#include "actors/rollouter.hpp"
#include "runtime/cluster/weight_chunks.hpp"
#include "runtime/dist/weight_link.hpp"

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
  // cluster.weights_transport=collective: the link to the trainer's process, while it forms
  // (link_asked) and once formed; a version on its way over it (received: its bytes).
  std::shared_ptr<weight_link> link;
  std::optional<caf::typed_response_promise<bool>> link_asked;
  struct incoming {
    weight_broadcast header;
    caf::typed_response_promise<int64_t> promise;
    std::shared_ptr<std::vector<char>> received = std::make_shared<std::vector<char>>();
  };
  std::optional<incoming> incoming_version;
};

using agent_ptr = node_agent_actor::stateful_pointer<agent_state>;

caf::error no_version(agent_ptr self, int64_t v) {
  return caf::make_error(errc::not_ready, "node agent: v" + std::to_string(v) +
                                              " is not staged (have v" +
                                              std::to_string(self->state.staged.version) + ")");
}

// A complete version's bytes become the staged snapshot: "" or why not. Bytes that are
// unusable or hold another version leave the staged snapshot as it was.
std::string stage_bytes(agent_ptr self, const std::vector<char>& bytes, int64_t version) {
  weight_snapshot got;
  try {
    got = unpack_weights(bytes.data(), bytes.size());
  } catch (const std::exception& e) {
    return std::string("node agent: weights unusable: ") + e.what();
  }
  if (got.version != version)
    return "node agent: the bytes of v" + std::to_string(version) + " hold v" +
           std::to_string(got.version);
  self->state.staged = std::move(got);
  spdlog::debug("worker: v{} staged ({} bytes)", version, bytes.size());
  return "";
}

// The link's thread reports to the agent through its address: a link never keeps it alive.
template <class... Ts>
void tell(const caf::actor_addr& addr, Ts&&... xs) {
  if (auto me = caf::actor_cast<caf::actor>(addr)) caf::anon_send(me, std::forward<Ts>(xs)...);
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
        if (auto bad = stage_bytes(self, bytes, c.version); !bad.empty())
          return caf::make_error(errc::bad_weights, bad);
        return static_cast<int64_t>(bytes.size());
      },
      [self](link_atom, std::string& host, int32_t port, int64_t timeout_ms) -> caf::result<bool> {
        auto& st = self->state;
        if (!st.args.collective_weights) {
          spdlog::info("worker: weights come as CAF chunks (cluster.weights_transport=caf here)");
          return false;
        }
        if (st.link || st.link_asked)
          return caf::make_error(errc::bad_request, "node agent: a weights link exists already");
        weight_link_options o;
        o.host = host;
        o.port = port;
        o.sender = false;
        o.timeout = std::chrono::milliseconds(timeout_ms);
        o.peer = "the trainer's process";
        st.link_asked = self->make_response_promise<bool>();
        st.link = std::make_shared<weight_link>(
            o, [addr = caf::actor_cast<caf::actor_addr>(self)](const std::string& e) {
              tell(addr, link_atom::value, e);
            });
        return *st.link_asked;
      },
      [self](link_atom, std::string& error) {
        auto& st = self->state;
        if (!st.link_asked) return;
        auto rp = std::move(*st.link_asked);
        st.link_asked.reset();
        if (!error.empty()) {
          spdlog::warn("worker: the weights link did not form ({}); weights come as CAF chunks",
                       error);
          st.link.reset();  // its thread is done: the rendezvous failed
          rp.deliver(false);
          return;
        }
        spdlog::info("worker: weights arrive over a collective link (Gloo)");
        rp.deliver(true);
      },
      [self](stage_atom, weight_broadcast& wb) -> caf::result<int64_t> {
        auto& st = self->state;
        if (!st.has_joined) return caf::make_error(errc::not_ready, "node agent: not joined yet");
        if (!st.link || st.link_asked)
          return caf::make_error(errc::bad_request, "node agent: no weights link");
        if (st.incoming_version)
          return caf::make_error(errc::bad_request,
                                 "node agent: v" + std::to_string(wb.version) +
                                     " over the link "
                                     "while v" +
                                     std::to_string(st.incoming_version->header.version) +
                                     " is still arriving");
        auto rp = self->make_response_promise<int64_t>();
        st.incoming_version = agent_state::incoming{wb, rp};
        auto slot = st.incoming_version->received;
        st.link->receive(wb.total_bytes,
                         [addr = caf::actor_cast<caf::actor_addr>(self), slot, v = wb.version](
                             const std::string& e, std::vector<char> bytes) {
                           *slot = std::move(bytes);  // read by the agent after the message below
                           tell(addr, stage_atom::value, v, e);
                         });
        return rp;
      },
      [self](stage_atom, int64_t v, std::string& error) {
        auto& st = self->state;
        if (!st.incoming_version || st.incoming_version->header.version != v) return;
        auto in = std::move(*st.incoming_version);
        st.incoming_version.reset();
        if (!error.empty()) {
          in.promise.deliver(caf::make_error(errc::bad_weights, "node agent: " + error));
          return;
        }
        const auto& bytes = *in.received;
        const auto digest = sha256_hex(bytes.data(), bytes.size());
        if (digest != in.header.digest) {
          in.promise.deliver(caf::make_error(
              errc::bad_weights, "node agent: v" + std::to_string(v) +
                                     " over the link does not match its SHA-256 (got " + digest +
                                     ", expected " + in.header.digest + "): not used"));
          return;
        }
        const auto bad = stage_bytes(self, bytes, v);
        const auto n = static_cast<int64_t>(bytes.size());
        in.received->clear();
        in.received->shrink_to_fit();
        if (!bad.empty())
          in.promise.deliver(caf::make_error(errc::bad_weights, bad));
        else
          in.promise.deliver(n);
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
                            caf::actor_cast<controller_actor>(st.joined.controller),
                            {}};
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
