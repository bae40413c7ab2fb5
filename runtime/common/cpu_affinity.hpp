#pragma once

// Which cores each compute role of a process runs on (runtime.affinity). The split is a pure
// function of the CPUs the process may use (sched_getaffinity, not hardware_concurrency: a
// container or taskset may allow fewer) and the roles' thread counts, so it is unit-tested
// without touching any thread; pinning is one call on the role's own thread at its start.
// OpenMP threads that torch starts later from that thread inherit its mask.

#include <string>
#include <vector>

#include "runtime/common/enum_names.hpp"

namespace asyncrl {

/// runtime.affinity: whether the compute roles get disjoint cores.
enum class cpu_affinity {
  none,   // every thread may run on every allowed CPU (the kernel schedules)
  roles,  // the trainer and each local rollouter are pinned to their own CPUs
};
inline constexpr enum_name<cpu_affinity> cpu_affinity_names[] = {{cpu_affinity::none, "none"},
                                                                 {cpu_affinity::roles, "roles"}};
constexpr const auto& enum_names(cpu_affinity) {
  return cpu_affinity_names;
}

/// The CPUs of each compute role. Empty sets mean "not pinned" (run anywhere allowed).
struct core_split {
  std::vector<int> trainer;                  // empty: no trainer here, or not pinned
  std::vector<std::vector<int>> rollouters;  // one set per local rollouter slot
  std::vector<int> shared;  // the CPUs left over (the cooperative actors may use any CPU)
};

/// Splits `allowed` (ascending CPU ids) between the roles in order: the trainer's
/// `trainer_threads` CPUs first, then `rollouter_threads` CPUs for each of `rollouters`
/// rollouters; what is left is `shared`. `trainer_threads` = 0: no trainer in this process (an
/// `asyncrl worker`). Throws std::invalid_argument naming runtime.affinity and the counts when
/// the roles need more CPUs than `allowed` has.
core_split split_cores(const std::vector<int>& allowed, int trainer_threads, int rollouter_threads,
                       int rollouters);

/// The CPUs the calling thread may run on, ascending (sched_getaffinity). Called on the main
/// thread before any pinning, this is the process's allowed set.
std::vector<int> allowed_cpus();

/// Restricts the calling thread to `cpus` (pthread_setaffinity_np); empty leaves it. Throws
/// std::runtime_error with the OS error.
void pin_this_thread(const std::vector<int>& cpus);

/// "0-3,6" for {0,1,2,3,6}: for logs and error messages.
std::string cpu_list_string(const std::vector<int>& cpus);

}  // namespace asyncrl
