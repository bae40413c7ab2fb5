#include "apps/asyncrl/dp_session.hpp"

#include <spdlog/spdlog.h>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "apps/asyncrl/run_secret.hpp"
#include "apps/asyncrl/trainer_rank_command.hpp"
#include "messages/errors.hpp"
#include "runtime/cluster/address.hpp"
#include "runtime/common/atomic_file.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/dist/dist_group.hpp"
#include "runtime/train/dp_leader.hpp"

namespace asyncrl {

namespace fs = std::filesystem;

namespace {

std::string self_exe() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("data parallel: cannot find this executable: " + ec.message());
  return p.string();
}

// fork + exec of `argv`; the child dies with this process's thread that forked it (the main
// thread, which outlives the run), so no rank outlives a killed `asyncrl train`.
pid_t spawn(const std::vector<std::string>& args, const std::string& env_entry) {
  std::vector<char*> argv;
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // This process's environment plus env_entry ("NAME=value"), built before the fork.
  std::vector<char*> envp;
  const auto name = env_entry.substr(0, env_entry.find('=') + 1);
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, name.c_str(), name.size()) != 0) envp.push_back(*e);
  envp.push_back(const_cast<char*>(env_entry.c_str()));
  envp.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("data parallel: fork failed");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);  // the parent died before prctl
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  return pid;
}

std::string describe_status(int st) {
  if (WIFSIGNALED(st)) return "was killed by signal " + std::to_string(WTERMSIG(st));
  if (WIFEXITED(st)) return "exited with status " + std::to_string(WEXITSTATUS(st));
  return "ended";
}

}  // namespace

std::unique_ptr<dp_session> dp_session::open(const run_config& cfg, const std::string& run_dir,
                                             const std::string& config_yaml) {
  const auto& tr = cfg.trainer;
  const int world = static_cast<int>(data_parallel_ranks(tr));
  if (world < 2) return nullptr;
  std::unique_ptr<dp_session> s(new dp_session());
  const auto config_path = (fs::path(run_dir) / "dp_config.yaml").string();
  write_file_atomically(config_path, config_yaml);
  const auto [host, port] = split_host_port(tr.dist_listen);
  const int local = world - static_cast<int>(tr.remote_ranks);
  const auto token = random_hex(16);
  dist_options o;
  o.host = host;
  o.port = port;
  o.world = world;
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(tr.dist_timeout_s * 1000));
  o.prefix = dist_prefix(token);
  s->rendezvous_ = dist_rendezvous::open(o);
  const int bound = s->rendezvous_->port();
  const auto where = host + ":" + std::to_string(bound);
  write_file_atomically((fs::path(run_dir) / "dp.json").string(),
                        "{\"host\": \"" + host + "\", \"port\": " + std::to_string(bound) +
                            ", \"world\": " + std::to_string(world) + "}\n");
  s->remote_ = static_cast<int32_t>(tr.remote_ranks);
  s->remote_setup_ = rank_setup{0, world, host, bound, token, config_yaml};
  try {
    const auto exe = self_exe();
    for (int r = 1; r < local; ++r) {
      s->pids_.push_back(spawn({exe, "trainer-rank", "--config", config_path, "--rank",
                                std::to_string(r), "--join", where},
                               std::string(kDistTokenEnv) + "=" + token));
      s->status_.push_back(0);
      s->reaped_.push_back(false);
    }
  } catch (...) {
    s->stop_ranks();
    throw;
  }
  spdlog::info("train: data parallel over {} ranks (rendezvous {}); started rank(s) 1..{} here{}",
               world, where, local - 1,
               local < world
                   ? "; ranks " + std::to_string(local) + ".." + std::to_string(world - 1) +
                         " join through the cluster listener: asyncrl trainer-rank "
                         "--connect HOST:PORT (printed below)"
                   : std::string());
  return s;
}

caf::expected<rank_setup> dp_session::admit(const std::string& host, int32_t pid) {
  std::lock_guard<std::mutex> lock(admit_mu_);
  if (admitted_ >= remote_)
    return caf::make_error(errc::bad_request,
                           remote_ == 0
                               ? std::string("this run takes no trainer rank from elsewhere "
                                             "(trainer.remote_ranks is 0)")
                               : "every remote trainer rank (" + std::to_string(remote_) +
                                     ") already has its place; a rank that was given one and "
                                     "died leaves the run waiting until trainer.dist_timeout_s");
  auto s = remote_setup_;
  s.rank = remote_setup_.world - remote_ + admitted_++;
  spdlog::info("train: trainer rank {} is {} (pid {})", s.rank, host, pid);
  return s;
}

void dp_session::join() {
  try {
    group_ = rendezvous_->form();
  } catch (...) {
    stop_ranks();
    throw;
  }
  rendezvous_.reset();
  leader_ = std::make_shared<dp_leader>(*group_, [this] { return diagnosis(); });
}

std::string dp_session::diagnosis() {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (;;) {
    bool any = false;
    for (size_t i = 0; i < pids_.size(); ++i) {
      if (!reaped_[i] && waitpid(pids_[i], &status_[i], WNOHANG) == pids_[i]) reaped_[i] = true;
      any = any || reaped_[i];
    }
    if (any || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (size_t i = 0; i < pids_.size(); ++i)
    if (reaped_[i])
      out += "; trainer rank " + std::to_string(i + 1) + " (pid " + std::to_string(pids_[i]) +
             ") " + describe_status(status_[i]);
  return out;
}

int64_t dp_session::ranks_killed() {
  int64_t n = 0;
  for (size_t i = 0; i < pids_.size(); ++i) {
    if (!reaped_[i] && waitpid(pids_[i], &status_[i], WNOHANG) == pids_[i]) reaped_[i] = true;
    if (reaped_[i] && WIFSIGNALED(status_[i]) && WTERMSIG(status_[i]) == SIGKILL) ++n;
  }
  return n;
}

void dp_session::stop_ranks() noexcept {
  if (leader_) leader_->stop();
  // A rank ends at the stop command; one that does not within 10 s is killed.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (size_t i = 0; i < pids_.size(); ++i) {
    while (!reaped_[i]) {
      if (waitpid(pids_[i], &status_[i], WNOHANG) == pids_[i]) {
        reaped_[i] = true;
        break;
      }
      if (!leader_ || std::chrono::steady_clock::now() >= deadline) {
        kill(pids_[i], SIGKILL);
        waitpid(pids_[i], &status_[i], 0);
        reaped_[i] = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

dp_session::~dp_session() {
  stop_ranks();
  leader_.reset();
  group_.reset();
}

}  // namespace asyncrl
