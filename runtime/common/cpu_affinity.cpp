#include "runtime/common/cpu_affinity.hpp"

#include <pthread.h>
#include <sched.h>

#include <cstring>
#include <stdexcept>

namespace asyncrl {

core_split split_cores(const std::vector<int>& allowed, int trainer_threads, int rollouter_threads,
                       int rollouters) {
  if (trainer_threads < 0 || rollouter_threads < 1 || rollouters < 0)
    throw std::invalid_argument("runtime.affinity: bad thread counts");
  const auto need = static_cast<size_t>(trainer_threads) +
                    static_cast<size_t>(rollouter_threads) * static_cast<size_t>(rollouters);
  if (need > allowed.size())
    throw std::invalid_argument(
        "runtime.affinity=roles: the trainer (" + std::to_string(trainer_threads) +
        " threads) and " + std::to_string(rollouters) + " rollouter(s) (" +
        std::to_string(rollouter_threads) + " threads each) need " + std::to_string(need) +
        " CPUs, but this process may use " + std::to_string(allowed.size()) + " (" +
        cpu_list_string(allowed) +
        "); lower trainer.threads / rollout.threads / rollout.num_workers, or set "
        "runtime.affinity=none");
  core_split s;
  size_t next = 0;
  auto take = [&](int n) {
    std::vector<int> out(allowed.begin() + static_cast<long>(next),
                         allowed.begin() + static_cast<long>(next + static_cast<size_t>(n)));
    next += static_cast<size_t>(n);
    return out;
  };
  s.trainer = take(trainer_threads);
  for (int i = 0; i < rollouters; ++i)
    s.rollouters.push_back(take(rollouter_threads));
  s.shared.assign(allowed.begin() + static_cast<long>(next), allowed.end());
  return s;
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

void pin_this_thread(const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE) throw std::runtime_error("pin_this_thread: bad CPU id");
    CPU_SET(c, &set);
  }
  if (int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set); rc != 0)
    throw std::runtime_error("cannot pin thread to CPUs " + cpu_list_string(cpus) + ": " +
                             std::strerror(rc));
}

std::string cpu_list_string(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1)
      ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

}  // namespace asyncrl
