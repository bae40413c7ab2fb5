#include "runtime/scheduling/sim_engine.hpp"

#include <algorithm>
#include <climits>
#include <deque>
#include <map>
#include <stdexcept>

#include "runtime/scheduling/admission.hpp"
#include "runtime/scheduling/sim_accounting.hpp"
#include "runtime/scheduling/sim_events.hpp"
#include "runtime/scheduling/sim_micro_batch.hpp"

namespace asyncrl {

namespace {

struct seq {
  uint64_t group = 0;
  int32_t target = 1;
  int32_t done = 0;
  int64_t first_version = -1, last_version = -1;
  int32_t interruptions = 0;
};

struct group_state {
  int64_t remaining = 0;
  std::vector<sim_sample> samples;
};

struct device {
  std::vector<seq> active;
  std::deque<seq> waiting;
  std::vector<seq> held;  // partial responses while paused
  int64_t groups = 0;     // admitted, not finished
  bool stepping = false, paused = false, pause_requested = false, draining = false;
  bool wants_credit = false;
  int64_t version = 0;
  int64_t steps_in_chunk = 0;
  int32_t pending_k = 0;  // decode steps covered by the scheduled event
  double busy_ms = 0, pending_prefill_ms = 0;
};

class event_simulation {
 public:
  explicit event_simulation(const sim_params& p)
      : p_(p), adm_(p.plan.admission), micro_(p.micro_batch) {
    devices_.resize(static_cast<size_t>(p_.rollout_devices));
  }

  sim_result run() {
    for (size_t d = 0; d < devices_.size(); ++d)
      request_credits(d);
    try_trainer();
    while (step_ < p_.plan.total_steps) {
      if (events_.empty()) throw std::runtime_error("simulator: deadlock (no pending event)");
      auto e = events_.pop();
      now_ = e.t;
      switch (e.type) {
        case sim_event_kind::device_step:
          on_device_step(static_cast<size_t>(e.a));
          break;
        case sim_event_kind::group_queued:
          on_group_queued(static_cast<uint64_t>(e.a));
          break;
        case sim_event_kind::train_done:
          on_train_done();
          break;
        case sim_event_kind::sync_loaded:
          on_sync_loaded(e.a);
          break;
      }
    }
    return finish();
  }

 private:
  void push(double t, sim_event_kind type, int64_t a) { events_.push(t, type, a); }

  int32_t length_of(uint64_t group, uint32_t k) const {
    const auto& replay = p_.replay_lengths;
    if (!replay.empty())
      return replay[(group * static_cast<uint64_t>(p_.plan.group_size) + k) % replay.size()];
    if (p_.workload.lengths == workload_lengths::model)
      return static_cast<int32_t>(p_.workload.median);
    return workload_length(p_.workload, p_.seed, group, k);
  }

  // Rollouts ----------------------------------------------------------------------------------

  bool can_ask(const device& d) const {
    return !d.paused && !d.pause_requested && !d.draining && !sync_active_;
  }

  void request_credits(size_t i) {
    auto& d = devices_[i];
    const int64_t cap = std::max<int64_t>(1, p_.slots / p_.plan.group_size);
    const int64_t free = cap - d.groups;
    if (!can_ask(d) || free <= 0) return;
    const int64_t n = adm_.grant(free);
    if (n <= 0) {
      if (!d.wants_credit) credit_fifo_.push_back(i);
      d.wants_credit = true;
      return;
    }
    for (int64_t g = 0; g < n; ++g) {
      const uint64_t id = next_group_++;
      starts_[id] = d.version;
      auto& gs = groups_[id];
      gs.remaining = p_.plan.group_size;
      for (int64_t k = 0; k < p_.plan.group_size; ++k)
        d.waiting.push_back(seq{id, length_of(id, static_cast<uint32_t>(k))});
      d.pending_prefill_ms += p_.costs.prefill_per_token_ms * double(p_.prompt_tokens);
      ++d.groups;
      ++generated_;
    }
    ensure_stepping(i);
  }

  void serve_credits() {
    // The queue answers held requests first come, first served.
    for (size_t n = credit_fifo_.size(); n > 0 && !credit_fifo_.empty(); --n) {
      size_t i = credit_fifo_.front();
      credit_fifo_.pop_front();
      devices_[i].wants_credit = false;
      request_credits(i);
      if (devices_[i].wants_credit) break;  // still no budget: later ones wait too
    }
  }

  void ensure_stepping(size_t i) {
    auto& d = devices_[i];
    if (d.stepping || d.paused) return;
    while (static_cast<int64_t>(d.active.size()) < p_.slots && !d.waiting.empty()) {
      d.active.push_back(d.waiting.front());
      d.waiting.pop_front();
    }
    if (d.active.empty()) {
      maybe_paused(i);
      return;
    }
    // Several decode steps per event while the batch cannot change: up to the next finishing
    // response, capped (new work may wait that long for a free slot), and never past the next
    // chunk boundary once a pause is pending.
    int32_t k = p_.max_steps_per_event;
    for (auto& s : d.active)
      k = std::min(k, s.target - s.done);
    if (d.pause_requested)
      k = std::min<int32_t>(
          k, static_cast<int32_t>(p_.chunk_tokens - d.steps_in_chunk % p_.chunk_tokens));
    k = std::max(k, 1);
    d.pending_k = k;
    double cost = double(k) * (p_.costs.decode_base_ms +
                               p_.costs.decode_per_seq_ms * double(d.active.size())) +
                  d.pending_prefill_ms;
    // Training on other cores slows this event down (decided when it starts).
    const bool overlapped = trainer_busy_ && !p_.colocated;
    if (overlapped) cost *= p_.costs.gen_contention;
    d.pending_prefill_ms = 0;
    d.busy_ms += cost;
    if (overlapped) rollout_overlap_ms_ += cost;
    ++stepping_count_;
    d.stepping = true;
    push(now_ + cost, sim_event_kind::device_step, static_cast<int64_t>(i));
  }

  void on_device_step(size_t i) {
    auto& d = devices_[i];
    d.stepping = false;
    --stepping_count_;
    d.steps_in_chunk += d.pending_k;
    std::vector<seq> still;
    for (auto& s : d.active) {
      if (s.first_version < 0) s.first_version = d.version;
      s.last_version = d.version;
      s.done += d.pending_k;
      if (s.done < s.target) {
        still.push_back(s);
        continue;
      }
      auto& gs = groups_[s.group];
      gs.samples.push_back({s.first_version, s.last_version, s.done, s.interruptions});
      if (--gs.remaining == 0) {
        --d.groups;
        push(now_ + p_.costs.reward_ms, sim_event_kind::group_queued,
             static_cast<int64_t>(s.group));
      }
    }
    d.active.swap(still);
    // A pause is seen between chunks, as the rollouter handles control messages.
    if (d.pause_requested && d.steps_in_chunk % p_.chunk_tokens == 0) {
      interrupt(i);
      return;
    }
    request_credits(i);
    ensure_stepping(i);
  }

  void interrupt(size_t i) {
    auto& d = devices_[i];
    for (auto& s : d.active) {
      ++s.interruptions;
      ++interruptions_;
      d.held.push_back(s);
    }
    for (auto& s : d.waiting)
      d.held.push_back(s);
    d.active.clear();
    d.waiting.clear();
    d.pause_requested = false;
    d.paused = true;
    sync_device_paused();
  }

  void maybe_paused(size_t i) {
    auto& d = devices_[i];
    if (d.draining && d.active.empty() && d.waiting.empty()) {
      d.draining = false;
      d.paused = true;
      sync_device_paused();
    } else if (d.pause_requested && !d.stepping) {
      interrupt(i);
    }
  }

  // The queue and the trainer ----------------------------------------------------------------

  void on_group_queued(uint64_t id) {
    starts_.erase(id);
    for (const auto& s : groups_[id].samples) {
      finished_tokens_ += s.tokens;
      ++finished_samples_;
    }
    adm_.on_put();
    queue_.push_back(id);
    try_trainer();
  }

  int64_t oldest(uint64_t id) {
    int64_t v = INT64_MAX;
    for (auto& s : groups_[id].samples)
      v = std::min(v, s.first_version);
    return v;
  }

  void try_trainer() {
    if (trainer_busy_ || step_ >= p_.plan.total_steps) return;
    drop_stale_groups();
    if (buffer_.empty() && !take_from_queue()) return;
    if (idle_since_ >= 0) {
      step_idle_ += now_ - idle_since_;
      idle_since_ = -1;
    }
    train_one_group();
  }

  // Staleness is checked at delivery, as the queue does.
  void drop_stale_groups() {
    drop_stale(
        queue_, version_, p_.plan.admission.max_staleness, [&](uint64_t id) { return oldest(id); },
        [&](uint64_t, int64_t) {
          adm_.on_dropped();
          ++dropped_;
        });
  }

  // Fills the empty trainer buffer from the queue: the whole batch in sync, what is there (up
  // to the step's rest) otherwise. False, and the trainer idles, while too few groups wait.
  bool take_from_queue() {
    const auto& plan = p_.plan;
    const int64_t need = plan.wait_for_batch ? plan.groups_per_sync : 1;
    const int64_t take =
        plan.wait_for_batch ? plan.groups_per_sync : deliverable(plan.groups_per_step - in_step_);
    if (static_cast<int64_t>(queue_.size()) < need || take < need) {
      if (take < need && static_cast<int64_t>(queue_.size()) >= need && !holding_for_old_) {
        holding_for_old_ = true;
        ++stale_waits_;
      }
      if (idle_since_ < 0) idle_since_ = now_;
      serve_credits();
      return false;
    }
    holding_for_old_ = false;
    for (int64_t k = 0; k < take; ++k) {
      buffer_.push_back(queue_.front());
      queue_.pop_front();
      adm_.on_delivered();
    }
    serve_credits();
    return true;
  }

  // How many queued groups the trainer may take, at most `max`: all of them, or under
  // stale_policy wait those at their last chance first, keeping a place for each one still
  // generating (the queue actor's rule, runtime/scheduling/admission.hpp).
  int64_t deliverable(int64_t max) {
    const auto n = static_cast<int64_t>(queue_.size());
    const int64_t eta = p_.plan.admission.max_staleness;
    if (!p_.plan.admission.wait_for_stale || eta < 0) return std::min(n, max);
    auto young = std::stable_partition(queue_.begin(), queue_.end(), [&](uint64_t id) {
      return last_chance(version_, oldest(id), eta);
    });
    const auto old_queued = static_cast<int64_t>(young - queue_.begin());
    int64_t old_running = 0;
    for (const auto& [id, start] : starts_)
      old_running += last_chance(version_, start, eta) ? 1 : 0;
    return deliverable_keeping_bound(max, old_queued, n - old_queued, old_running);
  }

  // Trains on the buffer's first group; the step's optimizer step follows its last group.
  void train_one_group() {
    const auto& plan = p_.plan;
    const uint64_t id = buffer_.front();
    buffer_.pop_front();
    double tokens = 0;  // padded response tokens the trainer computes for this group
    const auto& samples = groups_[id].samples;
    for (auto& s : samples) {
      tokens += micro_.add(s.tokens);
      trained_tokens_ += s.tokens;
      ++trained_samples_;
    }
    account_group(step_acc_, samples, version_);
    groups_.erase(id);
    if (p_.micro_batch > 0 && p_.group_aligned) tokens += micro_.flush();
    if (in_step_ + 1 == plan.groups_per_step) tokens += micro_.flush();  // last, partly filled
    const double speed =
        p_.costs.train_scaling > 0 ? p_.costs.train_scaling : double(p_.train_devices);
    double cost = tokens * p_.costs.train_per_token_ms / speed;
    if (++in_step_ == plan.groups_per_step) cost += p_.costs.train_step_ms;
    // Generation on other cores slows this chunk down (decided when it starts).
    const bool overlapped = stepping_count_ > 0 && !p_.colocated;
    if (overlapped) cost *= p_.costs.train_contention;
    trainer_busy_ms_ += cost;
    if (overlapped) trainer_overlap_ms_ += cost;
    trainer_busy_ = true;
    push(now_ + cost, sim_event_kind::train_done, 0);
  }

  void on_train_done() {
    trainer_busy_ = false;
    if (in_step_ == p_.plan.groups_per_step) {
      in_step_ = 0;
      ++step_;
      ++version_;
      step_acc_.step = step_;
      step_acc_.end_ms = now_;
      step_acc_.step_ms = now_ - last_step_end_;
      step_acc_.trainer_idle_ms = step_idle_;
      steps_.push_back(step_acc_);
      step_acc_ = sim_step{};
      step_idle_ = 0;
      last_step_end_ = now_;
      adm_.on_trainer_version(version_);
      if (++in_sync_ == p_.plan.steps_per_sync && step_ < p_.plan.total_steps) {
        in_sync_ = 0;
        start_sync(version_);
      }
      serve_credits();
    }
    try_trainer();
  }

  // Weight syncs -------------------------------------------------------------------------------

  void start_sync(int64_t v) {
    if (sync_active_) {  // coalesce, as the synchronizer does
      pending_sync_ = v;
      return;
    }
    sync_active_ = true;
    sync_version_ = v;
    paused_count_ = 0;
    for (size_t i = 0; i < devices_.size(); ++i) {
      auto& d = devices_[i];
      if (p_.plan.partial_rollout) {
        d.pause_requested = true;
        if (!d.stepping) interrupt(i);
      } else {
        d.draining = true;
        maybe_paused(i);
      }
    }
  }

  void sync_device_paused() {
    if (++paused_count_ == static_cast<int64_t>(devices_.size()))
      push(now_ + p_.costs.sync_ms, sim_event_kind::sync_loaded, sync_version_);
  }

  void on_sync_loaded(int64_t v) {
    ++syncs_;
    adm_.on_sync();
    sync_active_ = false;
    for (size_t i = 0; i < devices_.size(); ++i) {
      auto& d = devices_[i];
      d.version = v;
      d.paused = false;
      d.steps_in_chunk = 0;
      // Resumed partial responses re-prefill prompt + partial tokens under the new weights.
      for (auto& s : d.held) {
        d.pending_prefill_ms += p_.costs.prefill_per_token_ms * double(p_.prompt_tokens + s.done);
        d.waiting.push_back(s);
      }
      d.held.clear();
    }
    if (pending_sync_ >= 0) {
      auto next = pending_sync_;
      pending_sync_ = -1;
      start_sync(next);
      return;
    }
    for (size_t i = 0; i < devices_.size(); ++i) {
      request_credits(i);
      ensure_stepping(i);
    }
    serve_credits();
  }

  sim_result finish() {
    double busy = 0;
    for (auto& d : devices_)
      busy += d.busy_ms;
    sim_result r =
        summarize_steps(steps_, now_, p_.warmup_steps, busy, static_cast<int64_t>(devices_.size()));
    r.groups_generated = generated_;
    r.groups_dropped = dropped_;
    r.len_generated = finished_samples_ ? double(finished_tokens_) / double(finished_samples_) : 0;
    r.len_trained = trained_samples_ ? double(trained_tokens_) / double(trained_samples_) : 0;
    r.stale_waits = stale_waits_;
    r.syncs = syncs_;
    r.interruptions = interruptions_;
    r.trainer_busy_ms = trainer_busy_ms_;
    r.trainer_overlap_ms = trainer_overlap_ms_;
    r.rollout_busy_ms = busy;
    r.rollout_overlap_ms = rollout_overlap_ms_;
    return r;
  }

  sim_params p_;
  admission_control adm_;
  std::vector<device> devices_;
  sim_event_queue events_;
  double now_ = 0;
  std::map<uint64_t, group_state> groups_;
  uint64_t next_group_ = 0;
  std::deque<size_t> credit_fifo_;
  std::deque<uint64_t> queue_, buffer_;
  sim_micro_batch micro_;  // the trainer's open micro-batch
  bool trainer_busy_ = false;
  int64_t stepping_count_ = 0;  // rollout devices with a decode event in flight
  double trainer_busy_ms_ = 0, trainer_overlap_ms_ = 0, rollout_overlap_ms_ = 0;
  int64_t version_ = 0;
  int64_t step_ = 0, in_step_ = 0, in_sync_ = 0;
  double idle_since_ = 0, step_idle_ = 0, last_step_end_ = 0;
  sim_step step_acc_;
  std::vector<sim_step> steps_;
  bool sync_active_ = false;
  int64_t sync_version_ = 0, pending_sync_ = -1;
  int64_t paused_count_ = 0;
  int64_t generated_ = 0, dropped_ = 0, syncs_ = 0, interruptions_ = 0;
  std::map<uint64_t, int64_t> starts_;  // running group -> its device's version when granted
  int64_t finished_tokens_ = 0, finished_samples_ = 0, trained_tokens_ = 0, trained_samples_ = 0;
  int64_t stale_waits_ = 0;
  bool holding_for_old_ = false;
};

}  // namespace

sim_result run_event_simulation(const sim_params& p) {
  return event_simulation(p).run();
}

}  // namespace asyncrl
