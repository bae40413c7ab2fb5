#include "apps/asyncrl/repl_command.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>
#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "apps/asyncrl/cluster_setup.hpp"
#include "apps/asyncrl/line_editor.hpp"
#include "apps/asyncrl/repl_render.hpp"
#include "apps/asyncrl/run_secret.hpp"
#include "messages/errors.hpp"
#include "messages/interfaces.hpp"
#include "messages/type_ids.hpp"
#include "runtime/cluster/address.hpp"
#include "runtime/common/progress.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/console/commands.hpp"
#include "runtime/console/live_keys.hpp"

namespace asyncrl {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using clock = std::chrono::steady_clock;

// What an attaching console may set for itself; the run's own keys are the run's.
const char* const kLocalKeys[] = {"cluster.tls.certificate", "cluster.tls.key", "cluster.tls.ca",
                                  "cluster.request_timeout_ms", "runtime.log_level"};

struct endpoint {
  std::string host;
  uint16_t port = 0;
  bool tls = false;
  std::string dir;  // the run directory, when known (its run.secret)
};

endpoint read_cluster_json(const std::string& run_dir) {
  const auto path = (fs::path(run_dir) / "cluster.json").string();
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("repl: cannot read " + path +
                             " (is a run in progress there, with cluster.listen on?)");
  try {
    auto j = json::parse(in);
    return {j.at("host").get<std::string>(), j.at("port").get<uint16_t>(), j.value("tls", false),
            run_dir};
  } catch (const std::exception& e) {
    throw std::runtime_error("repl: " + path + ": " + e.what());
  }
}

std::string tail_of(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);)
    all.push_back(l);
  std::string s;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i)
    s += "  " + all[i] + "\n";
  return s;
}

// --config: `asyncrl train` in its own session (so that it outlives the console, which only
// detaches), its output in <run_dir>/train.log; returns once it listens.
endpoint start_run(const repl_options& opt) {
  auto lc = load_config(opt.config, opt.overrides);
  const auto& cfg = lc->cfg;
  if (cfg.cluster.listen == "off")
    throw config_error("repl --config: cluster.listen is off; the console attaches through it");
  const auto run_dir = cfg.runtime.run_dir;
  fs::create_directories(run_dir);
  fs::remove(fs::path(run_dir) / "cluster.json");  // a previous run's
  const auto log = (fs::path(run_dir) / "train.log").string();
  std::vector<std::string> args{"asyncrl", "train", "--config", opt.config};
  args.insert(args.end(), opt.overrides.begin(), opt.overrides.end());
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("repl: cannot start the run: fork failed");
  if (pid == 0) {
    setsid();
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int null = ::open("/dev/null", O_RDONLY);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    if (null >= 0) dup2(null, 0);
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  std::cerr << "repl: started the run (pid " << pid << "); its log: " << log << std::endl;
  // Bounded: the run either listens, exits, or the wait gives up.
  const auto deadline = clock::now() + std::chrono::minutes(10);
  while (clock::now() < deadline) {
    if (fs::exists(fs::path(run_dir) / "cluster.json")) {
      auto e = read_cluster_json(run_dir);
      if (e.port != 0) return e;
    }
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid)
      throw std::runtime_error("repl: the run exited before it listened; " + log + " ends:\n" +
                               tail_of(log, 15));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw std::runtime_error("repl: the run (pid " + std::to_string(pid) +
                           ") did not listen within 10 minutes; see " + log);
}

std::vector<std::string> local_overrides(const repl_options& opt) {
  std::vector<std::string> out;
  if (opt.config.empty())
    for (auto& o : opt.overrides) {
      const auto key = o.substr(0, o.find('='));
      if (std::find(std::begin(kLocalKeys), std::end(kLocalKeys), key) == std::end(kLocalKeys))
        throw config_error("repl --attach: key '" + key +
                           "' is the run's; the console may set only cluster.tls.*, "
                           "cluster.request_timeout_ms and runtime.log_level (use set KEY VALUE "
                           "for live keys)");
      out.push_back(o);
    }
  if (!opt.tls_dir.empty()) {
    out.push_back("cluster.tls.certificate=" + opt.tls_dir + "/node.pem");
    out.push_back("cluster.tls.key=" + opt.tls_dir + "/node.key");
    out.push_back("cluster.tls.ca=" + opt.tls_dir + "/ca.pem");
  }
  return out;
}

std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> w;
  std::string cur;
  for (char c : line) {
    if (c == ' ' || c == '\t') {
      if (!cur.empty()) w.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) w.push_back(cur);
  return w;
}

// Tab completion: command names first, then what each command takes.
completion_fn make_completer(std::vector<std::string> config_keys) {
  std::vector<std::string> commands, live;
  for (auto& c : console_commands())
    commands.push_back(c.name);
  for (auto& k : live_keys()) {
    live.push_back(k.key);
    if (*k.alias) live.push_back(k.alias);
  }
  auto all_keys = config_keys;
  for (auto& k : live_keys())
    if (*k.alias) all_keys.push_back(k.alias);
  return [commands, live, all_keys](const std::string& line, const std::string& word) {
    auto w = words_of(line);
    const size_t index = word.empty() ? w.size() : w.size() - 1;
    if (index == 0) return commands;
    if (index != 1) return std::vector<std::string>{};
    const auto& cmd = w[0];
    if (cmd == "help") return commands;
    if (cmd == "set") return live;
    if (cmd == "get") return all_keys;
    if (cmd == "kill") return std::vector<std::string>{"rollouter", "reward-worker"};
    if (cmd == "hang") return std::vector<std::string>{"reward"};
    return std::vector<std::string>{};
  };
}

struct outcome {
  bool ok = false;
  std::string error;
  json result = json::object();
  bool gone = false;  // the run (or the connection) is gone: nothing more can be asked
};

outcome failure(std::string why) {
  outcome o;
  o.error = std::move(why);
  return o;
}

class session {
 public:
  session(caf::actor_system& sys, caf::actor ctrl, const repl_options& opt,
          std::chrono::milliseconds timeout, std::string secret)
      : sys_(sys),
        self_(sys),
        ctrl_(caf::actor_cast<controller_actor>(ctrl)),
        opt_(opt),
        secret_(std::move(secret)),
        timeout_(timeout) {
    // The controller's end (the run finished or was stopped, or its process died) reaches us as
    // a down message: a command after it answers at once instead of waiting out its timeout.
    self_->monitor(ctrl_);
  }

  /// Whether the run's controller is gone, waiting up to `wait` for it to go.
  bool run_ended(std::chrono::milliseconds wait = std::chrono::milliseconds(0)) {
    if (!ended_) self_->receive([&](caf::down_msg&) { ended_ = true; }, caf::after(wait) >> [] {});
    return ended_;
  }

  outcome ask(const parsed_command& p) {
    outcome o;
    if (run_ended()) {
      o.error = "the run has ended: nothing more can be asked";
      o.gone = true;
      return o;
    }
    // Commands that wait on the trainer (a step boundary), a checkpoint or a model run get
    // longer than the quick ones; every one is bounded.
    const bool slow = p.cmd == console_cmd::set || p.cmd == console_cmd::checkpoint ||
                      p.cmd == console_cmd::eval || p.cmd == console_cmd::generate ||
                      p.cmd == console_cmd::add_rollouter;
    const auto timeout = slow ? std::chrono::milliseconds(std::chrono::minutes(35)) : timeout_;
    self_
        ->request(ctrl_, timeout, console_atom::value,
                  console_request{static_cast<int32_t>(p.cmd), p.args, opt_.read_only, secret_})
        .receive(
            [&](console_reply& r) {
              o.ok = r.ok;
              o.error = r.error;
              if (r.ok) o.result = json::parse(r.json);
            },
            [&](caf::error& e) {
              o.error = "no answer from the run: " + sys_.render(e);
              o.gone = e.category() == caf::atom("system") &&
                       (e.code() == static_cast<uint8_t>(caf::sec::request_receiver_down) ||
                        e.code() == static_cast<uint8_t>(caf::sec::request_timeout));
            });
    return o;
  }

  /// Prints the outcome of `line`; returns whether it succeeded.
  bool report(const std::string& line, console_cmd cmd, const outcome& o) {
    if (opt_.json) {
      json j{{"command", line}, {"ok", o.ok}};
      if (o.ok)
        j["result"] = o.result;
      else
        j["error"] = o.error;
      std::cout << j.dump() << std::endl;
    } else if (o.ok) {
      std::cout << render_reply(cmd, o.result) << std::flush;
    } else {
      std::cerr << "error: " << o.error << std::endl;
    }
    return o.ok;
  }

  bool watch(const std::string& line, const parsed_command& p) {
    const bool tty = isatty(0);
    if (p.args.empty() && !tty)
      return report(line, p.cmd, failure("watch: give SECONDS when stdin is not a terminal"));
    const auto until = p.args.empty() ? clock::time_point::max()
                                      : clock::now() + std::chrono::seconds(std::stoll(p.args[0]));
    if (tty && !opt_.json) std::cout << "(press a key to stop)" << std::endl;
    bool ok = true;
    for (;;) {
      auto o = ask(parsed_command{console_cmd::status, {}});
      if (!o.ok) {
        if (!opt_.json) std::cout << std::endl;
        return report(line, p.cmd, o);
      }
      if (opt_.json)
        std::cout << json{{"command", line}, {"ok", true}, {"result", o.result}}.dump()
                  << std::endl;
      else
        std::cout << "\r" << status_line(o.result) << "\x1b[K" << std::flush;
      if (clock::now() >= until) break;
      if (tty) {
        if (key_pressed(1000)) break;
      } else {
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
    }
    if (!opt_.json) std::cout << std::endl;
    return ok;
  }

 private:
  caf::actor_system& sys_;
  caf::scoped_actor self_;
  controller_actor ctrl_;
  const repl_options& opt_;
  std::string secret_;  // the run's, for a run without TLS (apps/asyncrl/run_secret.hpp)
  std::chrono::milliseconds timeout_;
  bool ended_ = false;  // the controller's down message arrived
};

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

}  // namespace

int run_repl_command(const repl_options& opt) {
  if (opt.attach.empty() == opt.config.empty())
    throw config_error("repl: give either --attach RUN_DIR|HOST:PORT or --config FILE");
  auto local = load_config("", local_overrides(opt));
  init_logging(local->cfg.runtime.log_level == "info" ? "warn" : local->cfg.runtime.log_level);
  const auto& cluster = local->cfg.cluster;
  endpoint where;
  if (!opt.config.empty()) {
    where = start_run(opt);
  } else if (fs::is_directory(opt.attach)) {
    where = read_cluster_json(opt.attach);
  } else {
    try {
      auto hp = split_host_port(opt.attach);
      where = {hp.first, hp.second, cluster.tls.enabled(), {}};
    } catch (const std::invalid_argument& e) {
      throw config_error("repl --attach '" + opt.attach +
                         "': neither a run directory nor HOST:PORT (" + e.what() + ")");
    }
  }
  if (where.tls && !cluster.tls.enabled())
    throw config_error("repl: the run uses TLS; give --tls-dir DIR or cluster.tls.*");

  caf::actor_system_config sys_cfg;
  register_message_types(sys_cfg);
  register_error_category(sys_cfg);
  sys_cfg.set("scheduler.max-threads", size_t{1});
  configure_network(sys_cfg, cluster);
  caf::actor_system sys{sys_cfg};
  auto ctrl = connect_controller(sys, where.host, where.port, cluster);
  session s(sys, ctrl, opt, std::chrono::milliseconds(cluster.request_timeout_ms),
            read_run_secret(opt.secret_file, where.dir.empty() ? "" : where.dir + "/run.secret"));

  const bool scripted = !opt.exec.empty();
  const bool interactive = !scripted && isatty(0);
  auto script = split_script(opt.exec);
  size_t next = 0;
  std::unique_ptr<line_editor> editor;
  if (interactive) {
    editor = std::make_unique<line_editor>("asyncrl> ", default_history_path(),
                                           make_completer(load_config("", {})->schema.keys()));
    std::cout << "attached to the run at " << where.host << ":" << where.port
              << (where.tls ? " (TLS)" : "") << (opt.read_only ? ", read-only" : "")
              << "; help lists the commands, quit detaches" << std::endl;
  }
  auto next_line = [&]() -> std::optional<std::string> {
    if (scripted) {
      if (next < script.size()) return script[next++];
      return std::nullopt;
    }
    if (editor) return editor->read();
    std::string l;
    if (std::getline(std::cin, l)) return l;
    return std::nullopt;
  };
  bool all_ok = true;
  while (auto raw = next_line()) {
    const auto line = trim(*raw);
    if (line.empty() || line[0] == '#') continue;
    parsed_command p;
    try {
      p = parse_command(line);
    } catch (const std::exception& e) {
      all_ok &= s.report(line, console_cmd::help, failure(e.what()));
      continue;
    }
    const auto& info = command_of(p.cmd);
    if (opt.read_only && info.changes_run) {
      all_ok &=
          s.report(line, p.cmd,
                   failure(std::string("read-only console: '") + info.name + "' changes the run"));
      continue;
    }
    if (p.cmd == console_cmd::quit) break;
    if (p.cmd == console_cmd::help) {
      const auto text = help_text(p.args.empty() ? "" : p.args[0]);
      if (opt.json)
        std::cout << json{{"command", line}, {"ok", true}, {"result", {{"text", text}}}}.dump()
                  << std::endl;
      else
        std::cout << text << std::flush;
      continue;
    }
    if (p.cmd == console_cmd::watch) {
      all_ok &= s.watch(line, p);
      continue;
    }
    auto o = s.ask(p);
    all_ok &= s.report(line, p.cmd, o);
    if (o.gone) {
      std::cerr << "repl: the run is gone (it ended, or the connection was lost)" << std::endl;
      break;
    }
    if (p.cmd == console_cmd::stop && o.ok) {
      // A stopped run takes no more orders (the answer comes once its checkpoint is written;
      // it then finishes its step and exits): say so and detach, rather than leave a prompt
      // whose next command would only find the run gone.
      std::cerr << "repl: the run is stopping (resumable with `asyncrl train --resume`); "
                   "the console detaches"
                << std::endl;
      size_t left = 0;  // --exec only: stdin could block until its writer closes it
      for (; scripted && next < script.size(); ++next)
        left += !trim(script[next]).empty() && trim(script[next])[0] != '#';
      if (left > 0)
        std::cerr << "repl: " << left << " command(s) after `stop` not run" << std::endl;
      break;
    }
  }
  if (!opt.config.empty() && !interactive)
    std::cerr << "repl: detached; the run goes on unless it was stopped" << std::endl;
  return interactive || all_ok ? 0 : 1;
}

}  // namespace asyncrl
