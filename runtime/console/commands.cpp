#include "runtime/console/commands.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace asyncrl {

namespace {

using site = command_site;

const std::vector<command_info> kCommands = {
    {console_cmd::help, "help", "help [COMMAND]", "list the commands, or explain one", "", 0, 1,
     false, site::client},
    {console_cmd::status, "status", "status",
     "each actor's state, versions, queue, staleness, in-flight groups, accounting",
     "The rollouters' states (idle, generating, interrupted, syncing, resuming), the trainer's\n"
     "step and policy version, the published weight version, the queue's depth and admission\n"
     "window, the staleness of what was delivered, the groups in flight, and the accounting\n"
     "identity dispatched = trained + dropped + in flight, checked live.",
     0, 0, false, site::run},
    {console_cmd::metrics, "metrics", "metrics [N]", "the last N steps as a table (default 10)",
     "N is between 1 and 10000. --json gives every field of metrics.jsonl.", 0, 1, false,
     site::run},
    {console_cmd::watch, "watch", "watch [SECONDS]",
     "a live status line until a key is pressed (or for SECONDS)",
     "Refreshes once a second. Without a terminal (scripts), give SECONDS.", 0, 1, false,
     site::client},
    {console_cmd::workers, "workers", "workers",
     "the local and remote rollouters and the reward workers, with their load", "", 0, 0, false,
     site::run},
    {console_cmd::get, "get", "get KEY", "a config key's current value (live ones as changed)",
     "Any key of the run's config (see `asyncrl config --describe`).", 1, 1, false, site::run},
    {console_cmd::set, "set", "set KEY VALUE",
     "change a live-settable key; it takes effect from the step announced",
     "Live keys: async_training.staleness_threshold (staleness_threshold),\n"
     "async_training.max_staleness (max_staleness), async_training.trigger_parameter_sync_step\n"
     "(trigger_parameter_sync_step, fully_async), trainer.lr, rollout.temperature,\n"
     "checkpoint.every_steps, eval.every_steps, runtime.progress_timeout_s.\n"
     "The value is checked like the config file's, cross-checks included. The trainer applies\n"
     "the change at its next step boundary (the announced step); every change is logged to\n"
     "<run_dir>/events.jsonl. trainer.lr is the peak of trainer.lr_schedule: warmup and\n"
     "cosine keep scaling it. `train --resume` restores live changes from the checkpoint.",
     2, 2, true, site::run},
    {console_cmd::pause, "pause", "pause", "stop admitting new groups (training drains)",
     "Rollouters finish what they were given; the trainer trains what is queued, then waits.\n"
     "The progress watchdog is suspended while paused.",
     0, 0, true, site::run},
    {console_cmd::resume, "resume", "resume", "admit new groups again", "", 0, 0, true, site::run},
    {console_cmd::checkpoint, "checkpoint", "checkpoint",
     "write a checkpoint now (at the next step boundary that allows one)",
     "In sync and periodic modes a checkpoint is taken where a sync window closes.", 0, 0, true,
     site::run},
    {console_cmd::eval, "eval", "eval [N]",
     "greedy accuracy of the current policy on N test questions (default all)",
     "Runs beside the training on its own thread; the run does not stop.", 0, 1, false, site::run},
    {console_cmd::generate, "generate", "generate TEXT",
     "sample a response from the current policy",
     "Uses rollout.temperature (as set live) and rollout.max_new_tokens.", 1, 1, false, site::run},
    {console_cmd::add_rollouter, "add-rollouter", "add-rollouter",
     "start one more rollouter in the run's process",
     "It gets the current weights before its first group. Remote rollouters join with\n"
     "`asyncrl worker --connect HOST:PORT`.",
     0, 0, true, site::run},
    {console_cmd::remove_rollouter, "remove-rollouter", "remove-rollouter ID",
     "stop rollouter ID (local or remote); its unfinished groups are generated again", "", 1, 1,
     true, site::run},
    {console_cmd::kill, "kill", "kill rollouter ID | kill reward-worker",
     "inject a crash: the supervisor restarts the actor",
     "The same faults as faults.kill_rollouter_every_steps and faults.kill_reward_worker_every.\n"
     "The trainer, queue and synchronizer are not restartable in place: use stop.",
     1, 2, true, site::run},
    {console_cmd::hang, "hang", "hang reward",
     "the next response's scoring never answers (reward.timeout_ms scores it 0)",
     "The same fault as faults.reward_hang_every, once.", 1, 1, true, site::run},
    {console_cmd::delay_sync, "delay-sync", "delay-sync MS",
     "the next weight sync's load is delayed by MS milliseconds",
     "The same fault as faults.sync_delay_ms, once, on every rollouter of this process.", 1, 1,
     true, site::run},
    {console_cmd::stop, "stop", "stop", "checkpoint, then stop the run gracefully",
     "Like the first SIGINT to `asyncrl train`.", 0, 0, true, site::run},
    {console_cmd::quit, "quit", "quit", "detach; the run goes on", "", 0, 0, false, site::client},
};

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false, any = false;
  for (char c : s) {
    if (c == '"') {
      quoted = !quoted;
      any = true;
    } else if (!quoted && std::isspace(static_cast<unsigned char>(c))) {
      if (any) out.push_back(cur);
      cur.clear();
      any = false;
    } else {
      cur += c;
      any = true;
    }
  }
  if (quoted) throw std::invalid_argument("unbalanced \" in: " + s);
  if (any) out.push_back(cur);
  return out;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

int64_t parse_int(const std::string& cmd, const std::string& what, const std::string& v, int64_t lo,
                  int64_t hi) {
  size_t used = 0;
  int64_t x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || v.empty() || x < lo || x > hi)
    throw std::invalid_argument(cmd + ": " + what + " must be an integer in [" +
                                std::to_string(lo) + ", " + std::to_string(hi) + "], not '" + v +
                                "'");
  return x;
}

// Checks the arguments that the client can check alone; keys and values are the run's to check.
void check_args(const command_info& c, const std::vector<std::string>& a) {
  const std::string n = c.name;
  switch (c.cmd) {
    case console_cmd::metrics:
      if (!a.empty()) parse_int(n, "N", a[0], 1, 10000);
      break;
    case console_cmd::eval:
      if (!a.empty()) parse_int(n, "N", a[0], 1, 1000000);
      break;
    case console_cmd::watch:
      if (!a.empty()) parse_int(n, "SECONDS", a[0], 1, 86400);
      break;
    case console_cmd::remove_rollouter:
      parse_int(n, "ID", a[0], 0, INT32_MAX);
      break;
    case console_cmd::delay_sync:
      parse_int(n, "MS", a[0], 1, 600000);
      break;
    case console_cmd::help:
      if (!a.empty() && !find_command(a[0]))
        throw std::invalid_argument("help: no command '" + a[0] + "'");
      break;
    case console_cmd::kill:
      if (a[0] == "rollouter") {
        if (a.size() != 2) throw std::invalid_argument("kill rollouter: give the rollouter's ID");
        parse_int("kill rollouter", "ID", a[1], 0, INT32_MAX);
      } else if (a[0] == "reward-worker") {
        if (a.size() != 1) throw std::invalid_argument("kill reward-worker takes no ID");
      } else if (a[0] == "trainer" || a[0] == "queue" || a[0] == "message_queue" ||
                 a[0] == "synchronizer" || a[0] == "reward" || a[0] == "controller") {
        throw std::invalid_argument("kill: the " + a[0] +
                                    " is not restartable in place (killing it ends the run); "
                                    "use stop, or kill rollouter ID / kill reward-worker");
      } else {
        throw std::invalid_argument("kill: no actor '" + a[0] +
                                    "'; usage: kill rollouter ID | kill reward-worker");
      }
      break;
    case console_cmd::hang:
      if (a[0] != "reward")
        throw std::invalid_argument("hang: only 'hang reward' is supported, not '" + a[0] + "'");
      break;
    default:
      break;
  }
}

}  // namespace

const std::vector<command_info>& console_commands() {
  return kCommands;
}

const command_info* find_command(std::string_view name) {
  if (name == "exit") name = "quit";
  for (auto& c : kCommands)
    if (name == c.name) return &c;
  return nullptr;
}

const command_info& command_of(console_cmd cmd) {
  for (auto& c : kCommands)
    if (c.cmd == cmd) return c;
  throw std::invalid_argument("unknown console command " + std::to_string(int(cmd)));
}

parsed_command parse_command(const std::string& line) {
  const auto text = trim(line);
  const auto name = text.substr(0, text.find_first_of(" \t"));
  const auto* c = find_command(name);
  if (!c) throw std::invalid_argument("unknown command '" + name + "' (type help for the list)");
  parsed_command p{c->cmd, {}};
  if (c->cmd == console_cmd::generate) {
    auto rest = trim(text.substr(name.size()));
    if (rest.size() >= 2 && rest.front() == '"' && rest.back() == '"')
      rest = rest.substr(1, rest.size() - 2);
    if (!rest.empty()) p.args.push_back(rest);
  } else {
    p.args = split_words(text.substr(name.size()));
  }
  check_command(c->cmd, p.args);
  return p;
}

void check_command(console_cmd cmd, const std::vector<std::string>& args) {
  const auto& c = command_of(cmd);
  const auto n = static_cast<int>(args.size());
  if (n < c.min_args || n > c.max_args)
    throw std::invalid_argument(std::string(c.name) +
                                ": wrong number of arguments; usage: " + c.usage);
  check_args(c, args);
}

std::vector<std::string> split_script(const std::string& script) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (char c : script) {
    if (c == '"') quoted = !quoted;
    if ((c == ';' || c == '\n') && !quoted) {
      if (auto t = trim(cur); !t.empty()) out.push_back(t);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (auto t = trim(cur); !t.empty()) out.push_back(t);
  return out;
}

std::string help_text(const std::string& command) {
  if (!command.empty()) {
    const auto* c = find_command(command);
    if (!c) throw std::invalid_argument("help: no command '" + command + "'");
    std::string s = std::string("usage: ") + c->usage + "\n  " + c->summary + "\n";
    if (*c->details) {
      std::string d = c->details;
      size_t pos = 0;
      while (pos <= d.size()) {
        auto nl = d.find('\n', pos);
        s += "  " + d.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos) + "\n";
        if (nl == std::string::npos) break;
        pos = nl + 1;
      }
    }
    if (c->changes_run) s += "  (changes the run: refused under --read-only)\n";
    return s;
  }
  std::string s = "commands (help COMMAND for details):\n";
  for (auto& c : kCommands) {
    std::string u = c.usage;
    if (u.size() < 24) u.resize(24, ' ');
    s += "  " + u + "  " + c.summary + "\n";
  }
  return s;
}

}  // namespace asyncrl
