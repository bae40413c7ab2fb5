// The controller's side of networked deployment (docs/cluster.md): worker processes join with
// their rollouters, and a worker that dies or is cut off is fenced and its work regenerated.
// Remote actors are monitored, not linked: a lost connection arrives as a down message.

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include "actors/controller_state.hpp"
#include "messages/errors.hpp"

namespace asyncrl {

void tell_queue_members(ctrl_ptr self) {
  auto& st = self->state;
  self->send(st.queue, members_atom::value, static_cast<int32_t>(st.roster.size()));
}

namespace {

// One remote rollouter is gone: nothing it sends counts any more (fenced here and, through
// the settle, at the Reward), and its unfinished prompts are regenerated once every message it
// sent before has been handled (the requeue goes to the back of our mailbox).
void drop_remote_worker(ctrl_ptr self, int32_t worker, const std::string& why, bool lost = true) {
  auto& st = self->state;
  auto r = st.roster.remove(worker);  // fenced from here on
  if (!r) return;
  const auto addr = caf::actor_cast<caf::actor_addr>(*r);
  spdlog::warn("cluster: rollouter {} lost: {}", worker, why);
  self->demonitor(addr);
  self->send_exit(*r, caf::exit_reason::user_shutdown);  // if it is still out there
  st.roles.erase(addr);
  if (lost) ++st.result.remote_rollouters_lost;
  forget_incarnation(self, worker);
  self->send(self, requeue_atom::value, worker, addr);
}

}  // namespace

std::string check_secret(ctrl_ptr self, const std::string& presented, const char* what) {
  const auto& want = self->state.args.secret;
  const auto& sender = self->current_sender();
  if (want.empty() || !sender || sender->node() == self->node()) return "";
  // Constant time: the comparison must not tell a prober how much of a guess was right.
  unsigned char diff = presented.size() == want.size() ? 0 : 1;
  for (size_t i = 0; i < want.size(); ++i)
    diff |= static_cast<unsigned char>(want[i] ^ (i < presented.size() ? presented[i] : 0));
  if (diff == 0) return "";
  const std::string why =
      presented.empty()
          ? "this run has no TLS: a " + std::string(what) +
                " in another process must present the run's secret (--secret-file "
                "RUN_DIR/run.secret, or ASYNCRL_RUN_SECRET), readable only by the run's owner"
          : std::string("the ") + what + "'s run secret is wrong";
  spdlog::warn("cluster: refused a {} from node {}: {}", what, to_string(sender->node()), why);
  return why;
}

caf::result<join_reply> on_join(ctrl_ptr self, join_request& req) {
  auto& st = self->state;
  if (auto why = check_secret(self, req.secret, "worker"); !why.empty())
    return caf::make_error(errc::unauthorized, why);
  if (st.shutting_down()) return caf::make_error(errc::run_over, "the run is shutting down");
  if (req.rollouters <= 0 || !req.agent)
    return caf::make_error(errc::bad_request,
                           "a worker must bring at least one rollouter and its agent");
  auto rp = self->make_response_promise<join_reply>();
  if (!st.sync) {  // the run has not started: it waits for its trainer ranks
    spdlog::info("cluster: worker {} (pid {}) joins when the run starts", req.host, req.pid);
    st.early_joins.emplace_back(std::move(req), rp);
    return rp;
  }
  admit_worker(self, req, rp);
  return rp;
}

void admit_early_workers(ctrl_ptr self) {
  auto joins = std::move(self->state.early_joins);
  self->state.early_joins.clear();
  for (auto& [req, rp] : joins)
    admit_worker(self, req, rp);
}

caf::result<rank_setup> on_rank_join(ctrl_ptr self, rank_join_request& req) {
  auto& st = self->state;
  if (auto why = check_secret(self, req.secret, "trainer rank"); !why.empty())
    return caf::make_error(errc::unauthorized, why);
  if (st.shutting_down()) return caf::make_error(errc::run_over, "the run is shutting down");
  if (!st.args.admit_rank)
    return caf::make_error(errc::bad_request,
                           "this run takes no trainer rank from elsewhere (trainer.remote_ranks "
                           "is 0)");
  auto setup = st.args.admit_rank(req.host, req.pid);
  if (setup)
    spdlog::info("cluster: trainer rank {} of {} joins from {} (pid {})", setup->rank, setup->world,
                 req.host, req.pid);
  else
    spdlog::warn("cluster: refused a trainer rank from {} (pid {}): {}", req.host, req.pid,
                 self->system().render(setup.error()));
  if (!setup) return std::move(setup.error());
  return std::move(*setup);
}

void admit_worker(ctrl_ptr self, join_request& req, caf::typed_response_promise<join_reply> rp) {
  auto& st = self->state;
  const auto first = st.roster.nodes().take_ids(req.rollouters);
  const auto agent_addr = caf::actor_cast<caf::actor_addr>(req.agent);
  st.roster.nodes().add(agent_addr, req.agent, req.host, req.pid);
  self->monitor(req.agent);
  spdlog::info("cluster: worker {} (pid {}) joins with {} rollouter(s), ids {}..{}", req.host,
               req.pid, req.rollouters, first, first + req.rollouters - 1);
  // The answer leaves before the synchronizer starts sending weights, so the agent knows the
  // run's parameters before the first chunk arrives (both travel the same connection, in order).
  rp.deliver(join_reply{worker_setup_of(st.args.env->params), first,
                        caf::actor_cast<caf::actor>(st.queue),
                        caf::actor_cast<caf::actor>(st.reward), caf::actor_cast<caf::actor>(self)});
  self->request(st.sync, caf::infinite, join_atom::value, req.agent, first, req.rollouters)
      .then(
          [self, agent_addr, first](std::vector<caf::actor>& rs) {
            auto& st = self->state;
            auto* n = st.roster.nodes().find(agent_addr);
            if (st.shutting_down() || !n) {
              for (auto& r : rs)
                self->send_exit(r, caf::exit_reason::user_shutdown);
              return;
            }
            for (size_t i = 0; i < rs.size(); ++i) {
              const auto w = first + static_cast<int32_t>(i);
              auto r = caf::actor_cast<rollouter_actor>(rs[i]);
              const auto addr = caf::actor_cast<caf::actor_addr>(r);
              self->monitor(r);
              st.roster.enlist(w, r);
              st.roles[addr] = "rollouter " + std::to_string(w) + " on " + n->host;
              st.roster.nodes().host(agent_addr, w);
              ++st.result.remote_rollouters_joined;
              start_rollouter(self, r);
            }
            tell_queue_members(self);
            spdlog::info("cluster: rollouter(s) {}..{} on {} are generating", first,
                         first + static_cast<int32_t>(rs.size()) - 1, n->host);
          },
          [self, agent_addr](const caf::error& e) {
            on_remote_lost(self, agent_addr, "join failed: " + self->system().render(e));
          });
}

void on_remote_lost(ctrl_ptr self, const caf::actor_addr& agent, const std::string& why) {
  auto& st = self->state;
  auto gone = st.roster.nodes().remove(agent);
  if (!gone) return;
  auto node = std::move(*gone);
  self->demonitor(agent);
  self->send_exit(node.agent, caf::exit_reason::user_shutdown);
  if (st.shutting_down()) return;
  spdlog::warn("cluster: worker {} (pid {}) lost: {}", node.host, node.pid, why);
  for (auto w : node.workers)
    drop_remote_worker(self, w, "its worker process was lost: " + why);
  self->send(st.sync, leave_atom::value, node.workers);
  tell_queue_members(self);
}

namespace {

// One rollouter of a live node leaves (it crashed there, or the console removed it): it is not
// restarted remotely.
void drop_from_node(ctrl_ptr self, int32_t worker, const std::string& why, bool lost) {
  auto& st = self->state;
  st.roster.nodes().leave(worker);
  drop_remote_worker(self, worker, why, lost);
  self->send(st.sync, leave_atom::value, std::vector<int32_t>{worker});
  tell_queue_members(self);
}

}  // namespace

void on_down(ctrl_ptr self, caf::down_msg& dm) {
  auto& st = self->state;
  const auto why = self->system().render(dm.reason);
  if (st.roster.nodes().is_node(dm.source)) {
    on_remote_lost(self, dm.source, why);
    return;
  }
  auto w = st.roster.worker_of(dm.source);
  if (!w || st.shutting_down()) return;
  drop_from_node(self, *w, why, /*lost=*/true);
}

void retire_rollouter(ctrl_ptr self, int32_t worker, const std::string& why) {
  auto& st = self->state;
  if (!st.roster.has(worker)) return;
  st.roster.retire(worker);
  if (st.roster.nodes().is_remote(worker)) {
    drop_from_node(self, worker, why, /*lost=*/false);
    return;
  }
  // Local: unlinked first, so that its exit is not taken for a crash to restart from.
  auto r = st.roster.remove(worker);  // fenced from here on
  const auto addr = caf::actor_cast<caf::actor_addr>(*r);
  spdlog::warn("console: removing rollouter {}: {}", worker, why);
  self->unlink_from(addr);
  self->send_exit(*r, caf::exit_reason::user_shutdown);
  st.roles.erase(addr);
  forget_incarnation(self, worker);
  self->send(self, requeue_atom::value, worker, addr);
  self->send(st.sync, leave_atom::value, std::vector<int32_t>{worker});
  tell_queue_members(self);
}

void release_nodes(ctrl_ptr self) {
  auto& st = self->state;
  for (auto& [addr, n] : st.roster.nodes().take_all()) {
    self->demonitor(addr);
    self->send(caf::actor_cast<node_agent_actor>(n.agent), stop_atom::value);
  }
}

}  // namespace asyncrl
