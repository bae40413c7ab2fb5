#include "actors/trainer.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>

#include "actors/deferred_stop.hpp"
#include "actors/errors.hpp"
#include "runtime/common/cpu_time.hpp"
#include "runtime/model/cuda_stream.hpp"
#include "runtime/model/model_io.hpp"
#include "runtime/model/weight_sync.hpp"
#include "runtime/task/evaluate.hpp"
#include "runtime/train/dp_leader.hpp"
#include "runtime/train/micro_batching.hpp"
#include "runtime/train/policy_trainer.hpp"

namespace asyncrl {

namespace {

using clock = std::chrono::steady_clock;

double ms_between(clock::time_point a, clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// What one optimizer step saw, beyond what policy_trainer reports.
struct step_acc {
  double reward_sum = 0;
  int64_t samples = 0, correct = 0, stale = 0, partial = 0, failures = 0;
  int64_t max_span = 0;
  int64_t filtered = 0, groups = 0;
  bool refill_exhausted = false;  // a filtered group found algorithm.max_refill_rounds spent
  int64_t response_tokens = 0;    // of non-filtered groups: 0 means nothing to train on
  double idle_ms = 0;
  double first_group_ms = -1, last_group_ms = -1;  // arrivals, ms after the step began
  double first_train_ms = -1;                      // the first forward/backward began
  int64_t out_of_order = 0;                        // groups consumed after a group with a larger id
  uint64_t last_group = 0;
  std::vector<uint64_t> ids;              // every group consumed, trained or filtered
  std::vector<double> rewards;            // each trained sample's (step_report::rewards)
  std::vector<int32_t> response_lengths;  // and its response's tokens
};

struct trainer_state {
  static inline const char* name = "trainer";
  trainer_args args;
  // The schedule and the live-settable values: the config's, until the console changes them.
  schedule_plan plan;
  live_settings live;
  std::optional<live_settings> pending_live;  // adopted at the next step boundary ...
  int64_t pending_step = 0;                   // ... which starts this step
  int64_t pull_max = 0;                       // groups the outstanding pull may bring
  // The trainer's own CUDA stream (none on the CPU): every handler that queues GPU work opens a
  // stream_scope of it, so that its host waits never wait for a rollouter's kernels.
  own_stream stream;
  std::unique_ptr<policy_trainer> pt;
  std::deque<scored_group> buffer;
  // Unaligned micro-batches: the step's groups stay here until the step ends, and responses
  // wait in `pending` until a micro-batch is full.
  std::deque<scored_group> step_groups;
  std::vector<const scored_sample*> pending;
  bool queue_drained = false;  // the last delivery left no group ready in the queue
  int64_t step = 0, groups_in_step = 0, steps_in_sync = 0;
  // Dynamic sampling with refill: replacements asked for the open step's filtered groups (the
  // step closes at groups_per_step + refills_in_step groups), and in sync the window's refills
  // and deliveries (its last pulls fetch exactly the refills still owed).
  int64_t refills_in_step = 0, window_refills = 0, window_delivered = 0;
  int64_t prox_version = 0;      // the weights in the old/proximal model
  int64_t delivered = 0;         // groups received from the queue, all of them
  double eval_time_s = 0;        // spent in eval.every_steps evaluations
  CausalLM eval_model{nullptr};  // float32 copy of the policy for those evaluations
  // A stop waits for every group the queue delivered (see the interface).
  deferred_stop<trainer_counts> stop;
  step_acc acc;
  trainer_counts counts;
  queue_stats last_queue;
  double last_sync_ms = 0;
  int64_t last_sync_bytes = 0;
  clock::time_point step_start = clock::now();
  trainer_phase phase = trainer_phase::training;
  bool pulling = false;  // a pull is out (its answer may still arrive after the training ended)
  int64_t next_checkpoint = 0;     // checkpoint.every_steps: the next step due one; 0 = off
  bool checkpoint_wanted = false;  // the controller asked for one (a signal)
  bool interrupt_wanted = false;   // ... and the run stops after it: the training ends there
  bool resumed = false;
};

using trainer_ptr = trainer_actor::stateful_pointer<trainer_state>;

bool finished(const trainer_state& st) {
  return st.phase != trainer_phase::training;
}

trainer_actor::behavior_type ended(trainer_ptr self);

// Every change of phase goes through here, so that the log names each one. Training and the
// three ends are two behaviours: once ended, the trainer takes no live settings and cuts a
// checkpoint without waiting for a boundary.
void set_phase(trainer_ptr self, trainer_phase p) {
  auto& st = self->state;
  if (st.phase == p) return;
  spdlog::debug("trainer: {} -> {} after step {}", to_string(st.phase), to_string(p), st.step);
  self->send(st.args.controller, activity_atom::value, trainer_status{p, st.step});
  if (st.phase == trainer_phase::training) self->become(ended(self));
  st.phase = p;
}

void pull_next(trainer_ptr self);
void cut_for_interrupt(trainer_ptr self);

void finish_stop(trainer_ptr self) {
  auto& st = self->state;
  if (!st.stop.ready(st.delivered)) return;
  auto c = st.counts;
  // Delivered but never consumed into a step (they arrived after the stop, or after an
  // interrupt ended the training): received from the queue, and held. `received` counts a group
  // when a step consumes it, so these are added here, or queue.delivered == trainer.received
  // would not hold for an interrupted run.
  c.held = static_cast<int64_t>(st.buffer.size());
  c.received += c.held;
  // Groups consumed into a step that never ran are neither trained nor dropped.
  c.held += st.groups_in_step;
  c.trained -= std::min<int64_t>(c.trained, st.groups_in_step - st.acc.filtered);
  c.filtered -= st.acc.filtered;
  c.refilled -= st.refills_in_step;
  c.version = st.pt->version();
  st.stop.deliver(c);
  self->quit();
}

// Greedy accuracy of the current policy on the test split (eval.every_steps).
double evaluate_now(trainer_ptr self) {
  compute_region cpu;
  auto& st = self->state;
  const auto& tp = st.args.env->params.trainer;
  if (!st.eval_model) {
    st.eval_model = CausalLM(st.args.env->model);
    st.eval_model->to(torch::Device(trainer_rank_device(tp, 0)));
    st.eval_model->eval();
  }
  const auto& policy = *st.pt->policy();
  load_snapshot(
      *st.eval_model,
      snapshot_weights(policy, st.pt->version(), weight_dtype::float32,
                       on_accelerator(policy) ? snapshot_place::device : snapshot_place::host),
      /*alias=*/false);
  return evaluate(st.eval_model.ptr(), *st.args.env->tokenizer, st.args.env->prompt, st.args.test,
                  greedy_eval_options(tp.eval, static_cast<int64_t>(tp.seed)))
      .pass1;
}

// One forward/backward into the step's gradient sums; the step's first marks when training
// started (the start-up latency the trainer actually sees). `last`: the step's last
// micro-batch, known here: data-parallel ranks sum their gradients during its backward.
void train_micro(trainer_state& st, const std::vector<const scored_sample*>& mb,
                 bool last = false) {
  if (st.acc.first_train_ms < 0) st.acc.first_train_ms = ms_between(st.step_start, clock::now());
  compute_region cpu;
  st.pt->accumulate(mb, last);
}

// Trains what is held back: with a token budget and group-aligned micro-batches, the step's
// groups in group-id order (the same partition whatever order they arrived in); otherwise the
// open, part-filled micro-batch of unaligned micro-batches, if any. `closing`: the step closes
// after these (do_step), so the last of them is the step's last micro-batch.
void train_pending(trainer_state& st, bool closing = false) {
  const auto& tr = st.args.env->params.trainer;
  if (tr.micro_batch_tokens > 0 && tr.group_aligned_micro_batches) {
    std::vector<const scored_group*> groups;
    for (const auto& g : st.step_groups)
      groups.push_back(&g);
    std::sort(groups.begin(), groups.end(),
              [](auto* a, auto* b) { return a->group_id < b->group_id; });
    std::vector<const scored_sample*> all;
    for (const auto* g : groups)
      for (const auto& s : g->samples)
        if (!s.response.empty()) all.push_back(&s);
    const auto mbs = split_by_tokens(all, tr.micro_batch_tokens, tr.shared_prompt_attention);
    for (size_t k = 0; k < mbs.size(); ++k)
      train_micro(st, mbs[k], closing && k + 1 == mbs.size());
    st.step_groups.clear();  // after training: the micro-batches point into these groups
    return;
  }
  if (st.pending.empty()) return;
  if (tr.micro_batch_tokens > 0) {
    const auto mbs = split_by_tokens(st.pending, tr.micro_batch_tokens, tr.shared_prompt_attention);
    for (size_t k = 0; k < mbs.size(); ++k)
      train_micro(st, mbs[k], closing && k + 1 == mbs.size());
  } else {
    train_micro(st, st.pending, closing);
  }
  st.pending.clear();
}

// The open step holds its groups: groups_per_step, plus one per refill asked for it.
bool step_full(const trainer_state& st) {
  return st.groups_in_step == st.plan.groups_per_step + st.refills_in_step;
}

// Streams one group into the current step: one micro-batch per chunk of the group.
void consume(trainer_ptr self, const scored_group& g) {
  auto& st = self->state;
  const auto& plan = st.plan;
  // old <- policy: in the on-policy modes at a sync (the weights that generated the batch); in
  // fully_async at the start of each local update (AReaL's proximal policy).
  const bool update_start =
      plan.old_per_step ? st.step % plan.steps_per_update == 0 : st.steps_in_sync == 0;
  if (st.groups_in_step == 0 && update_start) {
    compute_region cpu;
    st.pt->begin_batch();
    st.prox_version = st.pt->version();
  }
  if (st.groups_in_step > 0 && g.group_id < st.acc.last_group) ++st.acc.out_of_order;
  st.acc.last_group = g.group_id;
  st.acc.ids.push_back(g.group_id);
  ++st.counts.received;
  ++st.groups_in_step;
  ++st.acc.groups;
  if (g.filtered) {
    ++st.counts.filtered;
    ++st.acc.filtered;
    // DAPO's dynamic sampling: one more group from the prompt stream takes this one's place,
    // while the step's refill budget lasts. The queue admits it beyond the window, and gets the
    // filtered group's eta capacity back either way; the message reaches it before this
    // trainer's next pull (same sender).
    int64_t replace = 0;
    if (plan.refill_budget > 0) {
      if (st.refills_in_step < plan.refill_budget) {
        replace = 1;
        ++st.refills_in_step;
        ++st.window_refills;
        ++st.counts.refilled;
      } else {
        st.acc.refill_exhausted = true;
      }
    }
    self->send(st.args.queue, refill_atom::value, int64_t{1}, replace);
    return;
  }
  const int64_t v = st.pt->version();
  for (auto& s : g.samples) {
    st.acc.reward_sum += s.reward;
    st.acc.correct += s.reward >= 1.0 ? 1 : 0;
    st.acc.failures += s.reward_failed ? 1 : 0;
    ++st.acc.samples;
    st.acc.response_tokens += static_cast<int64_t>(s.response.size());
    st.acc.rewards.push_back(s.reward);
    st.acc.response_lengths.push_back(static_cast<int32_t>(s.response.size()));
    if (!s.versions.empty()) {
      auto [lo, hi] = std::minmax_element(s.versions.begin(), s.versions.end());
      if (*lo < v) ++st.acc.stale;
      st.acc.max_span = std::max(st.acc.max_span, *hi - *lo);
    }
    if (s.interruptions > 0) ++st.acc.partial;
  }
  const auto& tr = st.args.env->params.trainer;
  const auto micro = static_cast<size_t>(tr.micro_batch_size);
  ++st.counts.trained;
  if (tr.micro_batch_tokens > 0) {
    // Held until the step closes (group-aligned), or packed in arrival order as soon as a
    // micro-batch is full. The deque keeps the samples' addresses stable.
    st.step_groups.push_back(g);
    if (tr.group_aligned_micro_batches) return;
    for (auto& s : st.step_groups.back().samples)
      if (!s.response.empty()) st.pending.push_back(&s);
    while (auto n =
               full_micro_batch(st.pending, tr.micro_batch_tokens, tr.shared_prompt_attention)) {
      std::vector<const scored_sample*> mb(st.pending.begin(), st.pending.begin() + n);
      st.pending.erase(st.pending.begin(), st.pending.begin() + n);
      train_micro(st, mb);
    }
    return;
  }
  if (!tr.group_aligned_micro_batches) {
    st.step_groups.push_back(g);
    for (auto& s : st.step_groups.back().samples)
      if (!s.response.empty()) st.pending.push_back(&s);
    while (st.pending.size() >= micro) {
      std::vector<const scored_sample*> mb(st.pending.begin(), st.pending.begin() + micro);
      st.pending.erase(st.pending.begin(), st.pending.begin() + micro);
      train_micro(st, mb);
    }
    return;
  }
  // The step's last group: its last non-empty chunk is the step's last micro-batch.
  const bool closing = step_full(st);
  std::vector<std::vector<const scored_sample*>> mbs;
  for (size_t i = 0; i < g.samples.size(); i += micro) {
    std::vector<const scored_sample*> mb;
    for (size_t j = i; j < std::min(g.samples.size(), i + micro); ++j)
      if (!g.samples[j].response.empty()) mb.push_back(&g.samples[j]);
    if (!mb.empty()) mbs.push_back(std::move(mb));
  }
  for (size_t k = 0; k < mbs.size(); ++k)
    train_micro(st, mbs[k], closing && k + 1 == mbs.size());
}

// A checkpoint can be taken after the last completed step when resuming from it regenerates
// exactly what the uninterrupted run would have trained: always in fully_async (staleness is
// bounded, not exact), and in sync/periodic only when that step closed a sync window, so the
// policy is also the weights that generated (or will generate) the next window's groups.
bool at_checkpoint_boundary(trainer_ptr self) {
  const auto& st = self->state;
  return st.plan.mode == async_mode::fully_async || st.steps_in_sync == 0;
}

// The trainer's state after its last completed step. Groups consumed into the step that has
// not run yet are left out (the controller regenerates them), and the counts with them.
trainer_checkpoint make_checkpoint(trainer_ptr self) {
  auto& st = self->state;
  trainer_checkpoint c;
  c.step = st.step;
  c.steps_in_sync = st.steps_in_sync;
  c.prox_version = st.prox_version;
  c.eval_time_s = st.eval_time_s;
  c.counts = st.counts;
  c.counts.received -= st.groups_in_step;
  c.counts.trained -= st.groups_in_step - st.acc.filtered;
  c.counts.filtered -= st.acc.filtered;
  c.counts.refilled -= st.refills_in_step;
  // The buffered groups go back to the queue (c.held); `received` never counted them, since a
  // group counts when a step consumes it.
  c.counts.held = 0;
  c.counts.version = st.pt->version();
  c.held.assign(st.buffer.begin(), st.buffer.end());
  compute_region cpu;
  c.state = st.pt->save_state();
  // In the rollouters' dtype: on resume they load exactly what they held.
  c.rollout_weights = snapshot_weights(*st.pt->policy(), st.pt->version(),
                                       rollout_weights_dtype(st.args.env->params.rollouter));
  return c;
}

void send_checkpoint(trainer_ptr self) {
  auto& st = self->state;
  stream_scope on(st.stream);  // the state and the snapshot are copied on the trainer's stream
  st.checkpoint_wanted = false;
  const auto every = st.live.checkpoint_every_steps;
  if (every > 0) st.next_checkpoint = (st.step / every + 1) * every;
  self->send(st.args.controller, checkpoint_atom::value, make_checkpoint(self));
}

void publish(trainer_ptr self) {
  auto& st = self->state;
  // The one cast of this version to the rollouters' dtype: every rollouter of the process
  // shares the buffer, and remote ones receive it packed. On a GPU it stays there: the
  // rollouters of this process load it device to device, and the synchronizer copies it to
  // the host only for nodes.
  auto snap = [&] {
    compute_region cpu;
    const auto& policy = *st.pt->policy();
    return snapshot_weights(policy, st.pt->version(),
                            rollout_weights_dtype(st.args.env->params.rollouter),
                            on_accelerator(policy) ? snapshot_place::device : snapshot_place::host);
  }();
  const auto version = snap.version;
  self->request(st.args.synchronizer, caf::infinite, publish_atom::value, std::move(snap))
      .then(
          [self](const sync_report& r) {
            if (!r.ok) return;  // the synchronizer already failed the run
            self->state.last_sync_ms = r.time_ms;
            self->state.last_sync_bytes = r.bytes;
          },
          [self, version](const caf::error& e) {
            if (finished(self->state)) return;
            // A shutdown stops the synchronizer first and the trainer last (controller.cpp), so
            // a step that ends in between publishes to a synchronizer that is gone: expected,
            // and no warning (it was one at every console `stop` of a busy run). A synchronizer
            // that ends any other way is reported by the controller, which watches it.
            if (e == caf::sec::request_receiver_down)
              spdlog::debug("trainer: v{} not published: the synchronizer has stopped", version);
            else
              spdlog::warn("trainer: publish failed: {}", self->system().render(e));
          });
}

void do_step(trainer_ptr self) {
  auto& st = self->state;
  const auto& plan = st.plan;
  update_stats u;
  train_pending(st, /*closing=*/true);  // the last, partly filled micro-batch of the step
  std::optional<compute_region> cpu(std::in_place);
  st.step_groups.clear();
  if (st.acc.response_tokens > 0) {
    u = st.pt->step();
  } else {
    u.skipped = true;  // every group of the step was filtered: nothing to learn from
    spdlog::warn("trainer: step {} has no trainable tokens ({} groups filtered)", st.step + 1,
                 st.acc.filtered);
  }
  ++st.step;
  ++st.counts.steps;
  if (u.skipped) ++st.counts.skipped_steps;
  auto now = clock::now();
  step_report r;
  r.step = st.step;
  r.policy_version = st.pt->version();
  r.update = u;
  const double n = std::max<int64_t>(1, st.acc.samples);
  r.reward_mean = st.acc.reward_sum / n;
  r.accuracy = static_cast<double>(st.acc.correct) / n;
  r.samples = st.acc.samples;
  r.stale_samples = st.acc.stale;
  r.partial_ratio = static_cast<double>(st.acc.partial) / n;
  r.max_partial_span = st.acc.max_span;
  r.groups_trained = st.acc.groups - st.acc.filtered;
  r.filtered_groups = st.acc.filtered;
  r.refilled_groups = st.refills_in_step;
  r.refill_exhausted = st.acc.refill_exhausted;
  if (st.acc.refill_exhausted)
    spdlog::warn(
        "trainer: step {}: algorithm.max_refill_rounds={} spent ({} refills): {} of {} groups "
        "have a signal",
        st.step, st.args.env->params.trainer.schedule.max_refill_rounds, st.refills_in_step,
        r.groups_trained, plan.groups_per_step);
  r.reward_failures = st.acc.failures;
  r.step_ms = ms_between(st.step_start, now);
  r.trainer_idle_ms = st.acc.idle_ms;
  r.first_group_ms = st.acc.first_group_ms;
  r.last_group_ms = st.acc.last_group_ms;
  r.first_train_ms = st.acc.first_train_ms;
  r.sync_time_ms = st.last_sync_ms;
  r.sync_bytes = st.last_sync_bytes;
  r.params_checksum = params_checksum(*st.pt->policy());
  cpu.reset();  // evaluate_now books its own
  r.queue = st.last_queue;
  r.prox_version = st.prox_version;
  r.out_of_order_groups = st.acc.out_of_order;
  const auto every = st.live.eval_every_steps;
  if (every > 0 && !st.args.test.empty() && (st.step % every == 0 || st.step >= plan.total_steps)) {
    auto t0 = clock::now();
    r.eval_accuracy = evaluate_now(self);
    st.eval_time_s += ms_between(t0, clock::now()) / 1e3;
  }
  r.eval_time_s = st.eval_time_s;
  r.group_ids = std::move(st.acc.ids);
  r.rewards = std::move(st.acc.rewards);
  r.response_lengths = std::move(st.acc.response_lengths);
  self->send(st.args.controller, report_atom::value, r);
  st.acc = step_acc{};
  st.step_start = clock::now();  // the next step's time excludes this step's evaluation
  st.groups_in_step = 0;
  st.refills_in_step = 0;
  // Counted by the controller from the report just sent (trainer_crash_due).
  if (trainer_crash_due(st.args.env->params.trainer, st.step, st.resumed))
    throw std::runtime_error("injected fault: trainer crash after step " + std::to_string(st.step));
  if (st.step >= plan.total_steps) {
    set_phase(self, trainer_phase::done);
    self->send(st.args.controller, done_atom::value);
    return;
  }
  // >=: a live change of trigger_parameter_sync_step may leave the window past its new end.
  if (++st.steps_in_sync >= plan.steps_per_sync) {
    st.steps_in_sync = 0;
    st.window_refills = st.window_delivered = 0;
    publish(self);
  }
  const bool due = st.next_checkpoint > 0 && st.step >= st.next_checkpoint;
  if (!(due || st.checkpoint_wanted) || !at_checkpoint_boundary(self)) return;
  // An interrupt's (or the console's stop's) checkpoint, waited for until the window closed,
  // ends the training as one cut at a boundary does: a step trained after it would be in
  // metrics.jsonl and summary.json's steps but in no checkpoint, and a resume would train it
  // again.
  if (st.interrupt_wanted)
    cut_for_interrupt(self);
  else
    send_checkpoint(self);
}

// fully_async with require_batches > 1: a local update starts only once all of its
// mini-batches are here (verl gathers them before the update's first optimizer step).
bool gathering(trainer_ptr self) {
  auto& st = self->state;
  const auto& plan = st.plan;
  return plan.steps_per_update > 1 && st.groups_in_step == 0 &&
         st.step % plan.steps_per_update == 0 &&
         static_cast<int64_t>(st.buffer.size()) < plan.steps_per_update * plan.groups_per_step;
}

void process_buffer(trainer_ptr self) {
  auto& st = self->state;
  stream_scope on(st.stream);  // training, stepping, publishing, checkpoints
  while (!st.buffer.empty() && !finished(st) && !gathering(self)) {
    consume(self, st.buffer.front());
    st.buffer.pop_front();
    if (step_full(st)) do_step(self);
  }
  // Work-conserving unaligned micro-batches: nothing more is ready, so waiting for the open
  // micro-batch to fill would only idle the trainer (at the start of a periodic step it would
  // wait for micro_batch_size / G groups). The next pull collects what arrives meanwhile.
  const auto& tr = st.args.env->params.trainer;
  if (!tr.group_aligned_micro_batches && tr.eager_micro_batches && st.queue_drained &&
      !finished(st) && !gathering(self))
    train_pending(st);
  pull_next(self);
}

// The first step that starts after the groups in hand (consumed into the current step, buffered,
// or on their way in the outstanding pull) are trained: where live settings are adopted.
int64_t next_boundary_step(const trainer_state& st) {
  const auto in_hand =
      st.groups_in_step + static_cast<int64_t>(st.buffer.size()) + (st.pulling ? st.pull_max : 0);
  const auto per = std::max<int64_t>(1, st.plan.groups_per_step);
  return st.step + (in_hand + per - 1) / per + 1;
}

// At a step boundary (nothing in hand, no pull out): the trainer's own values change, and the
// queue gets its new admission rules before the pull for this step (same sender, in order).
void adopt_live(trainer_ptr self) {
  auto& st = self->state;
  stream_scope on(st.stream);  // the optimizer's learning rate
  st.live = *st.pending_live;
  st.pending_live.reset();
  auto tp = st.args.env->params.trainer;
  apply_live_settings(tp, st.live);
  st.plan = make_schedule(tp.schedule);
  st.pt->set_lr(st.live.lr);
  const auto every = st.live.checkpoint_every_steps;
  st.next_checkpoint = every > 0 ? (st.step / every + 1) * every : 0;
  self->send(st.args.queue, set_atom::value, st.plan.admission);
  if (st.step + 1 != st.pending_step)
    spdlog::warn("trainer: live settings adopted at step {}, announced for step {}", st.step + 1,
                 st.pending_step);
  spdlog::info("trainer: live settings in effect from step {}", st.step + 1);
}

void pull_next(trainer_ptr self) {
  auto& st = self->state;
  if (finished(st) || st.pulling) return;
  if (st.pending_live && st.groups_in_step == 0 && st.buffer.empty()) adopt_live(self);
  const auto& plan = st.plan;
  int64_t min = 1, max = plan.groups_per_step + st.refills_in_step - st.groups_in_step;
  if (plan.wait_for_batch) {
    // sync: the whole batch must be generated and scored before training starts; then the
    // refills its filtered groups asked for, all of them at once.
    min = max = plan.groups_per_sync + st.window_refills - st.window_delivered;
  } else if (gathering(self)) {
    min = max =
        plan.steps_per_update * plan.groups_per_step - static_cast<int64_t>(st.buffer.size());
  }
  st.pulling = true;
  st.pull_max = max;
  auto t0 = clock::now();
  self->request(st.args.queue, caf::infinite, pull_atom::value, st.pt->version(), min, max)
      .then(
          [self, t0](delivery& d) {
            auto& st = self->state;
            st.pulling = false;
            const auto now = clock::now();
            st.acc.idle_ms += ms_between(t0, now);
            if (!d.groups.empty()) {
              st.acc.last_group_ms = ms_between(st.step_start, now);
              if (st.acc.first_group_ms < 0) st.acc.first_group_ms = st.acc.last_group_ms;
            }
            st.last_queue = d.stats;
            st.queue_drained = d.stats.depth == 0;
            st.delivered += static_cast<int64_t>(d.groups.size());
            st.window_delivered += static_cast<int64_t>(d.groups.size());
            if (st.stop.armed()) {  // delivered after the stop: held, never trained
              for (auto& g : d.groups)
                st.buffer.push_back(std::move(g));
              finish_stop(self);
              return;
            }
            if (d.groups.empty()) return;  // the queue is shutting down
            ++st.counts.deliveries;
            if (st.plan.wait_for_batch)
              std::sort(d.groups.begin(), d.groups.end(),
                        [](const scored_group& a, const scored_group& b) {
                          return a.group_id < b.group_id;
                        });
            for (auto& g : d.groups)
              st.buffer.push_back(std::move(g));
            process_buffer(self);
          },
          [self](const caf::error& e) {
            self->state.pulling = false;
            if (!finished(self->state))
              self->send(self->state.args.controller, fail_atom::value,
                         "trainer: pull failed: " + self->system().render(e));
          });
}

// A checkpoint now if no step is open, else at the end of the step (checkpoint_wanted).
// Never inside a step: the groups streamed into it are accumulated gradients, which a
// checkpoint cannot hold (policy_trainer::save_state refuses them).
void checkpoint_when_closed(trainer_ptr self) {
  auto& st = self->state;
  if (st.groups_in_step == 0)
    send_checkpoint(self);
  else
    st.checkpoint_wanted = true;
}

// The run stops after this checkpoint. Waiting for the step in progress could mean waiting for
// every one of its responses to time out at a scorer that no longer answers, so the checkpoint
// is cut at the last completed step: the parameters and AdamW state are still that step's (a
// step only accumulates until it closes), its groups are regenerated on resume
// (make_checkpoint leaves them out), and the accumulated gradient is dropped. The trainer then
// trains no more.
void cut_for_interrupt(trainer_ptr self) {
  auto& st = self->state;
  stream_scope on(st.stream);
  if (st.groups_in_step > 0) {
    spdlog::info(
        "trainer: interrupted during step {}: checkpointing step {}; the {} "
        "group(s) of step {} are regenerated on resume",
        st.step + 1, st.step, st.groups_in_step, st.step + 1);
    compute_region cpu;
    st.pt->discard_pending();
  }
  set_phase(self, trainer_phase::interrupted);
  send_checkpoint(self);
}

// A behaviour: its own checkpoint, interrupt and live-settings handlers, then the ones that are
// the same while training and after.
template <class OnCheckpoint, class OnInterrupt, class OnSet>
trainer_actor::behavior_type with_shared(trainer_ptr self, OnCheckpoint checkpoint,
                                         OnInterrupt interrupt, OnSet set) {
  return {
      std::move(checkpoint),
      std::move(interrupt),
      std::move(set),
      [self](start_atom) {
        self->state.step_start = clock::now();
        pull_next(self);
      },
      [self](final_atom) -> weight_snapshot {
        stream_scope on(self->state.stream);
        compute_region cpu;
        return snapshot_weights(*self->state.pt->policy(), self->state.pt->version());
      },
      [self](stop_atom, int64_t expected_groups) -> caf::result<trainer_counts> {
        auto& st = self->state;
        set_phase(self, trainer_phase::stopping);
        auto promise = st.stop.arm(self, expected_groups);
        finish_stop(self);
        return promise;
      },
  };
}

trainer_actor::behavior_type training(trainer_ptr self) {
  return with_shared(
      self,
      // A signal: at a checkpoint boundary now (or at the end of its step), else at the end of
      // the sync window.
      [self](checkpoint_atom) {
        if (at_checkpoint_boundary(self))
          checkpoint_when_closed(self);
        else
          self->state.checkpoint_wanted = true;
      },
      [self](checkpoint_atom, interrupt_atom) {
        if (!at_checkpoint_boundary(self)) {
          // sync/periodic inside a window: at its end, and no step after it
          self->state.checkpoint_wanted = self->state.interrupt_wanted = true;
          return;
        }
        cut_for_interrupt(self);
      },
      [self](set_atom, live_settings& s) -> caf::result<int64_t> {
        auto& st = self->state;
        st.pending_step = next_boundary_step(st);
        st.pending_live = s;
        if (!st.pulling && st.groups_in_step == 0 && st.buffer.empty()) adopt_live(self);
        return st.pending_step;
      });
}

// Done, interrupted or stopping: no boundary to wait for.
trainer_actor::behavior_type ended(trainer_ptr self) {
  return with_shared(
      self, [self](checkpoint_atom) { checkpoint_when_closed(self); },
      [self](checkpoint_atom, interrupt_atom) { cut_for_interrupt(self); },
      [](set_atom, live_settings&) -> caf::result<int64_t> {
        return caf::make_error(errc::run_over, "the trainer has finished its steps");
      });
}

trainer_actor::behavior_type trainer_fn(trainer_ptr self, trainer_args args) {
  auto& st = self->state;
  st.args = std::move(args);
  // On the trainer's own thread (detached), before torch starts its OpenMP threads: they
  // inherit the mask.
  pin_role_thread(*st.args.env, st.args.env->cores.trainer, "trainer");
  set_torch_threads(st.args.env->trainer_threads);
  compute_region cpu;  // building the model and loading the weights
  const auto& tp = st.args.env->params.trainer;
  st.plan = st.args.env->plan;
  st.live = live_settings_of(tp);
  // From here on, the trainer's tensors are allocated and written on its own stream.
  st.stream = own_stream::for_device(trainer_rank_device(tp, 0));
  stream_scope on(st.stream);
  CausalLM policy(st.args.env->model);
  policy->to(torch::Device(trainer_rank_device(tp, 0)));
  load_snapshot(*policy, st.args.initial, /*alias=*/false);
  for (auto& p : policy->parameters())
    p.set_requires_grad(true);
  st.pt = std::make_unique<policy_trainer>(policy, tp.policy);
  if (auto& dp = st.args.data_parallel) {
    // Rank 0 of a multi-process data-parallel trainer: the other ranks replay its calls.
    st.pt->join_data_parallel(dp->group(), tp.shard_optimizer);
    st.pt->set_commands(dp.get());
  }
  st.pt->set_version(st.args.initial.version);
  if (st.args.restore) {
    auto& r = *st.args.restore;
    st.pt->load_state(r.state);
    st.step = r.step;
    st.steps_in_sync = r.steps_in_sync;
    st.prox_version = r.prox_version;
    st.eval_time_s = r.eval_time_s;
    st.counts = r.counts;
    st.resumed = true;
    st.args.restore.reset();  // the tensors are in the trainer now
  }
  if (tp.checkpoint_every_steps > 0)
    st.next_checkpoint = (st.step / tp.checkpoint_every_steps + 1) * tp.checkpoint_every_steps;
  install_exception_handler(self, "trainer");

  return training(self);
}

}  // namespace

trainer_actor spawn_trainer(caf::actor_system& sys, trainer_args args) {
  if (args.env->detached) return sys.spawn<caf::detached>(trainer_fn, std::move(args));
  return sys.spawn(trainer_fn, std::move(args));
}

}  // namespace asyncrl
