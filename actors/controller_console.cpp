// The controller's side of the console (asyncrl repl, docs/repl.md). A request arrives as a
// console_request from a client in this process or through the cluster listener; it is checked
// (who asks, --read-only, the arguments) and answered with a JSON object. Changes to the run go
// through messages the roles already understand, and each is appended to
// <run_dir>/events.jsonl with the step from which it holds.

#include <spdlog/spdlog.h>
#include <caf/all.hpp>

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

#include "actors/console_tasks.hpp"
#include "actors/controller_state.hpp"
#include "actors/controller_views.hpp"
#include "messages/errors.hpp"
#include "runtime/console/commands.hpp"
#include "runtime/console/live_keys.hpp"

namespace asyncrl {

namespace {

using json = nlohmann::ordered_json;
using reply = caf::result<console_reply>;
using promise = caf::typed_response_promise<console_reply>;

// The roles answer between two messages of their own; a trainer step or a sync can take a while.
constexpr auto kRoleTimeout = std::chrono::seconds(120);
constexpr auto kTaskTimeout = std::chrono::minutes(30);  // eval of a large test split

console_reply answer(const json& j) {
  return console_reply{true, "", j.dump()};
}

console_reply refuse(std::string why) {
  return console_reply{false, std::move(why), ""};
}

std::string host_of(const caf::node_id& n) {
  auto s = to_string(n);
  return s.substr(0, s.find('#'));
}

// In-process clients may always ask. Remote ones only under TLS (their certificate was checked
// at the handshake), or from this machine: CAF's node id carries a hash of the host, which is
// what tells a loopback client from another machine when the listener is not loopback-only
// (cluster.allow_insecure). That hash is the peer's own claim: without TLS, the listener's
// address is the real boundary (docs/repl.md).
std::string check_client(ctrl_ptr self) {
  const auto& sender = self->current_sender();
  if (!sender || sender->node() == self->node()) return "";
  if (self->state.args.env->params.controller.tls) return "";
  if (host_of(sender->node()) == host_of(self->node())) return "";
  return "the console accepts clients from other machines only under TLS (cluster.tls.*)";
}

live_config& live_cfg(ctrl_ptr self) {
  auto& st = self->state;
  if (!st.live_cfg) st.live_cfg = std::make_unique<live_config>(st.args.config_yaml);
  return *st.live_cfg;
}

std::string now_iso() {
  const auto t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

void log_event(ctrl_ptr self, json e) {
  auto& st = self->state;
  spdlog::info("console: {}", e.dump());
  if (st.args.run_dir.empty()) return;
  if (!st.events)
    st.events = std::make_unique<std::ofstream>(st.args.run_dir + "/events.jsonl", std::ios::app);
  json line{{"time", now_iso()}, {"wall_time_s", st.wall_s()}, {"step", st.watch.last_step()}};
  line.update(e);
  *st.events << line.dump() << "\n" << std::flush;
}

std::string where_of(ctrl_ptr self, int32_t worker) {
  auto& st = self->state;
  return st.roster.where(worker);
}

reply do_status(ctrl_ptr self) {
  auto rp = self->make_response_promise<console_reply>();
  auto& st = self->state;
  self->request(st.queue, kRoleTimeout, stats_atom::value)
      .then(
          [self, rp](queue_stats& q) mutable {
            self->request(self->state.reward, kRoleTimeout, stats_atom::value)
                .then(
                    [self, rp, q](reward_counts& rc, std::vector<int64_t>&) mutable {
                      rp.deliver(answer(console_status_view(self->state, &q, &rc)));
                    },
                    [self, rp, q](const caf::error&) mutable {
                      rp.deliver(answer(console_status_view(self->state, &q, nullptr)));
                    });
          },
          [self, rp](const caf::error&) mutable {
            rp.deliver(answer(console_status_view(self->state, nullptr, nullptr)));
          });
  return rp;
}

reply do_metrics(ctrl_ptr self, int64_t n) {
  return answer(console_metrics_view(self->state, n));
}

reply do_workers(ctrl_ptr self) {
  auto rp = self->make_response_promise<console_reply>();
  self->request(self->state.reward, kRoleTimeout, stats_atom::value)
      .then(
          [self, rp](reward_counts& rc, std::vector<int64_t>& load) mutable {
            rp.deliver(answer(console_workers_view(self->state, rc, load)));
          },
          [rp](const caf::error& e) mutable {
            rp.deliver(refuse("the reward did not answer: " + to_string(e)));
          });
  return rp;
}

reply do_get(ctrl_ptr self, const std::string& name) {
  auto& live = live_cfg(self);
  auto key = resolve_live_key(name);
  if (key.empty()) key = name;
  if (!live.has(key))
    return refuse("unknown config key '" + name + "' (asyncrl config --describe lists them)");
  return answer(
      json{{"key", key}, {"value", live.value(key)}, {"live", !resolve_live_key(key).empty()}});
}

// What the answer to a set of a trainer key says of its effect. trainer.lr is the peak of
// trainer.lr_schedule (its config meaning, and what a resume restores): under warmup or cosine
// the announced step runs at the schedule's share of the new value, so the answer says so
// rather than read as if that step ran at the value itself.
std::string trainer_effect(const std::string& key, const trainer_params& tp) {
  const auto& p = tp.policy;
  if (key != "trainer.lr" || p.lr_schedule == lr_schedule_kind::constant)
    return "from the announced step";
  return "from the announced step, as the peak of trainer.lr_schedule=" +
         std::string(to_string(p.lr_schedule)) +
         " (trainer.warmup_steps=" + std::to_string(p.warmup_steps) +
         "): the schedule keeps scaling it; metrics.jsonl's lr is the rate each step used";
}

reply do_set(ctrl_ptr self, const std::string& name, const std::string& value) {
  auto& st = self->state;
  auto& cur = live_cfg(self);
  const auto key = resolve_live_key(name);
  if (key.empty()) {
    if (cur.has(name)) return refuse(why_not_live(name));
    return refuse("unknown config key '" + name + "' (asyncrl config --describe lists them)");
  }
  if (key == "async_training.trigger_parameter_sync_step" &&
      cur.params().controller.mode != async_mode::fully_async)
    return refuse(key +
                  " can change live only in fully_async: in sync and periodic modes a "
                  "weight sync closes every batch (that is what keeps them on-policy)");
  if (st.shutting_down()) return refuse("the run is stopping");
  // The value goes through the config loader: the same parsing, ranges and cross-checks as a
  // config file, and an error that names the key.
  std::unique_ptr<live_config> next;
  try {
    next = std::make_unique<live_config>(cur.with(key, value));
  } catch (const std::exception& e) {
    return refuse(e.what());
  }
  const auto old_value = cur.value(key);
  const auto new_value = next->value(key);
  const auto target = [&] {
    for (auto& k : live_keys())
      if (key == k.key) return k.target;
    return live_target::controller;
  }();
  st.live_cfg = std::move(next);  // now: a second set before the first is answered builds on it
  const auto& params = st.live_cfg->params();
  json event{{"event", "set"}, {"key", key}, {"old", old_value}, {"new", new_value}};
  if (target == live_target::rollouters) {
    for (auto& [w, r] : st.roster.live())
      self->send(r, set_atom::value, params.rollouter.temperature);
    event["effective_step"] = st.watch.last_step() + 1;
    event["effect"] = "groups started from now on";
    log_event(self, event);
    return answer(event);
  }
  if (target == live_target::controller) {
    if (st.watch.set_timeout(params.controller.progress_timeout_s)) arm_watchdog(self);
    event["effective_step"] = st.watch.last_step() + 1;
    event["effect"] = "now";
    log_event(self, event);
    return answer(event);
  }
  auto rp = self->make_response_promise<console_reply>();
  const auto effect = trainer_effect(key, params.trainer);
  self->request(st.trainer, kRoleTimeout, set_atom::value, live_settings_of(params.trainer))
      .then(
          [self, rp, event, effect](int64_t step) mutable {
            event["effective_step"] = step;
            event["effect"] = effect;
            log_event(self, event);
            rp.deliver(answer(event));
          },
          [rp](const caf::error& e) mutable {
            rp.deliver(refuse("the trainer did not take the change: " + to_string(e)));
          });
  return rp;
}

reply do_hold(ctrl_ptr self, bool hold) {
  auto& st = self->state;
  if (st.shutting_down()) return refuse("the run is stopping");
  const bool was = st.paused;
  st.paused = hold;
  self->send(st.queue, hold_atom::value, hold);
  json e{{"event", hold ? "pause" : "resume"}, {"paused", hold}, {"changed", was != hold}};
  if (was != hold) log_event(self, e);
  return answer(e);
}

reply do_checkpoint(ctrl_ptr self) {
  auto& st = self->state;
  if (st.args.checkpoint_dir.empty()) return refuse("this run writes no checkpoints");
  if (st.shutting_down()) return refuse("the run is stopping");
  auto rp = self->make_response_promise<console_reply>();
  st.checkpoint_waiters.push_back(rp);
  self->send(st.trainer, checkpoint_atom::value);
  return rp;
}

// Runs a console task (eval, generate) on the trainer's current weights.
template <class Spawn>
reply with_current_weights(ctrl_ptr self, Spawn spawn_task) {
  auto rp = self->make_response_promise<console_reply>();
  auto& st = self->state;
  self->request(st.trainer, kRoleTimeout, final_atom::value)
      .then(
          [self, rp, spawn_task](weight_snapshot& w) mutable {
            auto task = spawn_task(std::move(w));
            self->request(task, kTaskTimeout, run_atom::value)
                .then(
                    [self, rp](std::string& out) mutable {
                      auto j = json::parse(out);
                      j["step"] = self->state.watch.last_step();
                      rp.deliver(answer(j));
                    },
                    [rp](const caf::error& e) mutable { rp.deliver(refuse(to_string(e))); });
          },
          [rp](const caf::error& e) mutable {
            rp.deliver(refuse("the trainer did not hand over its weights: " + to_string(e)));
          });
  return rp;
}

reply do_add(ctrl_ptr self) {
  auto& st = self->state;
  if (st.shutting_down()) return refuse("the run is stopping");
  const auto w = st.roster.nodes().take_ids(1);
  auto rp = self->make_response_promise<console_reply>();
  self->request(st.sync, kRoleTimeout, join_atom::value, caf::actor{}, w, int32_t{1})
      .then(
          [self, rp, w](std::vector<caf::actor>& rs) mutable {
            auto& st = self->state;
            if (st.shutting_down() || rs.size() != 1) {
              for (auto& a : rs)
                self->send_exit(a, caf::exit_reason::user_shutdown);
              rp.deliver(refuse("the run is stopping"));
              return;
            }
            auto r = caf::actor_cast<rollouter_actor>(rs[0]);
            watch_rollouter(self, w, r);
            start_rollouter(self, r);
            tell_queue_members(self);
            json e{{"event", "add-rollouter"}, {"id", w}, {"rollouters", st.roster.size()}};
            log_event(self, e);
            rp.deliver(answer(e));
          },
          [rp](const caf::error& e) mutable {
            rp.deliver(refuse("the synchronizer could not add it: " + to_string(e)));
          });
  return rp;
}

int32_t worker_arg(const std::string& s) {
  return static_cast<int32_t>(std::stoll(s));  // check_command validated it
}

reply do_remove(ctrl_ptr self, int32_t w) {
  auto& st = self->state;
  if (!st.roster.has(w))
    return refuse("no rollouter " + std::to_string(w) + " (workers lists them)");
  if (st.roster.size() == 1)
    return refuse("rollouter " + std::to_string(w) +
                  " is the run's last one; add-rollouter first, or stop the run");
  const auto where = where_of(self, w);
  retire_rollouter(self, w, "removed from the console");
  json e{
      {"event", "remove-rollouter"}, {"id", w}, {"where", where}, {"rollouters", st.roster.size()}};
  log_event(self, e);
  return answer(e);
}

reply do_kill(ctrl_ptr self, const std::vector<std::string>& args) {
  auto& st = self->state;
  if (args[0] == "reward-worker") {
    auto rp = self->make_response_promise<console_reply>();
    self->request(st.reward, kRoleTimeout, kill_atom::value)
        .then(
            [self, rp](int32_t slot) mutable {
              json e{{"event", "kill"}, {"actor", "reward-worker"}, {"slot", slot}};
              log_event(self, e);
              rp.deliver(answer(e));
            },
            [rp](const caf::error& e) mutable { rp.deliver(refuse(to_string(e))); });
    return rp;
  }
  const auto w = worker_arg(args[1]);
  auto it = st.roster.live().find(w);
  if (it == st.roster.live().end())
    return refuse("no rollouter " + std::to_string(w) + " (workers lists them)");
  const bool remote = st.roster.nodes().is_remote(w);
  // As faults.kill_rollouter_every_steps does: anonymous, with an error, so that it is a crash.
  caf::anon_send(caf::actor_cast<caf::actor>(it->second),
                 caf::exit_msg{caf::actor_addr{},
                               caf::make_error(errc::injected_fault, "killed from the console")});
  json e{{"event", "kill"},
         {"actor", "rollouter"},
         {"id", w},
         {"then", remote ? "remote: not restarted; its prompts are generated again elsewhere"
                         : "the supervisor restarts it"}};
  log_event(self, e);
  return answer(e);
}

reply do_stop(ctrl_ptr self) {
  auto& st = self->state;
  if (st.shutting_down()) return answer(json{{"stopping", true}, {"checkpoint", false}});
  st.console_stop = true;
  const bool checkpoint = !st.args.checkpoint_dir.empty() && st.interrupts == 0;
  log_event(self, json{{"event", "stop"}, {"checkpoint", checkpoint}});
  if (checkpoint) {
    ++st.interrupts;  // as a first SIGINT: the checkpoint's writer stops the run
    // Paused, the step or sync window in progress may wait for groups the held admission does
    // not let start, and inside a sync window (sync, periodic) the cut waits for its end: the
    // stop waited for a resume. The run ends anyway, so admission opens again.
    if (st.paused) {
      st.paused = false;
      self->send(st.queue, hold_atom::value, false);
    }
    // And the trainer's side as a SIGINT's too: its cut ends its training. A plain checkpoint
    // request left it training while the cut was written and the roles stopped, so its next
    // step was counted in metrics.jsonl and summary.json but held by no checkpoint.
    self->send(st.trainer, checkpoint_atom::value, interrupt_atom::value);
  } else {
    shutdown(self, "stopped from the console at step " + std::to_string(st.watch.last_step()),
             run_status::stopped);
  }
  return answer(json{{"stopping", true}, {"checkpoint", checkpoint}});
}

}  // namespace

caf::result<console_reply> on_console(ctrl_ptr self, console_request& req) {
  auto& st = self->state;
  if (auto why = check_client(self); !why.empty()) return refuse(why);
  if (auto why = check_secret(self, req.secret, "console"); !why.empty()) return refuse(why);
  const command_info* info = nullptr;
  for (auto& c : console_commands())
    if (static_cast<int32_t>(c.cmd) == req.command) info = &c;
  if (!info || info->site != command_site::run)
    return refuse("not a command the run carries out (" + std::to_string(req.command) + ")");
  if (req.read_only && info->changes_run)
    return refuse(std::string("read-only console: '") + info->name + "' changes the run");
  try {
    check_command(info->cmd, req.args);
  } catch (const std::exception& e) {
    return refuse(e.what());
  }
  const auto& a = req.args;
  try {
    switch (info->cmd) {
      case console_cmd::status:
        return do_status(self);
      case console_cmd::metrics:
        return do_metrics(self, a.empty() ? 10 : std::stoll(a[0]));
      case console_cmd::workers:
        return do_workers(self);
      case console_cmd::get:
        return do_get(self, a[0]);
      case console_cmd::set:
        return do_set(self, a[0], a[1]);
      case console_cmd::pause:
        return do_hold(self, true);
      case console_cmd::resume:
        return do_hold(self, false);
      case console_cmd::checkpoint:
        return do_checkpoint(self);
      case console_cmd::eval: {
        const int64_t n = a.empty() ? 0 : std::stoll(a[0]);
        return with_current_weights(self, [self, n](weight_snapshot w) {
          auto& st = self->state;
          return spawn_eval_task(self->system(), st.args.env, std::move(w), st.args.test, n);
        });
      }
      case console_cmd::generate: {
        const double t = live_cfg(self).params().rollouter.temperature;
        // A new stream per request, from the run's seed: reproducible, not all the same.
        const auto seed = st.args.env->params.controller.seed * 1000003u +
                          static_cast<uint64_t>(++st.generations);
        return with_current_weights(self, [self, text = a[0], t, seed](weight_snapshot w) {
          return spawn_generate_task(self->system(), self->state.args.env, std::move(w), text, t,
                                     seed);
        });
      }
      case console_cmd::add_rollouter:
        return do_add(self);
      case console_cmd::remove_rollouter:
        return do_remove(self, worker_arg(a[0]));
      case console_cmd::kill:
        return do_kill(self, a);
      case console_cmd::hang:
        self->send(st.reward, hang_atom::value);
        log_event(self, json{{"event", "hang"}, {"actor", "reward"}});
        return answer(json{{"event", "hang"},
                           {"actor", "reward"},
                           {"then",
                            "the next response's scoring never answers; "
                            "reward.timeout_ms scores it 0"}});
      case console_cmd::delay_sync: {
        const auto ms = std::stoll(a[0]);
        for (auto& [w, r] : st.roster.live())
          self->send(r, delay_atom::value, static_cast<int64_t>(ms));
        json e{{"event", "delay-sync"}, {"ms", ms}, {"rollouters", st.roster.size()}};
        log_event(self, e);
        return answer(e);
      }
      case console_cmd::stop:
        return do_stop(self);
      default:
        break;
    }
  } catch (const std::exception& e) {  // errors are values: nothing leaves the actor
    return refuse(e.what());
  }
  return refuse(std::string("'") + info->name + "' is not carried out by the run");
}

void console_checkpoint_done(ctrl_ptr self, const std::string& path, int64_t step,
                             const std::string& error) {
  auto& st = self->state;
  if (st.checkpoint_waiters.empty()) return;
  auto waiters = std::move(st.checkpoint_waiters);
  st.checkpoint_waiters.clear();
  if (!error.empty()) {
    for (auto& w : waiters)
      w.deliver(refuse("checkpoint failed: " + error));
    return;
  }
  json e{{"event", "checkpoint"}, {"path", path}, {"checkpoint_step", step}};
  log_event(self, e);
  for (auto& w : waiters)
    w.deliver(answer(e));
}

void start_rollouter(ctrl_ptr self, const rollouter_actor& r) {
  auto& st = self->state;
  if (st.live_cfg) {
    const auto t = st.live_cfg->params().rollouter.temperature;
    if (t != st.args.env->params.rollouter.temperature) self->send(r, set_atom::value, t);
  }
  self->send(r, start_atom::value);
}

}  // namespace asyncrl
