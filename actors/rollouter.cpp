#include "actors/rollouter.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include <chrono>
#include <map>
#include <optional>
#include <set>

#include "actors/env_pool.hpp"
#include "actors/errors.hpp"
#include "runtime/common/cpu_time.hpp"
#include "runtime/common/enum_names.hpp"
#include "runtime/generation/generator.hpp"
#include "runtime/model/cuda_stream.hpp"
#include "runtime/model/model.hpp"
#include "runtime/model/weight_sync.hpp"
#include "runtime/scheduling/workload.hpp"
#include "runtime/tools/episode_turns.hpp"

namespace asyncrl {

namespace {

using clock = std::chrono::steady_clock;

struct pending_group {
  prompt_task task;
  std::vector<gen_result> done;  // finished responses, in any order
};

// A response of a multi-turn episode while it lives (env.kind != none). Its tokens are in its
// gen_request (in the generator, held, or waiting at the environment); this is the rest.
struct episode {
  std::vector<uint8_t> mask;       // per token so far: 1 the model's, 0 the environment's
  size_t turn_start = 0;           // where the current model turn starts in the tokens
  std::vector<std::string> turns;  // the finished model turns, decoded (the replay record)
  bool env_failed = false;
  bool has_env_reward = false;
  double env_reward = 0;
};

struct rollouter_actor_state {
  static inline const char* name = "rollouter";
  rollouter_args args;
  // The rollouter's own CUDA stream (none on the CPU): every handler that queues GPU work (the
  // generator's calls, loads) opens a stream_scope of it, so that a chunk's host read waits for
  // this rollouter's kernels only, not for the trainer's.
  own_stream stream;
  std::shared_ptr<CausalLMImpl> model;
  std::unique_ptr<generator> gen;
  weight_snapshot weights;                   // the parameters alias this buffer: keep it alive
  std::map<uint64_t, pending_group> groups;  // admitted, not yet complete
  std::vector<gen_request> held;             // partials and fresh requests while paused
  // Multi-turn episodes: each live one's record, and the requests whose model turn is with the
  // environment (by request id). The generator never sees a request while it waits there.
  env_pool_actor env_pool;
  std::map<uint64_t, episode> episodes;
  std::map<uint64_t, gen_request> at_env;
  // env.sync_waits_for_tools: a pause answered only once no request waits at the environment.
  std::optional<caf::typed_response_promise<int64_t>> tool_gate;
  rollouter_state state = rollouter_state::idle;
  bool credit_pending = false;
  bool draining = false;
  // Pauses not yet matched by a resume. The synchronizer pairs every pause with a resume, but
  // a resume of one sync and the pause of the next can arrive in either order; generation
  // continues only once every pause has been answered by its resume.
  std::set<int64_t> pauses;   // tokens of pauses not yet resumed
  std::set<int64_t> resumed;  // tokens resumed before their pause arrived (or never will)
  bool stopping = false;
  caf::typed_response_promise<int64_t> drain_promise;
  std::vector<uint64_t> completed_ids;  // sent to the Reward, not yet reported
  // Injected sync faults: a delayed load waits here; a dropped one is never answered.
  std::optional<std::pair<weight_snapshot, caf::typed_response_promise<int64_t>>> delayed_load;
  std::vector<caf::typed_response_promise<int64_t>> dropped_loads;
  std::set<int64_t> dropped_versions;
  fault_counts faults;  // the drops and delays injected above, for progress and rollout_counts
  int64_t completed = 0, tokens = 0, interruptions = 0, chunks = 0;
  int64_t env_calls = 0, env_tokens = 0, observations_cut = 0, env_retries = 0, env_failures = 0;
  double busy_ms = 0;
  double temperature = 1.0;   // rollout.temperature, or as the console set it
  int64_t console_delay = 0;  // ms: the console delays the next load (delay-sync), once
  clock::time_point born = clock::now();

  int64_t capacity_groups() const {
    return std::max<int64_t>(
        1, args.env->params.rollouter.max_batch / args.env->params.rollouter.group_size);
  }
  bool paused() const {
    return state == rollouter_state::interrupted || state == rollouter_state::syncing;
  }
  bool multi_turn() const { return args.env->params.rollouter.env.kind != env_kind::none; }
  rollout_progress progress() const {
    rollout_progress p;
    p.worker = args.worker;
    p.tokens_generated = tokens;
    p.groups_completed = completed;
    p.busy_ms = busy_ms;
    p.idle_ms = std::chrono::duration<double, std::milli>(clock::now() - born).count() - busy_ms;
    p.version = gen ? gen->version() : 0;
    p.state = state;
    p.faults = faults;
    return p;
  }
};

using self_ptr = rollouter_actor::stateful_pointer<rollouter_actor_state>;

rollouter_actor::behavior_type idle(self_ptr self);
rollouter_actor::behavior_type waiting_env(self_ptr self);
rollouter_actor::behavior_type generating(self_ptr self);
rollouter_actor::behavior_type interrupted(self_ptr self);
rollouter_actor::behavior_type syncing(self_ptr self);
rollouter_actor::behavior_type resuming(self_ptr self);

void enter(self_ptr self, rollouter_state next, rollouter_actor::behavior_type b) {
  spdlog::debug("rollouter {}: {} -> {} (active {}, waiting {}, held {})", self->state.args.worker,
                to_string(self->state.state), to_string(next),
                self->state.gen ? self->state.gen->num_active() : 0,
                self->state.gen ? self->state.gen->num_waiting() : 0, self->state.held.size());
  self->state.state = next;
  self->become(std::move(b));
}

void push_progress(self_ptr self) {
  auto p = self->state.progress();
  p.completed = std::move(self->state.completed_ids);
  self->state.completed_ids.clear();
  self->send(self->state.args.controller, progress_atom::value, std::move(p));
}

// The next decode chunk, as a message to self. faults.slow_rollouter_ms slows worker 0 down.
void next_chunk(self_ptr self) {
  const auto slow = self->state.args.env->params.rollouter.slow_ms;
  if (slow > 0 && self->state.args.worker == 0)
    self->delayed_send(self, std::chrono::milliseconds(slow), gen_atom::value);
  else
    self->send(self, gen_atom::value);
}

// A response is over: it joins its group, which leaves for the Reward once all G are back.
// True when a group left.
bool add_to_group(self_ptr self, gen_result r) {
  auto& st = self->state;
  const auto G = static_cast<size_t>(st.args.env->params.rollouter.group_size);
  auto it = st.groups.find(r.request.prompt_id);
  if (it == st.groups.end()) {
    spdlog::error("rollouter {}: response for unknown group {}", st.args.worker,
                  r.request.prompt_id);
    st.episodes.erase(r.request.id);
    return false;
  }
  it->second.done.push_back(std::move(r));
  if (it->second.done.size() < G) return false;
  auto& pg = it->second;
  scored_group g;
  g.group_id = pg.task.group_id;
  g.prompt_index = pg.task.prompt_index;
  g.seq = pg.task.seq;
  g.ground_truth = pg.task.ground_truth;
  g.worker = st.args.worker;
  std::sort(pg.done.begin(), pg.done.end(), [](const gen_result& a, const gen_result& b) {
    return a.request.sample_index < b.request.sample_index;
  });
  for (auto& d : pg.done) {
    scored_sample s;
    s.uid = d.request.id;
    s.group_id = g.group_id;
    s.index = d.request.sample_index;
    s.prompt = std::move(d.request.prompt);
    s.response = std::move(d.request.tokens);
    s.logprobs = std::move(d.request.logprobs);
    s.versions = std::move(d.request.versions);
    s.interruptions = d.request.interruptions;
    if (auto e = st.episodes.find(s.uid); e != st.episodes.end()) {
      auto& ep = e->second;
      ep.mask.resize(s.response.size(), 1);  // a response cut by the stop keeps its model tail
      s.loss_mask = std::move(ep.mask);
      s.turns = std::max<int32_t>(1, static_cast<int32_t>(ep.turns.size()));
      s.env_failed = ep.env_failed;
      s.has_env_reward = ep.has_env_reward;
      s.env_reward = ep.env_reward;
      st.episodes.erase(e);
    }
    g.samples.push_back(std::move(s));
  }
  st.groups.erase(it);
  st.completed_ids.push_back(g.group_id);
  ++st.completed;
  self->send(st.args.reward, score_atom::value, std::move(g));
  return true;
}

// A model turn of a multi-turn episode ended: records it (its tokens are the model's).
void record_turn(self_ptr self, const gen_result& r) {
  auto& st = self->state;
  auto& ep = st.episodes[r.request.id];
  const auto& tokens = r.request.tokens;
  ep.mask.resize(tokens.size(), 1);
  ep.turns.push_back(
      model_turn_text(*st.args.env->tokenizer, tokens, ep.turn_start, st.args.env->prompt.stop_id));
}

void on_env_answer(self_ptr self, uint64_t id, env_answer& a);
void request_work(self_ptr self);

// Hands the episode's last model turn to the environment. The request waits in at_env, out of
// the generator, until the answer comes back (in whatever state the rollouter is then).
void to_env(self_ptr self, gen_request req) {
  auto& st = self->state;
  const auto& ep = st.episodes[req.id];
  env_call c;
  c.episode = req.id;
  c.turn = static_cast<int32_t>(ep.turns.size());
  c.text = ep.turns.back();
  c.earlier.assign(ep.turns.begin(), ep.turns.end() - 1);
  c.task = st.args.env->tokenizer->decode(req.prompt);
  if (auto g = st.groups.find(req.prompt_id); g != st.groups.end())
    c.ground_truth = g->second.task.ground_truth;
  const auto id = req.id;
  st.at_env.emplace(id, std::move(req));
  ++st.env_calls;
  self->request(st.env_pool, caf::infinite, env_atom::value, std::move(c))
      .then([self, id](env_answer& a) { on_env_answer(self, id, a); },
            [self, id](caf::error& e) {
              env_answer a;
              a.failed = a.done = true;
              a.error = self->system().render(e);
              on_env_answer(self, id, a);
            });
}

// Turns finished responses into groups; a multi-turn episode's model turn goes to the
// environment instead, which says whether the episode goes on (the last turn a limit allows
// goes too: the environment may score it).
void collect(self_ptr self, std::vector<gen_result>& results) {
  auto& st = self->state;
  bool any = false;
  for (auto& r : results) {
    if (r.reason == finish_reason::error)
      spdlog::error("rollouter {}: request {} failed: {}", st.args.worker, r.request.id, r.error);
    else if (st.multi_turn()) {
      record_turn(self, r);
      to_env(self, std::move(r.request));
      continue;
    }
    any = add_to_group(self, std::move(r)) || any;
  }
  if (any) push_progress(self);
}

void submit(self_ptr self, gen_request r) {
  auto& st = self->state;
  // During a drain nothing new starts (as in verl): only the responses in flight finish under
  // the old weights; the rest waits for the resume.
  if (st.paused() || st.state == rollouter_state::resuming || st.draining) {
    st.held.push_back(std::move(r));
  } else {
    stream_scope on(st.stream);
    st.gen->submit(std::move(r));
  }
}

void ensure_generating(self_ptr self) {
  const auto s = self->state.state;
  if ((s == rollouter_state::idle || s == rollouter_state::waiting_env) &&
      !self->state.gen->idle()) {
    enter(self, rollouter_state::generating, generating(self));
    next_chunk(self);
  }
}

// The state with nothing to generate: waiting_env while episodes wait at the environment.
void enter_quiet(self_ptr self) {
  if (self->state.at_env.empty())
    enter(self, rollouter_state::idle, idle(self));
  else
    enter(self, rollouter_state::waiting_env, waiting_env(self));
}

// A pause is answered with the requests held. With env.sync_waits_for_tools it is answered
// only once no episode waits at the environment (the baseline that asyncrl improves on).
caf::result<int64_t> answer_pause(self_ptr self) {
  auto& st = self->state;
  if (st.args.env->params.rollouter.env.sync_waits_for_tools && !st.at_env.empty()) {
    st.tool_gate = self->make_response_promise<int64_t>();
    return *st.tool_gate;
  }
  return static_cast<int64_t>(st.held.size());
}

// Appends the environment's turn to the request's tokens. False when the episode has no room
// left for another model turn (it ends).
bool append_observation(self_ptr self, gen_request& req, episode& ep,
                        const std::vector<std::string>& observations) {
  auto& st = self->state;
  const auto& rp = st.args.env->params.rollouter;
  auto obs = observation_tokens(*st.args.env->tokenizer, st.args.env->prompt.chat, observations,
                                rp.env.max_observation_tokens,
                                rp.max_episode_tokens - static_cast<int64_t>(req.tokens.size()));
  st.observations_cut += obs.cut;
  // The environment's tokens carry no log-prob of their own and the version of the model
  // token before them, so the staleness bound and the per-token versions see model tokens only.
  const int64_t version = req.versions.empty() ? st.gen->version() : req.versions.back();
  for (auto t : obs.ids) {
    req.tokens.push_back(t);
    req.logprobs.push_back(0.f);
    req.versions.push_back(version);
    ep.mask.push_back(0);
  }
  st.env_tokens += static_cast<int64_t>(obs.ids.size());
  ep.turn_start = req.tokens.size();
  req.max_new_tokens = static_cast<int32_t>(std::min<int64_t>(
      static_cast<int64_t>(req.tokens.size()) + rp.max_new_tokens, rp.max_episode_tokens));
  return obs.fits;
}

// The environment answered request `id`'s model turn: the episode ends, or continues with the
// environment's turn in its context under whatever weights are loaded when it is generated.
void on_env_answer(self_ptr self, uint64_t id, env_answer& a) {
  auto& st = self->state;
  auto it = st.at_env.find(id);
  if (it == st.at_env.end()) return;  // the rollouter stopped; its groups are abandoned
  auto req = std::move(it->second);
  st.at_env.erase(it);
  auto& ep = st.episodes[id];
  st.env_retries += a.failed_attempts;
  st.env_failures += a.failed;
  if (a.injected) {  // faults.env_fault_every: recovered unless the call failed after its replays
    ++st.faults.env_faults;
    st.faults.env_faults_recovered += !a.failed;
    push_progress(self);  // counted now: this incarnation may be killed before its stop
  }
  if (a.failed) {
    ep.env_failed = true;
    spdlog::warn("rollouter {}: episode {} ends: its environment failed: {}", st.args.worker, id,
                 a.error);
  }
  if (a.done && a.has_reward) {
    ep.has_env_reward = true;
    ep.env_reward = a.reward;
  }
  // Done, failed, or the turn or token budget spent: the environment's answer is not appended.
  const auto& rp = st.args.env->params.rollouter;
  const bool over =
      episode_ends(a, static_cast<int64_t>(ep.turns.size()),
                   static_cast<int64_t>(req.tokens.size()), rp.max_turns, rp.max_episode_tokens) ||
      !append_observation(self, req, ep, a.observations);
  if (over) {
    gen_result g;
    g.request = std::move(req);
    if (add_to_group(self, std::move(g))) push_progress(self);
  } else {
    submit(self, std::move(req));
    ensure_generating(self);
  }
  if (st.at_env.empty()) {
    if (st.tool_gate) {
      st.tool_gate->deliver(static_cast<int64_t>(st.held.size()));
      st.tool_gate.reset();
    }
    if (st.state == rollouter_state::waiting_env) {
      enter(self, rollouter_state::idle, idle(self));
      push_progress(self);
    }
  }
  // A group this answer completed frees capacity: ask for more, as run_chunk does after a
  // chunk. Without it a rollouter whose episodes all ended at their environment sat idle with
  // room for work and the run stalled (chaos_every_config, gsm8k_tiny_hf's env_fault round).
  request_work(self);
}

void add_group(self_ptr self, prompt_task task) {
  auto& st = self->state;
  const auto& rp = st.args.env->params.rollouter;
  const auto G = rp.group_size;
  // stale_policy wait: the queue keeps room for this group while the trainer is within eta of
  // the policy it begins with (its tokens come from this version or later).
  if (rp.report_starts)
    self->send(st.args.queue, started_atom::value, st.args.worker, task.group_id,
               st.gen->version());
  for (int64_t k = 0; k < G; ++k) {
    gen_request r;
    r.id = task.group_id * static_cast<uint64_t>(G) + static_cast<uint64_t>(k);
    r.prompt_id = task.group_id;
    r.sample_index = static_cast<uint32_t>(k);
    r.prompt = task.prompt;
    r.max_new_tokens = static_cast<int32_t>(
        st.multi_turn() ? std::min(rp.max_new_tokens, rp.max_episode_tokens) : rp.max_new_tokens);
    if (st.multi_turn()) st.episodes[r.id] = episode{};
    r.sampling.temperature = st.temperature;
    r.sampling.top_k = static_cast<int32_t>(rp.top_k);
    r.sampling.top_p = rp.top_p;
    if (rp.workload.lengths != workload_lengths::model) {  // benchmark workload: a forced length
      r.max_new_tokens =
          workload_length(rp.workload, rp.seed, task.group_id, static_cast<uint32_t>(k));
      r.ignore_eos = true;
    }
    submit(self, std::move(r));
  }
  st.groups.emplace(task.group_id, pending_group{std::move(task), {}});
}

// Asks the queue for admission credit, then the controller for that many prompts. One
// request at a time; the queue holds it until the staleness budget allows new groups.
void request_work(self_ptr self) {
  auto& st = self->state;
  if (st.credit_pending || st.stopping || st.draining || st.paused()) return;
  const int64_t want = st.capacity_groups() - static_cast<int64_t>(st.groups.size());
  if (want <= 0) return;
  st.credit_pending = true;
  auto on_error = [self](const caf::error& e) {
    self->state.credit_pending = false;
    if (!self->state.stopping)
      spdlog::warn("rollouter {}: work request failed: {}", self->state.args.worker,
                   self->system().render(e));
  };
  self->request(st.args.queue, caf::infinite, credit_atom::value, st.args.worker, want)
      .then(
          [self, on_error](int64_t granted) {
            auto& st = self->state;
            if (granted <= 0 || st.stopping) {
              if (granted > 0)
                self->send(st.args.queue, abandon_atom::value, st.args.worker, granted);
              st.credit_pending = false;
              return;
            }
            self->request(st.args.controller, caf::infinite, prompts_atom::value, granted)
                .then(
                    [self, granted](std::vector<prompt_task>& tasks) {
                      auto& st = self->state;
                      st.credit_pending = false;
                      if (static_cast<int64_t>(tasks.size()) < granted)
                        self->send(st.args.queue, abandon_atom::value, st.args.worker,
                                   granted - static_cast<int64_t>(tasks.size()));
                      for (auto& t : tasks)
                        add_group(self, std::move(t));
                      ensure_generating(self);
                      request_work(self);
                    },
                    on_error);
          },
          on_error);
}

// One chunk of decoding; the next chunk is a message to self, so that high-priority control
// messages overtake it.
void run_chunk(self_ptr self) {
  auto& st = self->state;
  stream_scope on(st.stream);
  auto t0 = clock::now();
  const auto before = st.gen->stats().tokens_generated;
  auto results = [&] {
    compute_region cpu;  // prefill and decode
    return st.gen->step(static_cast<int>(st.args.env->params.rollouter.chunk_tokens));
  }();
  st.tokens += st.gen->stats().tokens_generated - before;
  st.busy_ms += std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  ++st.chunks;
  collect(self, results);
  if (st.gen->idle()) {
    if (st.draining) {
      st.draining = false;
      enter(self, rollouter_state::interrupted, interrupted(self));
      if (st.args.env->params.rollouter.env.sync_waits_for_tools && !st.at_env.empty())
        st.tool_gate = std::move(st.drain_promise);
      else
        st.drain_promise.deliver(int64_t{0});
      push_progress(self);
      return;
    }
    enter_quiet(self);
    push_progress(self);  // the controller's view (and its watchdog's report) shows the idle
    request_work(self);
    return;
  }
  next_chunk(self);
  request_work(self);
}

rollout_counts finish(self_ptr self) {
  auto& st = self->state;
  stream_scope on(st.stream);
  st.stopping = true;
  st.gen->interrupt();
  rollout_counts c;
  c.worker = st.args.worker;
  c.groups_completed = st.completed;
  c.groups_unfinished = static_cast<int64_t>(st.groups.size());
  c.tokens_generated = st.tokens;
  c.interruptions = st.interruptions;
  c.faults = st.faults;
  c.env_calls = st.env_calls;
  c.env_tokens = st.env_tokens;
  c.observations_cut = st.observations_cut;
  c.env_retries = st.env_retries;
  c.env_failures = st.env_failures;
  if (st.tool_gate) st.tool_gate->deliver(int64_t{0});
  st.tool_gate.reset();
  st.at_env.clear();
  st.episodes.clear();
  if (st.env_pool) self->send_exit(st.env_pool, caf::exit_reason::user_shutdown);
  if (c.groups_unfinished > 0)
    self->send(st.args.queue, abandon_atom::value, st.args.worker, c.groups_unfinished);
  if (st.args.env->params.rollouter.report_starts)
    for (const auto& [id, g] : st.groups)
      self->send(st.args.queue, started_atom::value, st.args.worker, id, int64_t{-1});
  st.groups.clear();
  st.held.clear();
  self->quit();
  return c;
}

// Handlers that are the same in every state.
auto on_stop(self_ptr self) {
  return [self](stop_atom) -> caf::result<rollout_counts> { return finish(self); };
}

// Loads `w` into the model; the rollouter is paused.
caf::error apply_load(self_ptr self, const weight_snapshot& w) {
  auto& st = self->state;
  stream_scope on(st.stream);  // waits (on the device) for the trainer's snapshot copy
  try {
    compute_region cpu;
    load_snapshot(*st.model, w, /*alias=*/true);
  } catch (const std::exception& e) {
    return caf::make_error(errc::bad_weights, e.what());
  }
  st.weights = w;
  st.gen->set_version(w.version);
  enter(self, rollouter_state::syncing, syncing(self));
  return caf::none;
}

bool every(int64_t n, int64_t version) {
  return n > 0 && version > 0 && version % n == 0;
}

auto on_load(self_ptr self) {
  return [self](load_atom, weight_snapshot& w) -> caf::result<int64_t> {
    auto& st = self->state;
    if (!st.paused()) return caf::skip;  // a load always follows a pause; wait for it
    const auto& f = st.args.env->params.rollouter;
    // Injected: the first load of every n-th version to worker 0 is lost on the way; the
    // synchronizer's deadline fires and its retry gets through.
    if (st.args.worker == 0 && every(f.sync_drop_every, w.version) &&
        st.dropped_versions.insert(w.version).second) {
      spdlog::warn("rollouter 0: injected fault: load of v{} dropped", w.version);
      ++st.faults.sync_drops;
      push_progress(self);  // counted now: this incarnation may be killed before its stop
      st.dropped_loads.push_back(self->make_response_promise<int64_t>());
      return st.dropped_loads.back();
    }
    const bool from_config = every(f.sync_delay_every, w.version) && f.sync_delay_ms > 0;
    if ((from_config || st.console_delay > 0) && !st.delayed_load) {
      const auto ms = st.console_delay > 0 ? st.console_delay : f.sync_delay_ms;
      st.console_delay = 0;
      spdlog::warn("rollouter {}: injected fault: load of v{} delayed by {} ms", st.args.worker,
                   w.version, ms);
      ++st.faults.sync_delays;
      push_progress(self);  // counted now: this incarnation may be killed before its stop
      auto rp = self->make_response_promise<int64_t>();
      st.delayed_load.emplace(w, rp);
      self->delayed_send(self, std::chrono::milliseconds(ms), apply_atom::value);
      return rp;
    }
    if (auto err = apply_load(self, w)) return err;
    return w.version;
  };
}

// A delayed load is due: apply it if the rollouter is still paused for it.
auto on_apply(self_ptr self) {
  return [self](apply_atom) {
    auto& st = self->state;
    if (!st.delayed_load) return;
    auto [w, rp] = std::move(*st.delayed_load);
    st.delayed_load.reset();
    if (!st.paused()) return;  // the sync gave up on it (deadline) and resumed us
    if (auto err = apply_load(self, w))
      rp.deliver(err);
    else
      rp.deliver(w.version);
  };
}

// The console's live changes, the same in every state.
auto on_temperature(self_ptr self) {
  return [self](set_atom, double t) { self->state.temperature = t; };
}

auto on_delay(self_ptr self) {
  return [self](delay_atom, int64_t ms) { self->state.console_delay = ms; };
}

// A pause: counts unless its resume came first (then it is already over).
bool add_pause(self_ptr self, int64_t token) {
  auto& st = self->state;
  if (st.resumed.erase(token) > 0) return false;
  st.pauses.insert(token);
  return true;
}

auto already_paused(self_ptr self) {
  return [self](pause_atom, int64_t token) -> caf::result<int64_t> {
    add_pause(self, token);
    return static_cast<int64_t>(self->state.held.size());
  };
}

// A resume while not paused: its pause has not arrived yet (or went to a dead incarnation).
auto early_resume(self_ptr self) {
  return [self](resume_atom, int64_t token) {
    if (self->state.pauses.erase(token) == 0) self->state.resumed.insert(token);
  };
}

// A resume while paused: continue (under whatever weights are loaded; none if the sync's load
// failed) once every pause has had its resume.
auto resume_when_paused(self_ptr self) {
  return [self](resume_atom, int64_t token) {
    auto& st = self->state;
    if (st.pauses.erase(token) == 0) st.resumed.insert(token);
    if (!st.pauses.empty()) return;
    enter(self, rollouter_state::resuming, resuming(self));
    next_chunk(self);
  };
}

// A state's behaviour: its own handlers (start, gen, pause, resume), then the ones that are
// the same in every state, written here once.
template <class... Handlers>
rollouter_actor::behavior_type in_state(self_ptr self, Handlers... own) {
  return {std::move(own)...,    on_load(self),  on_apply(self),
          on_temperature(self), on_delay(self), on_stop(self)};
}

// Nothing to generate: no work (idle), or every live episode waits at its environment
// (waiting_env). Both take a pause at once: no tool call holds a weight sync back.
rollouter_actor::behavior_type quiet(self_ptr self) {
  return in_state(
      self, [self](start_atom) { request_work(self); }, [](gen_atom) {},
      [self](pause_atom, int64_t token) -> caf::result<int64_t> {
        if (!add_pause(self, token)) return static_cast<int64_t>(self->state.held.size());
        enter(self, rollouter_state::interrupted, interrupted(self));
        return answer_pause(self);
      },
      early_resume(self));
}

rollouter_actor::behavior_type idle(self_ptr self) {
  return quiet(self);
}

rollouter_actor::behavior_type waiting_env(self_ptr self) {
  return quiet(self);
}

rollouter_actor::behavior_type generating(self_ptr self) {
  return in_state(
      self, [self](start_atom) { request_work(self); }, [self](gen_atom) { run_chunk(self); },
      [self](pause_atom, int64_t token) -> caf::result<int64_t> {
        auto& st = self->state;
        if (st.draining) return caf::skip;  // answered once the drain completes
        if (!add_pause(self, token)) return static_cast<int64_t>(st.held.size());
        if (st.args.env->params.rollouter.partial_rollout) {
          // Stop at this token boundary; keep the partial responses for the resume.
          stream_scope on(st.stream);
          for (auto& r : st.gen->interrupt()) {
            if (!r.request.tokens.empty()) ++st.interruptions;
            st.held.push_back(std::move(r.request));
          }
          enter(self, rollouter_state::interrupted, interrupted(self));
          push_progress(self);
          return answer_pause(self);
        }
        // No partial rollout: let everything in flight finish under the current weights.
        st.draining = true;
        st.drain_promise = self->make_response_promise<int64_t>();
        return st.drain_promise;
      },
      early_resume(self));
}

rollouter_actor::behavior_type interrupted(self_ptr self) {
  return in_state(
      self, [](start_atom) {}, [](gen_atom) {},  // a chunk queued before the pause: nothing to do
                                                 // now
      already_paused(self), resume_when_paused(self));
}

rollouter_actor::behavior_type syncing(self_ptr self) {
  return in_state(
      self, [](start_atom) {}, [](gen_atom) {}, already_paused(self), resume_when_paused(self));
}

rollouter_actor::behavior_type resuming(self_ptr self) {
  return in_state(
      self, [](start_atom) {},
      [self](gen_atom) {
        // Resubmit partial responses: the generator re-prefills prompt + partial tokens under
        // the new weights, and their old tokens count against max_new_tokens.
        auto& st = self->state;
        stream_scope on(st.stream);
        for (auto& r : st.held)
          st.gen->submit(std::move(r));
        st.held.clear();
        enter(self, rollouter_state::generating, generating(self));
        if (st.gen->idle()) {
          enter_quiet(self);
          push_progress(self);
          request_work(self);
          return;
        }
        run_chunk(self);
      },
      [self](pause_atom, int64_t token) -> caf::result<int64_t> {
        if (!add_pause(self, token)) return static_cast<int64_t>(self->state.held.size());
        enter(self, rollouter_state::interrupted, interrupted(self));
        return answer_pause(self);
      },
      early_resume(self));
}

rollouter_actor::behavior_type rollouter_fn(self_ptr self, rollouter_args args) {
  auto& st = self->state;
  st.args = std::move(args);
  // On the rollouter's own thread (detached), before torch starts its OpenMP threads: they
  // inherit the mask. A respawned rollouter keeps its worker id, and so its cores.
  pin_role_thread(*st.args.env, rollouter_cpus(*st.args.env, st.args.worker),
                  ("rollouter " + std::to_string(st.args.worker)).c_str());
  set_torch_threads(st.args.env->rollout_threads);
  compute_region cpu;  // building the model and loading the weights
  const auto& rp = st.args.env->params.rollouter;
  // From here on, the rollouter's tensors are allocated and written on its own stream.
  st.stream = own_stream::for_device(rollouter_device(rp, st.args.worker));
  stream_scope on(st.stream);
  torch::Device device(rollouter_device(rp, st.args.worker));
  CausalLM model(st.args.env->model);
  model->to(device);
  // bf16 rollouts: bf16 weights, activations and KV cache (the generator's cache follows the
  // model's compute dtype); the snapshots arrive in bf16 already and are aliased on the CPU.
  if (rollout_weights_dtype(rp) == weight_dtype::bf16) cast_parameters(*model, torch::kBFloat16);
  model->eval();
  model->batch_invariant = rp.batch_invariant;
  model->fused_decode = rp.fused_decode;  // the generator packs q/k/v and gate/up when set
  st.model = model.ptr();
  load_snapshot(*st.model, st.args.initial, /*alias=*/true);
  st.weights = st.args.initial;
  st.temperature = rp.temperature;
  generator_options go;
  go.max_slots = rp.max_batch;
  go.max_seq_len = std::min<int64_t>(
      rp.max_prompt_length +
          (rp.env.kind != env_kind::none ? rp.max_episode_tokens : rp.max_new_tokens),
      st.args.env->model.max_position_embeddings);
  go.seed = rp.seed;
  go.eos_id = st.args.env->prompt.stop_id;
  st.gen = std::make_unique<generator>(st.model, go);
  st.gen->set_version(st.args.initial.version);
  if (rp.env.kind != env_kind::none) {
    st.env_pool = st.args.env_pool;
    if (!st.env_pool) {
      env_pool_args ea;
      ea.worker = st.args.worker;
      ea.env = rp.env;
      ea.format = st.args.env->prompt.chat;
      ea.seed = rp.seed;
      ea.fault_every = rp.env_fault_every;
      st.env_pool = spawn_env_pool(self->system(), std::move(ea));
    }
    self->link_to(st.env_pool);
  }
  install_exception_handler(self, "rollouter " + std::to_string(st.args.worker));

  return idle(self);
}

}  // namespace

rollouter_actor spawn_rollouter(caf::actor_system& sys, rollouter_args args) {
  const bool detached = args.env->detached;
  if (detached) return sys.spawn<caf::detached>(rollouter_fn, std::move(args));
  return sys.spawn(rollouter_fn, std::move(args));
}

}  // namespace asyncrl
