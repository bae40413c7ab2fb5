#include "apps/asyncrl/chaos_command.hpp"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "apps/asyncrl/reports.hpp"
#include "apps/asyncrl/train_command.hpp"
#include "runtime/common/enum_names.hpp"
#include "runtime/common/progress.hpp"
#include "runtime/config/run_config.hpp"

namespace asyncrl {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

// The kinds of fault, one per round; their summary counters below (count_fault).
enum class fault {
  rollouter_kill,
  reward_worker_kill,
  reward_throw,
  reward_hang,
  sync_drop,
  sync_delay,
  slow_rollouter,
  trainer_crash,
  corrupt_checkpoint,
  trainer_rank_kill,
  env_fault
};
constexpr fault all_faults[] = {
    fault::rollouter_kill,    fault::reward_worker_kill, fault::reward_throw,
    fault::reward_hang,       fault::sync_drop,          fault::sync_delay,
    fault::slow_rollouter,    fault::trainer_crash,      fault::corrupt_checkpoint,
    fault::trainer_rank_kill, fault::env_fault};

inline constexpr enum_name<fault> fault_names[] = {
    {fault::rollouter_kill, "rollouter_kill"},
    {fault::reward_worker_kill, "reward_worker_kill"},
    {fault::reward_throw, "reward_throw"},
    {fault::reward_hang, "reward_hang"},
    {fault::sync_drop, "sync_drop"},
    {fault::sync_delay, "sync_delay"},
    {fault::slow_rollouter, "slow_rollouter"},
    {fault::trainer_crash, "trainer_crash"},
    {fault::corrupt_checkpoint, "corrupt_checkpoint"},
    {fault::trainer_rank_kill, "trainer_rank_kill"},
    {fault::env_fault, "env_fault"}};
constexpr const auto& enum_names(fault) {
  return fault_names;
}

// Writes every line of the round being run to the round's chaos.log. Added to the "asyncrl"
// logger next to its stderr sink, which is silenced during the rounds. It counts nothing: the
// injected faults come from the run's own counters (summary.json's "faults").
class round_log_sink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void start(const std::string& log_path) {
    std::lock_guard<std::mutex> lock(mutex_);
    file_.open(log_path, std::ios::trunc);
  }
  void stop() {
    std::lock_guard<std::mutex> lock(mutex_);
    file_.close();
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (file_.is_open()) {
      spdlog::memory_buf_t buf;
      formatter_->format(msg, buf);
      file_.write(buf.data(), static_cast<std::streamsize>(buf.size()));
    }
  }
  void flush_() override {
    if (file_.is_open()) file_.flush();
  }

 private:
  std::ofstream file_;
};

// Installs the chaos.log sink and silences stderr for the rounds; undoes both on exit.
class quiet_logging {
 public:
  quiet_logging() : sink_(std::make_shared<round_log_sink>()) {
    init_logging("warn");
    logger_ = spdlog::get("asyncrl");
    for (auto& s : logger_->sinks()) {
      levels_.push_back(s->level());
      s->set_level(spdlog::level::off);
    }
    logger_->sinks().push_back(sink_);
  }
  ~quiet_logging() {
    logger_->sinks().pop_back();
    for (size_t i = 0; i < levels_.size(); ++i)
      logger_->sinks()[i]->set_level(levels_[i]);
  }
  quiet_logging(const quiet_logging&) = delete;
  quiet_logging& operator=(const quiet_logging&) = delete;
  round_log_sink& sink() { return *sink_; }

 private:
  std::shared_ptr<round_log_sink> sink_;
  std::shared_ptr<spdlog::logger> logger_;
  std::vector<spdlog::level::level_enum> levels_;
};

struct round_spec {
  std::string name;
  std::vector<fault> faults;
  std::vector<std::string> overrides;
  // The restarts its faults can cause in the whole run, and the supervision.max_restarts the
  // round runs with: the config's, or that bound when the config's is lower (the run's own
  // budget would otherwise fail a round that lost nothing). Printed and in chaos.json.
  int64_t restarts_needed = 0;
  int64_t max_restarts = 0;
};

std::string kv(const std::string& key, int64_t v) {
  return key + "=" + std::to_string(v);
}

// Every `every`-th response, or often enough that a run of R responses gets about `share` of
// them: a small run (a short test of a big config) must still see each fault a few times. The
// round of all faults gives the three response faults different shares, so that no response
// gets two (a killed worker's response would never reach its hang).
int64_t response_rate(int64_t every, int64_t R, int64_t share) {
  return std::max<int64_t>(2, std::min(every, R / share));
}

// faults.kill_reward_worker_every of the rounds (restarts_needed reads it too).
int64_t kill_every(int64_t R, bool all) {
  return all ? response_rate(41, R, 4) : response_rate(23, R, 8);
}

// The overrides that inject `f` repeatedly, scaled to the run: T steps, a checkpoint every E,
// R responses scored. The checkpoint faults need two checkpoints before the crash: c = the
// checkpoint at about T/2.
std::vector<std::string> overrides_for(fault f, int64_t T, int64_t E, int64_t R, bool all,
                                       const env_section& env) {
  const int64_t c = std::max<int64_t>(2 * E, (T / 2 / E) * E);
  switch (f) {
    case fault::rollouter_kill:
      return {kv("faults.kill_rollouter_every_steps", all ? 3 : 1)};
    case fault::reward_worker_kill:
      return {kv("faults.kill_reward_worker_every", kill_every(R, all))};
    case fault::reward_throw:
      return {
          kv("faults.reward_throw_every", all ? response_rate(37, R, 5) : response_rate(19, R, 8))};
    case fault::reward_hang:
      // A hung call is seen when its deadline fires: reward.timeout_ms, and for an external
      // scorer (timeout_s + 1 s) per call queued on the worker; both short, so that it fires
      // before a short run ends.
      return {
          kv("faults.reward_hang_every", all ? response_rate(53, R, 3) : response_rate(29, R, 6)),
          "reward.timeout_ms=50", "reward.external.timeout_s=1"};
    case fault::sync_drop:
      // A lost load waits for the sync's deadline; keep it short so the round stays short.
      return {kv("faults.sync_drop_every", 2), "async_training.sync_timeout_ms=400"};
    case fault::sync_delay:
      return {"faults.sync_delay_every=1", "faults.sync_delay_ms=30"};
    case fault::slow_rollouter:
      return {"faults.slow_rollouter_ms=5"};
    case fault::trainer_crash:
      // In the round of all faults the corrupt checkpoint's crash is the one.
      if (all) return {};
      return {"supervision.trainer_failure=restart", kv("faults.crash_trainer_at_step", c - E / 2)};
    case fault::corrupt_checkpoint:
      // The crash after the damaged checkpoint makes the restart fall back to the one before.
      return {"supervision.trainer_failure=restart", kv("faults.corrupt_checkpoint_at_step", c),
              kv("faults.crash_trainer_at_step", c + std::max<int64_t>(1, E / 2))};
    case fault::trainer_rank_kill:
      // Two data-parallel ranks; the second is killed (SIGKILL) and the run restarts from its
      // last checkpoint with new rank processes. Its own round only: in the round of all
      // faults the trainer already crashes once.
      if (all) return {};
      return {"trainer.data_parallel=2", "supervision.trainer_failure=restart",
              kv("faults.kill_trainer_rank_at_step", c - E / 2)};
    case fault::env_fault: {
      // Episodes need an environment: a config without one gets the calculator, which answers
      // a turn without a <<call>> as the episode's end (one call per response at least). A hang
      // is seen after env.timeout_ms: at most 200 ms here, so that hangs fit a short round (at
      // 1 s the round of a 24-step run took 26 s, at 200 ms 8 s, on 2 busy cores).
      std::vector<std::string> o{kv("faults.env_fault_every", all ? 7 : 3),
                                 kv("env.timeout_ms", std::min<int64_t>(env.timeout_ms, 200))};
      if (env.kind == env_kind::none) {
        o.push_back("env.kind=calculator");
        o.push_back("rollout.max_turns=2");
      }
      return o;
    }
  }
  return {};
}

// An upper bound on the restarts `f` causes in a run of T steps of B prompts x n responses, with
// the rates of overrides_for. Injected crashes are the only restarts a chaos round expects.
// Rollouter kills: one every `every` steps. Reward worker kills: one per `every` response uids;
// a run generates T B groups that are trained, plus those generated ahead (fully_async) and
// those dropped as too stale and replaced by new ones (regenerated groups keep their uids, and
// each uid's crash fires once). 4 T B bounds them: 2 T B did not, in gsm8k_tiny_hf under ASan
// (its slower steps dropped more stale groups: 18 kills against a bound of 17). Trainer
// crashes: one each.
int64_t restarts_needed(fault f, const run_config& cfg, bool all) {
  const int64_t T = cfg.trainer.total_steps, B = cfg.data.train_batch_size, n = cfg.rollout.n;
  switch (f) {
    case fault::rollouter_kill:
      return T / (all ? 3 : 1) + 1;
    case fault::reward_worker_kill:
      return 4 * T * B * n / kill_every(T * B * n, all) + 1;
    case fault::trainer_crash:
    case fault::trainer_rank_kill:
      return all ? 0 : 1;
    case fault::corrupt_checkpoint:
      return 1;
    default:
      return 0;
  }
}

// Sets the round's restart budget: at least what its faults can need (see round_spec).
void set_budget(round_spec& r, const run_config& cfg) {
  r.max_restarts = std::max(cfg.supervision.max_restarts, r.restarts_needed);
  if (r.max_restarts > cfg.supervision.max_restarts)
    r.overrides.push_back(kv("supervision.max_restarts", r.max_restarts));
}

std::vector<round_spec> series(const run_config& cfg) {
  const int64_t T = cfg.trainer.total_steps, E = cfg.checkpoint.every_steps;
  const int64_t R = T * cfg.data.train_batch_size * cfg.rollout.n;
  if (E < 2 || T < 3 * E + 2)
    throw config_error(
        "chaos: the checkpoint rounds need checkpoint.every_steps >= 2 and trainer.total_steps >= "
        "3 * every_steps + 2 (have " +
        std::to_string(E) + " and " + std::to_string(T) + ")");
  std::vector<round_spec> out;
  for (auto f : all_faults) {
    round_spec r{to_string(f), {f}, overrides_for(f, T, E, R, false, cfg.env)};
    r.restarts_needed = restarts_needed(f, cfg, false);
    set_budget(r, cfg);
    out.push_back(std::move(r));
  }
  round_spec all{"all", {}, {}};
  for (auto f : all_faults) {
    if (f == fault::trainer_rank_kill) continue;  // its own round only (overrides_for)
    all.faults.push_back(f);
    for (auto& o : overrides_for(f, T, E, R, true, cfg.env))
      all.overrides.push_back(o);
    all.restarts_needed += restarts_needed(f, cfg, true);
  }
  set_budget(all, cfg);
  out.push_back(std::move(all));
  return out;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": missing");
  return json::parse(in);
}

int64_t num(const json& j, const char* a, const char* b = nullptr) {
  const json& v = b ? j.at(a).at(b) : j.at(a);
  return v.get<int64_t>();
}

// One fault kind's counts in a round. Unit "faults" counts discrete events; "steps" (slow
// rollouter) counts the steps run under a continuous slowdown and is not added to the totals.
struct fault_count {
  fault kind;
  int64_t injected = 0;
  int64_t recovered = 0;
  const char* unit = "faults";
};

// summary.json's "faults" key that counts the injections of each kind. The slow rollouter has
// none: it is a slowdown, not a count of events.
inline constexpr enum_name<fault> injected_keys[] = {
    {fault::rollouter_kill, "rollouter_kills"},
    {fault::reward_worker_kill, "reward_worker_kills"},
    {fault::reward_throw, "reward_throws"},
    {fault::reward_hang, "reward_hangs"},
    {fault::sync_drop, "sync_drops"},
    {fault::sync_delay, "sync_delays"},
    {fault::trainer_crash, "trainer_crashes"},
    {fault::corrupt_checkpoint, "checkpoints_damaged"},
    {fault::trainer_rank_kill, "trainer_rank_kills"},
    {fault::env_fault, "env_faults"}};

const char* injected_key(fault f) {
  for (const auto& k : injected_keys)
    if (k.value == f) return k.name;
  return nullptr;
}

fault_count count_fault(fault f, const json& s, bool completed) {
  fault_count c{f};
  if (auto key = injected_key(f)) c.injected = num(s, "faults", key);
  switch (f) {
    case fault::rollouter_kill:
      c.recovered = num(s, "rollouter_restarts");
      break;
    case fault::reward_worker_kill:
      c.recovered = num(s, "reward", "worker_restarts");
      break;
    case fault::reward_throw:
      c.recovered = num(s, "reward", "failures");
      break;
    case fault::reward_hang:
      c.recovered = num(s, "reward", "timeouts");
      break;
    case fault::sync_drop:
      c.recovered = num(s, "sync_retries");
      break;
    // A delayed load is recovered when its sync completed; every sync did if the run did.
    case fault::sync_delay:
      c.recovered = completed ? c.injected : 0;
      break;
    case fault::slow_rollouter:
      c.injected = num(s, "steps");
      c.recovered = completed ? c.injected : 0;
      c.unit = "steps";
      break;
    case fault::trainer_crash:
      c.recovered = num(s, "trainer_restarts");
      break;
    // Recovered: the restart passed over the damaged checkpoint to the one before.
    case fault::corrupt_checkpoint:
      c.recovered = num(s, "faults", "checkpoints_skipped");
      break;
    // Recovered: the run restarted from its checkpoint with new ranks.
    case fault::trainer_rank_kill:
      c.recovered = num(s, "trainer_restarts");
      break;
    // Recovered: the call's replay answered, or the flood was cut; not when its replays ran out.
    case fault::env_fault:
      c.recovered = num(s, "faults", "env_faults_recovered");
      break;
  }
  return c;
}

// The invariants of a finished round; each failure is a sentence for the report.
struct round_check {
  std::vector<std::string> failures;
  int64_t lost = 0, duplicated = 0;
  void expect(bool ok, const std::string& what) {
    if (!ok) failures.push_back(what);
  }
};

void check_accounting(const json& s, round_check& rc) {
  const auto gen = num(s, "groups_generated");
  const auto sum = num(s, "groups_trained") + num(s, "groups_dropped") + num(s, "groups_in_flight");
  rc.expect(gen == sum, "groups_generated " + std::to_string(gen) +
                            " != trained+dropped+in_flight " + std::to_string(sum));
  rc.expect(num(s, "reward", "received") == gen, "reward.received != groups_generated");
  rc.expect(num(s, "reward", "forwarded") == num(s, "queue", "received"),
            "reward.forwarded != queue.received");
  rc.expect(num(s, "queue", "delivered") == num(s, "trainer", "received"),
            "queue.delivered != trainer.received");
}

// Every schedule position below next_seq is trained, dropped or in flight, exactly once.
void check_ledger(const std::string& path, round_check& rc) {
  auto l = read_json(path);
  const auto next = l.at("next_seq").get<int64_t>();
  std::map<int64_t, int64_t> seen;
  for (const char* list : {"trained", "dropped", "in_flight"})
    for (auto& v : l.at(list))
      ++seen[v.get<int64_t>()];
  for (int64_t q = 0; q < next; ++q)
    if (seen.find(q) == seen.end()) ++rc.lost;
  for (auto& [q, n] : seen) {
    if (n > 1) rc.duplicated += n - 1;
    rc.expect(q >= 0 && q < next,
              "ledger position " + std::to_string(q) + " outside [0, next_seq)");
  }
  rc.expect(rc.lost == 0, std::to_string(rc.lost) + " ledger positions lost");
  rc.expect(rc.duplicated == 0, std::to_string(rc.duplicated) + " ledger positions duplicated");
}

// metrics.jsonl: steps 1..T once each, in order; policy_version never decreases and ends at the
// trainer's version; in sync/periodic no stale sample.
void check_metrics(const std::string& path, const run_config& cfg, const json& s, round_check& rc) {
  std::ifstream in(path);
  if (!in) {
    rc.expect(false, path + ": missing");
    return;
  }
  const bool on_policy = cfg.async_training.mode != async_mode::fully_async;
  std::string line;
  int64_t expect_step = 1, last_version = -1, stale_lines = 0;
  bool steps_ok = true, versions_ok = true;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = json::parse(line);
    if (j.at("step").get<int64_t>() != expect_step) steps_ok = false;
    ++expect_step;
    const auto v = j.at("policy_version").get<int64_t>();
    if (v < last_version) versions_ok = false;
    last_version = v;
    if (on_policy && j.at("stale_samples").get<int64_t>() != 0) ++stale_lines;
  }
  const auto T = cfg.trainer.total_steps;
  rc.expect(steps_ok && expect_step - 1 == T,
            "metrics.jsonl steps are not exactly 1.." + std::to_string(T) + " once each");
  rc.expect(versions_ok, "metrics.jsonl policy_version decreases");
  rc.expect(last_version == num(s, "trainer", "version"),
            "last policy_version " + std::to_string(last_version) + " != trainer.version " +
                std::to_string(num(s, "trainer", "version")));
  rc.expect(stale_lines == 0,
            std::to_string(stale_lines) + " steps with stale samples (on-policy)");
  const auto eta = cfg.async_training.max_staleness;
  if (!on_policy && eta >= 0)
    rc.expect(num(s, "queue", "max_delivered_staleness") <= eta,
              "queue.max_delivered_staleness over async_training.max_staleness");
}

struct round_result {
  std::string name, dir, status, error;
  uint64_t seed = 0;
  double wall_s = 0;
  std::vector<std::string> overrides;
  std::vector<fault_count> counts;
  round_check check;
  bool interrupted = false;
  int64_t max_restarts = 0;
  bool ok() const { return status == "completed" && check.failures.empty(); }
  // A run failed by its own restart budget (supervision.max_restarts), which is not a loss:
  // told apart from lost or duplicated groups in the report.
  bool budget_tripped() const {
    return status == "failed" && error.find("(supervision.max_restarts") != std::string::npos;
  }
  // Why the round is not ok, in a word or two.
  std::string verdict() const {
    if (ok()) return "yes";
    if (check.lost > 0 || check.duplicated > 0) return "NO (data)";
    if (budget_tripped()) return "NO (budget)";
    return "NO";
  }
  int64_t injected() const {
    int64_t n = 0;
    for (auto& c : counts)
      if (std::string(c.unit) == "faults") n += c.injected;
    return n;
  }
  int64_t recovered() const {
    int64_t n = 0;
    for (auto& c : counts)
      if (std::string(c.unit) == "faults") n += c.recovered;
    return n;
  }
};

round_result run_round(const chaos_args& a, const round_spec& spec, const std::string& dir,
                       uint64_t seed, round_log_sink& sink) {
  round_result r;
  r.name = spec.name;
  r.dir = dir;
  r.seed = seed;
  r.max_restarts = spec.max_restarts;
  r.overrides = a.overrides;
  r.overrides.insert(r.overrides.end(), spec.overrides.begin(), spec.overrides.end());
  r.overrides.push_back("runtime.seed=" + std::to_string(seed));
  r.overrides.push_back("runtime.run_dir=" + dir);
  r.overrides.push_back("checkpoint.dir=");
  fs::remove_all(dir);  // a checkpoint left by an earlier soak would be resumed from
  fs::create_directories(dir);
  auto lc = load_config(a.config_path, r.overrides);
  const auto level = lc->cfg.runtime.log_level;
  if (level != "trace" && level != "debug" && level != "info") {  // chaos.log shows each fault
    r.overrides.push_back("runtime.log_level=warn");
    lc = load_config(a.config_path, r.overrides);
  }
  const auto t0 = std::chrono::steady_clock::now();
  sink.start((fs::path(dir) / "chaos.log").string());
  train_report rep;
  try {
    train_options opt;
    opt.show_progress = false;
    rep = run_training(*lc, opt);
  } catch (const std::exception& e) {
    sink.stop();
    r.status = "failed";
    r.error = e.what();
    r.check.expect(false, std::string("run threw: ") + e.what());
    return r;
  }
  sink.stop();
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& s = rep.summary;
  r.status = s.at("status").get<std::string>();
  r.error = s.at("error").get<std::string>();
  r.interrupted = r.status == "interrupted";
  const bool completed = r.status == "completed";
  r.check.expect(completed, "status " + r.status + (r.error.empty() ? "" : ": " + r.error));
  for (auto f : spec.faults) {
    r.counts.push_back(count_fault(f, s, completed));
    r.check.expect(
        r.counts.back().injected > 0,
        std::string(to_string(f)) + ": no fault was injected (the round tested nothing)");
  }
  try {
    // A failed run stopped mid-way: its totals and metrics are partial; its ledger is not.
    if (completed) {
      check_accounting(s, r.check);
      check_metrics((fs::path(dir) / "metrics.jsonl").string(), lc->cfg, s, r.check);
    }
    check_ledger((fs::path(dir) / "ledger.json").string(), r.check);
  } catch (const std::exception& e) {
    r.check.expect(false, std::string("cannot check: ") + e.what());
  }
  return r;
}

// The resident memory of this process (VmRSS), in MiB; 0 when /proc cannot tell.
double rss_mb() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // kB
  return 0;
}

std::string fault_label(const round_result& r) {
  if (r.counts.size() == 1 && std::string(r.counts[0].unit) != "faults")
    return r.name + " (" + r.counts[0].unit + ")";
  return r.name;
}

// For the round of all faults: injected/recovered per kind.
std::string breakdown(const round_result& r) {
  if (r.counts.size() < 2) return "";
  std::string out;
  for (auto& c : r.counts) {
    if (!out.empty()) out += " ";
    out += std::string(to_string(c.kind)) + "=" + std::to_string(c.injected) + "/" +
           std::to_string(c.recovered);
  }
  return out;
}

json to_json(const round_result& r) {
  json counts = json::array();
  for (auto& c : r.counts)
    counts.push_back({{"fault", to_string(c.kind)},
                      {"unit", c.unit},
                      {"injected", c.injected},
                      {"recovered", c.recovered}});
  return {{"round", r.name},
          {"run_dir", r.dir},
          {"seed", r.seed},
          {"overrides", r.overrides},
          {"status", r.status},
          {"error", r.error},
          {"wall_time_s", r.wall_s},
          {"faults", counts},
          {"injected", r.injected()},
          {"recovered", r.recovered()},
          {"groups_lost", r.check.lost},
          {"groups_duplicated", r.check.duplicated},
          {"max_restarts", r.max_restarts},
          {"restart_budget_tripped", r.budget_tripped()},
          {"invariants_ok", r.ok()},
          {"failures", r.check.failures}};
}

void print_table(const std::vector<round_result>& rounds, const json& total) {
  std::printf("%-26s %9s %10s %12s %18s %15s\n", "fault", "injected", "recovered", "groups lost",
              "groups duplicated", "invariants ok");
  for (auto& r : rounds) {
    const bool steps = r.counts.size() == 1 && std::string(r.counts[0].unit) != "faults";
    const auto inj = steps ? r.counts[0].injected : r.injected();
    const auto rec = steps ? r.counts[0].recovered : r.recovered();
    std::printf("%-26s %9lld %10lld %12lld %18lld %15s\n", fault_label(r).c_str(),
                static_cast<long long>(inj), static_cast<long long>(rec),
                static_cast<long long>(r.check.lost), static_cast<long long>(r.check.duplicated),
                r.verdict().c_str());
    if (r.verdict() == "NO (budget)")
      std::printf(
          "    the run's restart budget failed it (supervision.max_restarts %lld), with "
          "nothing lost or duplicated: the run is slower than its restart window allows "
          "for this rate; raise supervision.max_restarts or restart_window_s\n",
          static_cast<long long>(r.max_restarts));
    if (auto b = breakdown(r); !b.empty()) std::printf("    %s\n", b.c_str());
    for (auto& f : r.check.failures)
      std::printf("    FAILED: %s (log: %s/chaos.log)\n", f.c_str(), r.dir.c_str());
  }
  std::printf("%-26s %9lld %10lld %12lld %18lld %15s\n", "total (faults)",
              static_cast<long long>(total.at("injected").get<int64_t>()),
              static_cast<long long>(total.at("recovered").get<int64_t>()),
              static_cast<long long>(total.at("groups_lost").get<int64_t>()),
              static_cast<long long>(total.at("groups_duplicated").get<int64_t>()),
              total.at("ok").get<bool>() ? "yes" : "NO");
  std::printf("(%lld rounds in %.1f s; slow-rollouter steps are not counted as faults)\n",
              static_cast<long long>(total.at("rounds").get<int64_t>()),
              total.at("wall_time_s").get<double>());
  std::printf("resident memory: %.0f MiB at the start, %.0f MiB at the end",
              total.at("rss_mb_start").get<double>(), total.at("rss_mb_end").get<double>());
  if (total.contains("rss_growth_mb"))
    std::printf("; %+.0f MiB since %s (bound %.0f): %s", total.at("rss_growth_mb").get<double>(),
                total.at("rss_mb_after_first_series").get<double>() > 0
                    ? "the end of the first series"
                    : "the start (one series only)",
                total.at("max_rss_growth_mb").get<double>(),
                total.at("rss_bounded").get<bool>() ? "bounded" : "GREW");
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

int run_chaos_command(const chaos_args& a) {
  if (a.rounds < 1) throw config_error("chaos: --rounds must be >= 1");
  const auto base = load_config(a.config_path, a.overrides);
  const auto specs = series(base->cfg);
  const auto root = base->cfg.runtime.run_dir;
  const std::string mode = to_string(base->cfg.async_training.mode);
  std::vector<round_result> rounds;
  const auto t0 = std::chrono::steady_clock::now();
  bool interrupted = false;
  // A soak (--minutes) repeats the series until the time is up; memory is compared from the end
  // of the first series (the allocator's and libtorch's pools are warm by then) to the end.
  const bool soak = a.minutes > 0;
  const int64_t repeats = soak ? std::numeric_limits<int64_t>::max() : a.rounds;
  const double rss_start = rss_mb();
  double rss_first_series = 0;
  auto elapsed_min = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 60.0;
  };
  {
    quiet_logging quiet;
    const auto n = soak ? int64_t{0} : static_cast<int64_t>(specs.size()) * a.rounds;
    for (auto& spec : specs)
      if (spec.max_restarts > base->cfg.supervision.max_restarts)
        std::fprintf(stderr,
                     "chaos: round %s can cause up to %lld restarts; it runs with "
                     "supervision.max_restarts %lld (the config has %lld)\n",
                     spec.name.c_str(), static_cast<long long>(spec.restarts_needed),
                     static_cast<long long>(spec.max_restarts),
                     static_cast<long long>(base->cfg.supervision.max_restarts));
    int64_t i = 0;
    for (int64_t rep = 0; rep < repeats && !interrupted; ++rep) {
      if (soak && rep > 0 && elapsed_min() >= a.minutes) break;
      if (rep == 1) rss_first_series = rss_mb();
      for (auto& spec : specs) {
        const auto name = repeats > 1 ? spec.name + "-r" + std::to_string(rep) : spec.name;
        const auto dir = (fs::path(root) / "chaos" / name).string();
        auto r = run_round(a, spec, dir, base->cfg.runtime.seed + static_cast<uint64_t>(rep),
                           quiet.sink());
        r.name = name;
        // A soak's number of rounds is open: its progress shows the minutes instead.
        ++i;
        const auto at = soak ? fmt::format("{} ({:.1f} of {:g} min)", i, elapsed_min(), a.minutes)
                             : fmt::format("{}/{}", i, n);
        std::fprintf(stderr, "chaos [%s] %s %-22s %s %5.1f s, %lld faults injected, rss %.0f MiB\n",
                     mode.c_str(), at.c_str(), name.c_str(), r.ok() ? "ok    " : "FAILED", r.wall_s,
                     static_cast<long long>(r.injected()), rss_mb());
        interrupted = r.interrupted;
        rounds.push_back(std::move(r));
        if (interrupted) break;
      }
    }
  }
  json total{{"rounds", rounds.size()},
             {"injected", 0},
             {"recovered", 0},
             {"groups_lost", 0},
             {"groups_duplicated", 0}};
  int64_t injected = 0, recovered = 0, lost = 0, duplicated = 0, slow_steps = 0;
  bool ok = !interrupted;
  json per_round = json::array();
  for (auto& r : rounds) {
    injected += r.injected();
    recovered += r.recovered();
    lost += r.check.lost;
    duplicated += r.check.duplicated;
    for (auto& c : r.counts)
      if (std::string(c.unit) == "steps") slow_steps += c.injected;
    ok = ok && r.ok();
    per_round.push_back(to_json(r));
  }
  ok = ok && lost == 0 && duplicated == 0;
  const double rss_end = rss_mb();
  if (soak) {
    // Only a soak that ran a second series can compare against the first one's end.
    const double base = rss_first_series > 0 ? rss_first_series : rss_start;
    const bool bounded = rss_end - base <= a.max_rss_growth_mb;
    total["rss_mb_after_first_series"] = rss_first_series;
    total["rss_growth_mb"] = rss_end - base;
    total["max_rss_growth_mb"] = a.max_rss_growth_mb;
    total["rss_bounded"] = bounded;
    ok = ok && bounded;
  }
  total["rss_mb_start"] = rss_start;
  total["rss_mb_end"] = rss_end;
  total["injected"] = injected;
  total["recovered"] = recovered;
  total["groups_lost"] = lost;
  total["groups_duplicated"] = duplicated;
  total["slow_rollouter_steps"] = slow_steps;
  total["wall_time_s"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  total["ok"] = ok;
  json out{{"config", a.config_path}, {"overrides", a.overrides}, {"mode", mode},
           {"repeats", a.rounds},     {"rounds", per_round},      {"total", total}};
  fs::create_directories(root);
  write_summary((fs::path(root) / "chaos.json").string(), out);
  print_table(rounds, total);
  if (interrupted) return 130;
  return ok ? 0 : 1;
}

}  // namespace asyncrl
