// The controller's fault tolerance: the checkpoint cut, resume, and restarts of crashed
// rollouters (docs/fault-tolerance.md).

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "actors/controller_state.hpp"
#include "actors/run_checkpoint.hpp"
#include "messages/errors.hpp"
#include "runtime/checkpoint/checkpoint_file.hpp"
#include "runtime/common/atomic_file.hpp"

namespace asyncrl {

namespace {

prompt_task task_of(const scored_group& g) {
  prompt_task t;
  t.group_id = g.group_id;
  t.prompt_index = g.prompt_index;
  t.seq = g.seq;
  if (!g.samples.empty()) t.prompt = g.samples.front().prompt;
  t.ground_truth = g.ground_truth;
  return t;
}

queue_stats add_counters(const queue_stats& base, const queue_stats& now) {
  queue_stats q;
  q.dropped_stale = base.dropped_stale + now.dropped_stale;
  q.regenerated = base.regenerated + now.regenerated;
  q.abandoned = base.abandoned + now.abandoned;
  q.lost = base.lost + now.lost;
  q.max_delivered_staleness = std::max(base.max_delivered_staleness, now.max_delivered_staleness);
  q.published_version = now.published_version;
  return q;
}

// The queue's copy arrived: together with the trainer's part, everything dispatched so far is
// trained (by the cut's step), dropped, saved scored, or regenerated from the loader.
void write_cut(ctrl_ptr self, const delivery& d, double wall, int64_t tokens,
               int64_t tokens_trained) {
  auto& st = self->state;
  auto c = std::move(*st.cutting);
  st.cutting.reset();
  run_state rs;
  rs.step = c.step;
  std::set<uint64_t> saved;
  rs.queued = std::move(c.held);  // delivered earlier than the queue's own
  rs.queued.insert(rs.queued.end(), d.groups.begin(), d.groups.end());
  for (auto& g : rs.queued)
    saved.insert(g.group_id);
  auto regen = st.ledger.unsaved(saved);
  regen.insert(regen.end(), st.trained_after_cut.begin(), st.trained_after_cut.end());
  std::sort(regen.begin(), regen.end(),
            [](const prompt_task& a, const prompt_task& b) { return a.group_id < b.group_id; });
  rs.loader = st.loader.save(std::move(regen));
  // The ledger as of the cut: the seqs trained after it were appended last.
  const auto& trained = st.ledger.trained_seqs();
  rs.trained_seqs.assign(trained.begin(),
                         trained.end() - static_cast<std::ptrdiff_t>(st.trained_after_cut.size()));
  rs.dropped_seqs = st.ledger.dropped_seqs();
  st.trained_after_cut.clear();
  // Totals at the cut, consistent by construction: every group that reached the queue was
  // delivered (the trainer's count), dropped, or is saved.
  rs.queue = add_counters(st.base.queue, d.stats);
  rs.queue.delivered = c.counts.received;
  rs.queue.restored = static_cast<int64_t>(rs.queued.size());
  rs.queue.received = rs.queue.delivered + rs.queue.dropped_stale + rs.queue.restored;
  rs.reward = st.base.reward;
  rs.reward.received = rs.reward.forwarded = rs.queue.received;
  rs.groups_generated = rs.queue.received;
  rs.tokens_generated = tokens;
  rs.tokens_trained = tokens_trained;
  rs.wall_time_s = wall;
  const auto windows = static_cast<int64_t>(d.stats.window_granted.size());
  rs.syncs = st.base.syncs + std::max<int64_t>(0, windows - 1);
  rs.rollouter_restarts = st.base.rollouter_restarts + st.result.rollouter_restarts;
  rs.trainer = std::move(c);
  const auto& cp = st.args.env->params.controller;
  std::string path;
  try {
    // The config in force: with the console's live changes, so that a resume restores them
    // (apps/asyncrl/train_command.cpp, live_values_to_restore).
    const auto config_yaml = st.live_cfg ? st.live_cfg->yaml() : st.args.config_yaml;
    path = write_run_checkpoint(st.args.checkpoint_dir, cp.checkpoint_keep, rs, config_yaml);
  } catch (const std::exception& e) {
    console_checkpoint_done(self, "", rs.step, e.what());
    shutdown(self, std::string("checkpoint at step ") + std::to_string(rs.step) + ": " + e.what());
    return;
  }
  ++st.result.checkpoints;
  st.result.checkpoint = path;
  st.result.checkpoint_step = rs.step;
  console_checkpoint_done(self, path, rs.step, "");
  spdlog::info("checkpoint: step {} -> {} ({} groups saved, {} prompts to regenerate)", rs.step,
               path, rs.queued.size(), rs.loader.retry.size());
  if (cp.corrupt_checkpoint_at_step > 0 && cp.corrupt_checkpoint_at_step == rs.step) {
    spdlog::warn("injected fault: damaging checkpoint {}", path);
    ++st.result.faults.checkpoints_damaged;
    corrupt_checkpoint_file(path, /*truncate=*/false);
  }
  if (st.interrupts == 0) return;
  // The run stops at the interrupt's own cut: the trainer's last step, after which it trains no
  // more. A cut written meanwhile (checkpoint.every_steps, the console's checkpoint) can be
  // older: the trainer then still trains to its boundary and its cut comes next, or its cut came
  // while this one was written and was passed over (one at a time), so it is asked for again.
  // Stopping here would count steps in summary.json that no checkpoint holds.
  const auto& tr = st.reported.trainer;
  if (tr.phase == trainer_phase::training) return;
  if (tr.phase == trainer_phase::interrupted && tr.step > rs.step) {
    self->send(st.trainer, checkpoint_atom::value, interrupt_atom::value);
    return;
  }
  shutdown(self,
           std::string(st.console_stop ? "stopped from the console" : "interrupted") +
               "; checkpoint of step " + std::to_string(rs.step) + " written to " + path,
           st.console_stop ? run_status::stopped : run_status::interrupted);
}

}  // namespace

void restore_from_checkpoint(ctrl_ptr self) {
  auto& st = self->state;
  auto& rs = *st.args.resume;
  st.resumed = true;
  auto& b = st.base;
  b.step = rs.step;
  b.queue = rs.queue;
  b.reward = rs.reward;
  b.groups_generated = rs.groups_generated;
  b.tokens_generated = rs.tokens_generated;
  b.tokens_trained = rs.tokens_trained;
  b.syncs = rs.syncs;
  b.rollouter_restarts = rs.rollouter_restarts;
  b.wall_time_s = rs.wall_time_s;
  st.loader.restore(rs.loader);
  st.ledger.restore(rs.trained_seqs, rs.dropped_seqs);
  for (auto& g : rs.queued) {  // in flight again: scored, waiting in the queue
    st.ledger.dispatched(task_of(g), -1);
    st.ledger.completed(g.group_id);
  }
  st.result.resumed_from_step = rs.step;
  st.result.steps = rs.step;
  st.result.tokens_trained = rs.tokens_trained;
  st.watch.step_done(rs.step);
  st.metrics.continue_from(rs.tokens_generated, rs.wall_time_s);
  if (!st.args.run_dir.empty()) trim_metrics(st.args.run_dir + "/metrics.jsonl", rs.step);
  spdlog::info("resume: step {}, epoch {}, {} groups back in the queue, {} prompts to regenerate",
               rs.step, rs.loader.epoch, rs.queued.size(), rs.loader.retry.size());
}

void on_trainer_checkpoint(ctrl_ptr self, trainer_checkpoint c) {
  auto& st = self->state;
  if (st.args.checkpoint_dir.empty() || st.shutting_down()) return;
  if (st.cutting) {  // one cut at a time; an interrupt is served by the one in progress
    spdlog::debug("checkpoint: step {} skipped, step {} is being written", c.step,
                  st.cutting->step);
    return;
  }
  // Every report up to c.step has arrived (the trainer sent them first) and none after.
  const double wall = st.wall_s();
  const int64_t tokens = st.tokens_generated();
  const int64_t tokens_trained = st.result.tokens_trained;
  st.cutting = std::move(c);
  st.trained_after_cut.clear();
  self->request(st.queue, std::chrono::seconds(60), snapshot_atom::value)
      .then([self, wall, tokens,
             tokens_trained](delivery& d) { write_cut(self, d, wall, tokens, tokens_trained); },
            [self](const caf::error& e) {
              auto& st = self->state;
              spdlog::warn("checkpoint: the queue did not answer: {}", self->system().render(e));
              st.cutting.reset();
              st.trained_after_cut.clear();
              console_checkpoint_done(self, "", -1, "the queue did not answer");
              if (st.interrupts > 0)
                shutdown(self, "interrupted (no checkpoint: the queue did not answer)",
                         run_status::interrupted);
            });
}

void after_step(ctrl_ptr self, const step_report& r) {
  auto& st = self->state;
  auto tasks = st.ledger.trained(r.group_ids);
  if (st.cutting)
    st.trained_after_cut.insert(st.trained_after_cut.end(), tasks.begin(), tasks.end());
  // The trainer throws right after sending this report; it cannot count its own crash.
  if (trainer_crash_due(st.args.env->params.trainer, r.step, st.resumed))
    ++st.result.faults.trainer_crashes;
  const auto every = st.args.env->params.controller.kill_rollouter_every_steps;
  if (every > 0 && r.step % every == 0 && r.step < st.args.env->plan.total_steps &&
      !st.roster.empty()) {
    // Round robin over the rollouters, by the kills so far.
    auto& kills = st.result.faults.rollouter_kills;
    const auto& live = st.roster.live();
    auto victim = std::next(live.begin(), kills++ % static_cast<int64_t>(live.size()));
    spdlog::warn("injected fault: killing rollouter {} after step {}", victim->first, r.step);
    // Anonymous, because an exit message from a linked actor unlinks the receiver from it
    // first; and not exit_reason::kill, which no actor can trap, so that it would take the
    // controller (linked) down with it. The rollouter dies as a crash would: with an error.
    caf::anon_send(
        caf::actor_cast<caf::actor>(victim->second),
        caf::exit_msg{caf::actor_addr{},
                      caf::make_error(errc::injected_fault, "injected fault: rollouter killed")});
  }
}

void watch_rollouter(ctrl_ptr self, int32_t worker, const rollouter_actor& r) {
  auto& st = self->state;
  self->link_to(r);
  const auto addr = caf::actor_cast<caf::actor_addr>(r);
  st.roles[addr] = "rollouter " + std::to_string(worker);
  st.roster.enlist(worker, r);
}

void on_rollouter_crash(ctrl_ptr self, int32_t worker, const caf::actor_addr& dead,
                        const std::string& why) {
  auto& st = self->state;
  const auto& sv = st.args.env->params.controller;
  if (!st.restarts) st.restarts.emplace(sv.max_restarts, sv.restart_window_s);
  spdlog::warn("supervision: rollouter {} crashed: {}", worker, why);
  if (!st.restarts->spend(self->clock().now())) {
    shutdown(self, "rollouter " + std::to_string(worker) + " crashed (" + why +
                       "): " + std::to_string(st.restarts->in_window()) + " crashes within " +
                       fmt::format("{:g}", sv.restart_window_s) +
                       " s exceed supervision.max_restarts " + std::to_string(sv.max_restarts));
    return;
  }
  ++st.result.rollouter_restarts;  // counted now: a shutdown may overtake the restart itself
  forget_incarnation(self, worker);
  self->send(self, requeue_atom::value, worker, dead);
}

void forget_incarnation(ctrl_ptr self, int32_t worker) {
  auto& st = self->state;
  // What the dead incarnation generated stays counted (its groups: see requeue_and_respawn),
  // and so do the faults injected into it (it pushed progress as each fired).
  if (auto p = st.roster.bury(worker)) st.result.faults += p->faults;
  st.metrics.forget_worker(worker);
}

void requeue_and_respawn(ctrl_ptr self, int32_t worker, const caf::actor_addr& dead) {
  auto& st = self->state;
  // Every message the dead incarnation sent was enqueued before its exit (or, remote, its
  // connection's loss) reached us, and this message after: its prompt requests have been
  // handled here, and its groups are in the Reward's mailbox ahead of the settle. The Reward's
  // answer, not the rollouter's last progress report, says which groups arrived: a report cut
  // off with the connection cannot make a delivered group run twice. What it was given and
  // did not deliver is generated again, first.
  // Settled even during a shutdown, which stops the Reward only after every settle is answered:
  // the dead incarnation's groups count as generated either way.
  ++st.settles_pending;
  auto settled = [self] {
    auto& st = self->state;
    if (--st.settles_pending == 0 && st.after_settles) {
      auto next = std::move(st.after_settles);
      st.after_settles = nullptr;
      next();
    }
  };
  self->request(st.reward, std::chrono::seconds(60), settle_atom::value, dead, worker)
      .then(
          [self, worker, dead, settled](std::vector<uint64_t>& ids, int64_t delivered_by_worker) {
            auto& st = self->state;
            st.roster.add_dead_groups(static_cast<int64_t>(ids.size()));
            for (auto id : ids)
              st.ledger.completed(id);
            if (st.shutting_down()) {
              settled();
              return;
            }
            auto lost = st.ledger.lost_with(worker);
            st.loader.retry_first(lost);
            self->send(st.queue, lost_atom::value, worker, delivered_by_worker, dead);
            if (st.roster.gone_for_good(worker)) {
              spdlog::info("rollouter {} is gone ({} prompts to regenerate)", worker, lost.size());
            } else {
              spdlog::info("supervision: restarting rollouter {} ({} prompts to regenerate)",
                           worker, lost.size());
              respawn(self, worker);
            }
            settled();
          },
          [self, worker, settled](const caf::error& e) {
            shutdown(self,
                     "rollouter " + std::to_string(worker) +
                         ": the reward did not settle its groups: " + self->system().render(e));
            settled();
          });
}

void respawn(ctrl_ptr self, int32_t worker) {
  auto& st = self->state;
  self->request(st.sync, std::chrono::seconds(60), respawn_atom::value, worker)
      .then(
          [self, worker](caf::actor& a) {
            auto& st = self->state;
            if (st.shutting_down()) {
              self->send_exit(a, caf::exit_reason::user_shutdown);
              return;
            }
            auto r = caf::actor_cast<rollouter_actor>(a);
            watch_rollouter(self, worker, r);
            start_rollouter(self, r);
          },
          [self, worker](const caf::error& e) {
            shutdown(self, "supervision: rollouter " + std::to_string(worker) +
                               " could not be restarted: " + self->system().render(e));
          });
}

void write_ledger(ctrl_ptr self) {
  auto& st = self->state;
  auto sorted = [](std::vector<uint64_t> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  auto in_flight = st.ledger.in_flight_seqs();
  for (auto& t : st.loader.waiting())
    in_flight.push_back(t.seq);
  nlohmann::json j{{"trained", sorted(st.ledger.trained_seqs())},
                   {"dropped", sorted(st.ledger.dropped_seqs())},
                   {"in_flight", sorted(in_flight)},
                   {"next_seq", st.loader.dispatched()}};
  // Atomic: a full disk leaves the previous ledger, never a truncated one. The ledger is a
  // report (the checkpoint holds its own copy), so a failed write is logged, not fatal.
  try {
    write_file_atomically(st.args.run_dir + "/ledger.json", j.dump() + "\n");
  } catch (const std::exception& e) {
    spdlog::error("ledger: {}", e.what());
  }
}

}  // namespace asyncrl
