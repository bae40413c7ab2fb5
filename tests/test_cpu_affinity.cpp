// runtime.affinity's core split and thread pinning, and the CPU-time accounting behind
// metrics.jsonl's overhead_cpu_share.

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "actors/env.hpp"
#include "actors/metrics_log.hpp"
#include "runtime/common/cpu_affinity.hpp"
#include "runtime/common/cpu_time.hpp"
#include "runtime/common/omp_team.hpp"
#include "runtime/model/model_config.hpp"
#include "runtime/text/char_tokenizer.hpp"
#include "tests/actor_harness.hpp"

namespace asyncrl {
namespace {

std::vector<int> mask_of(pthread_t t) {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(pthread_getaffinity_np(t, sizeof(set), &set), 0);
  std::vector<int> out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

using cpus = std::vector<int>;

// The default 2-core split of fully_async (env.cpp: 1 trainer thread, 1 rollout thread):
// trainer first, then the rollouter, nothing left.
TEST(SplitCores, TwoCoresOneRollouter) {
  auto s = split_cores({0, 1}, 1, 1, 1);
  EXPECT_EQ(s.trainer, (cpus{0}));
  ASSERT_EQ(s.rollouters.size(), 1u);
  EXPECT_EQ(s.rollouters[0], (cpus{1}));
  EXPECT_TRUE(s.shared.empty());
}

// The allowed set, not CPU numbers 0..n-1: a taskset/cgroup with holes is split in its order.
TEST(SplitCores, FollowsTheAllowedSetWithHoles) {
  auto s = split_cores({2, 3, 5, 8, 9, 10, 12}, 2, 2, 2);
  EXPECT_EQ(s.trainer, (cpus{2, 3}));
  ASSERT_EQ(s.rollouters.size(), 2u);
  EXPECT_EQ(s.rollouters[0], (cpus{5, 8}));
  EXPECT_EQ(s.rollouters[1], (cpus{9, 10}));
  EXPECT_EQ(s.shared, (cpus{12}));
}

// asyncrl worker: no trainer, every CPU to the rollouters.
TEST(SplitCores, WorkerProcessHasNoTrainer) {
  auto s = split_cores({0, 1, 2, 3}, 0, 2, 2);
  EXPECT_TRUE(s.trainer.empty());
  ASSERT_EQ(s.rollouters.size(), 2u);
  EXPECT_EQ(s.rollouters[0], (cpus{0, 1}));
  EXPECT_EQ(s.rollouters[1], (cpus{2, 3}));
}

// A split that does not fit fails, naming the key, the need and what is allowed.
TEST(SplitCores, TooFewCpusNamesTheKey) {
  try {
    split_cores({0, 1}, 2, 1, 1);
    FAIL() << "expected a throw";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("runtime.affinity"), std::string::npos) << m;
    EXPECT_NE(m.find("need 3 CPUs"), std::string::npos) << m;
    EXPECT_NE(m.find("(0-1)"), std::string::npos) << m;
  }
  EXPECT_THROW(split_cores({}, 0, 1, 1), std::invalid_argument);
  EXPECT_NO_THROW(split_cores({}, 0, 1, 0));  // all rollouters remote, no trainer: nothing
}

TEST(SplitCores, CpuListString) {
  EXPECT_EQ(cpu_list_string({0, 1, 2, 3, 6}), "0-3,6");
  EXPECT_EQ(cpu_list_string({1}), "1");
  EXPECT_EQ(cpu_list_string({}), "none");
}

// Pinning sets the calling thread's mask (read back by the OS), leaves other threads alone, and
// threads it starts afterwards (torch's OpenMP workers) inherit it.
TEST(PinThread, SetsTheMaskAndChildrenInheritIt) {
  const auto allowed = allowed_cpus();
  ASSERT_FALSE(allowed.empty());
  const auto main_mask = mask_of(pthread_self());
  const cpus one{allowed.back()};
  cpus seen, child;
  std::thread t([&] {
    pin_this_thread(one);
    seen = mask_of(pthread_self());
    std::thread c([&] { child = mask_of(pthread_self()); });
    c.join();
  });
  t.join();
  EXPECT_EQ(seen, one);
  EXPECT_EQ(child, one);
  EXPECT_EQ(mask_of(pthread_self()), main_mask);
  EXPECT_THROW(pin_this_thread({-1}), std::runtime_error);
}

// make_env: runtime.affinity=roles splits the allowed CPUs by the roles' thread counts, pins
// nothing when colocated, and a split that does not fit fails naming the key.
TEST(EnvAffinity, SplitsByThreadCountsAndFailsClearly) {
  auto tok = char_tokenizer::builtin();
  auto env_of = [&](const std::vector<std::string>& o) {
    auto lc = test::tiny_run_config(o);
    return make_env(
        make_role_params(lc->cfg),
        model_config::from_init(lc->cfg.model.init, tok.vocab_size(), tok.bos_id(), tok.eos_id()),
        std::make_shared<char_tokenizer>(tok), /*detached=*/false);
  };
  const auto allowed = allowed_cpus();
  EXPECT_TRUE(env_of({})->cores.trainer.empty());  // default: none
  auto e = env_of({"runtime.affinity=roles", "async_training.mode=fully_async", "trainer.threads=1",
                   "rollout.threads=1", "rollout.num_workers=1"});
  if (allowed.size() >= 2) {
    EXPECT_EQ(e->cores.trainer, (cpus{allowed[0]}));
    ASSERT_EQ(e->cores.rollouters.size(), 1u);
    EXPECT_EQ(rollouter_cpus(*e, 0), (cpus{allowed[1]}));
    EXPECT_EQ(rollouter_cpus(*e, 3), (cpus{allowed[1]}));  // worker ids wrap onto the slots
  }
  auto colocated = env_of(
      {"runtime.affinity=roles", "async_training.mode=sync", "async_training.colocate=true"});
  EXPECT_TRUE(colocated->cores.trainer.empty());
  EXPECT_TRUE(colocated->cores.rollouters.empty());
  try {
    env_of({"runtime.affinity=roles", "async_training.mode=fully_async",
            "trainer.threads=" + std::to_string(allowed.size()), "rollout.threads=1"});
    FAIL() << "expected a throw";
  } catch (const std::runtime_error& err) {
    EXPECT_NE(std::string(err.what()).find("runtime.affinity"), std::string::npos) << err.what();
  }
}

// The accounting helper with hand-derived values: 2 s of process CPU, 1.5 s of it in compute
// regions -> 25 % runtime overhead; an empty window has no share.
TEST(CpuTime, WindowShares) {
  auto w = cpu_window_of(1'000'000'000, 500'000'000, 3'000'000'000, 2'000'000'000);
  EXPECT_DOUBLE_EQ(w.total_s, 2.0);
  EXPECT_DOUBLE_EQ(w.compute_s, 1.5);
  EXPECT_DOUBLE_EQ(w.overhead_share, 0.25);
  EXPECT_DOUBLE_EQ(cpu_window_of(5, 5, 5, 5).overhead_share, 0.0);
}

// A region books the calling thread's CPU time between its construction and destruction: no
// more than the thread spent around it, and not nothing when it computed.
TEST(CpuTime, RegionBooksItsThreadsTime) {
  volatile double x = 0;
  const int64_t outer0 = thread_cpu_ns(), booked0 = compute_cpu_ns();
  {
    compute_region r;
    for (int i = 0; i < 2'000'000; ++i)
      x = x + 1e-9 * i;
  }
  const int64_t booked = compute_cpu_ns() - booked0, outer = thread_cpu_ns() - outer0;
  EXPECT_GT(booked, 0);
  EXPECT_LE(booked, outer);
}

// A 2-thread role's compute team is two threads, the caller first: a team of one (an OpenMP
// region compiled without OpenMP) booked only half of a 2-thread trainer's CPU time, and showed
// up as a 25% "overhead" share in colocated sync.
TEST(CpuTime, ComputeTeamHasEveryOpenMpThread) {
  std::vector<clockid_t> clocks;
  clockid_t self_clock{};
  std::thread t([&] {
    pthread_getcpuclockid(pthread_self(), &self_clock);
    clocks = omp_team_clocks(2);
  });
  t.join();
  ASSERT_EQ(clocks.size(), 2u);
  EXPECT_EQ(clocks[0], self_clock);
  EXPECT_NE(clocks[0], clocks[1]);
  EXPECT_TRUE(omp_team_clocks(1).empty());
}

// metrics.jsonl carries the three fields under the names bench/e2e.py reads.
TEST(CpuTime, MetricsLineCarriesTheFields) {
  step_report r;
  auto j = nlohmann::json::parse(metrics_line(r, 1.0, 0, 0.0, 0, 1, cpu_window{2.0, 1.5, 0.25}));
  EXPECT_DOUBLE_EQ(j["cpu_total_s"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["cpu_compute_s"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(j["overhead_cpu_share"].get<double>(), 0.25);
}

// In a whole (coordinated, one-thread) run every step reports its window: the compute regions
// booked something, never more than the process spent, and the share is their complement.
TEST(CpuTime, RunReportsOverheadShareEveryStep) {
  auto lc = test::tiny_run_config({});
  auto out = test::run_coordinated(lc->cfg);
  ASSERT_TRUE(out.finished);
  ASSERT_FALSE(out.metrics.empty());
  double compute = 0;
  for (auto& line : out.metrics) {
    auto j = nlohmann::json::parse(line);
    ASSERT_TRUE(j.contains("cpu_total_s") && j.contains("cpu_compute_s") &&
                j.contains("overhead_cpu_share"))
        << line;
    const double t = j["cpu_total_s"], c = j["cpu_compute_s"], s = j["overhead_cpu_share"];
    EXPECT_GT(t, 0) << line;
    EXPECT_GE(c, 0) << line;
    EXPECT_LE(c, t + 1e-6) << line;  // one thread: a region cannot book more than the process
    EXPECT_NEAR(s, (t - c) / t, 1e-9) << line;
    compute += c;
    // Start-up and tail: every step of this run trains groups that arrived during it, so both
    // arrival times exist and 0 <= first <= last <= step time (a swapped pair, or a time taken
    // from the wrong origin, breaks the order).
    ASSERT_TRUE(j["first_group_s"].is_number() && j["last_group_s"].is_number()) << line;
    const double first = j["first_group_s"], last = j["last_group_s"];
    EXPECT_GE(first, 0) << line;
    EXPECT_LE(first, last) << line;
    EXPECT_LE(last, double(j["step_time_s"]) + 1e-9) << line;
    // Training cannot start before the first group is here.
    ASSERT_TRUE(j["first_train_s"].is_number()) << line;
    EXPECT_GE(double(j["first_train_s"]), first) << line;
    EXPECT_LE(double(j["first_train_s"]), double(j["step_time_s"]) + 1e-9) << line;
  }
  EXPECT_GT(compute, 0);
}

}  // namespace
}  // namespace asyncrl
