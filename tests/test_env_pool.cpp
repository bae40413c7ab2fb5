// A rollouter's environment pool (actors/env_pool.cpp) on a real actor system with external
// environment processes (tests/fixtures/env/faulty_env.py): an episode whose process crashed is
// replayed on a fresh process from its record, a call that keeps failing ends its episode as
// failed, and more failures than env.max_failure_rate allows end the pool. Every wait is bounded
// (60 s); no sleeps.

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <chrono>
#include <filesystem>
#include <optional>

#include "actors/env_pool.hpp"
#include "messages/errors.hpp"
#include "runtime/common/rng.hpp"
#include "tests/test_util.hpp"

using namespace asyncrl;

namespace {

const std::string kFaulty = std::string(ASYNCRL_SOURCE_DIR) + "/tests/fixtures/env/faulty_env.py";

env_pool_args external_pool(int64_t max_retries, double max_failure_rate = 1.0,
                            int64_t window = 32) {
  env_pool_args a;
  a.env.kind = env_kind::external;
  a.env.command = "/usr/bin/python3 " + kFaulty;
  a.env.num_workers = 1;
  a.env.timeout_ms = 20000;
  a.env.max_retries = max_retries;
  a.env.max_failure_rate = max_failure_rate;
  a.env.failure_window = window;
  a.seed = 7;
  return a;
}

env_call call(uint64_t episode, int32_t turn, std::string text, std::vector<std::string> earlier) {
  env_call c;
  c.episode = episode;
  c.turn = turn;
  c.text = std::move(text);
  c.task = "task";
  c.ground_truth = "1";
  c.earlier = std::move(earlier);
  return c;
}

// Sends `c` to `pool` and waits for the answer or the error.
struct reply {
  std::optional<env_answer> answer;
  caf::error error;
};
reply ask(caf::scoped_actor& self, const env_pool_actor& pool, env_call c) {
  reply r;
  self->request(pool, std::chrono::seconds(60), env_atom::value, std::move(c))
      .receive([&](env_answer& a) { r.answer = std::move(a); },
               [&](caf::error& e) { r.error = std::move(e); });
  return r;
}

caf::actor_system_config& config() {
  static caf::actor_system_config cfg = [] {
    caf::actor_system_config c;
    register_message_types(c);
    register_error_category(c);
    return c;
  }();
  return cfg;
}

}  // namespace

// Catches: a turn answered from a fresh process that never saw the episode (the observation
// would say held=[] and seed=None), a replay that skips or reorders the recorded turns, and a
// failed attempt that is not counted.
TEST(EnvPool, AnEpisodeWhoseProcessCrashedIsReplayedFromItsRecord) {
  test::temp_dir dir("envpool");
  const auto marker = (dir.path() / "crashed").string();
  {
    caf::actor_system sys{config()};
    caf::scoped_actor self{sys};
    auto pool = spawn_env_pool(sys, external_pool(/*max_retries=*/2));
    auto first = ask(self, pool, call(5, 1, "hello", {}));
    ASSERT_TRUE(first.answer) << to_string(first.error);
    EXPECT_EQ(first.answer->observations,
              std::vector<std::string>{"ep=5 turn=1 seed=" + std::to_string(mix64(7 ^ 5)) +
                                       " text=hello held=[5]"});
    // Turn 2 crashes the process once: the pool replays reset + turn 1 on a fresh one.
    auto second = ask(self, pool, call(5, 2, "FAULT:CRASHONCE:" + marker, {"hello"}));
    ASSERT_TRUE(second.answer) << to_string(second.error);
    EXPECT_FALSE(second.answer->failed) << second.answer->error;
    EXPECT_EQ(second.answer->failed_attempts, 1);
    EXPECT_TRUE(std::filesystem::exists(marker));
    ASSERT_EQ(second.answer->observations.size(), 1u);
    EXPECT_NE(
        second.answer->observations[0].find("ep=5 turn=2 seed=" + std::to_string(mix64(7 ^ 5))),
        std::string::npos)
        << second.answer->observations[0];
    EXPECT_NE(second.answer->observations[0].find("held=[5]"), std::string::npos);
    self->send_exit(pool, caf::exit_reason::user_shutdown);
  }
}

// Catches: a failing environment retried without bound, or an episode failure not reported
// (the rollouter would wait forever or train on a half episode as if it were whole).
TEST(EnvPool, ACallThatKeepsFailingEndsItsEpisodeAsFailed) {
  caf::actor_system sys{config()};
  caf::scoped_actor self{sys};
  auto pool = spawn_env_pool(sys, external_pool(/*max_retries=*/1));
  auto r = ask(self, pool, call(9, 1, "FAULT:CRASH", {}));
  ASSERT_TRUE(r.answer) << to_string(r.error);
  EXPECT_TRUE(r.answer->failed);
  EXPECT_TRUE(r.answer->done);
  EXPECT_EQ(r.answer->failed_attempts, 1);
  EXPECT_NE(r.answer->error.find("crashed"), std::string::npos) << r.answer->error;
  self->send_exit(pool, caf::exit_reason::user_shutdown);
}

// Catches: env.max_failure_rate never enforced (a broken environment would train the run on
// zero rewards), or enforced before its window has filled.
TEST(EnvPool, MoreFailuresThanTheRateAllowsEndTheRunLoudly) {
  caf::actor_system sys{config()};
  caf::scoped_actor self{sys};
  auto pool = spawn_env_pool(sys, external_pool(/*max_retries=*/0, /*rate=*/0.5, /*window=*/4));
  // 1 failure of 2, then of 3: the window (4) is not full yet.
  ASSERT_TRUE(ask(self, pool, call(1, 1, "ok", {})).answer);
  ASSERT_TRUE(ask(self, pool, call(2, 1, "FAULT:CRASH", {})).answer);
  ASSERT_TRUE(ask(self, pool, call(3, 1, "ok", {})).answer);
  // 2 of 4: at the bound, allowed.
  auto at_bound = ask(self, pool, call(4, 1, "FAULT:CRASH", {}));
  ASSERT_TRUE(at_bound.answer) << to_string(at_bound.error);
  // 3 of the last 4: over it.
  auto over = ask(self, pool, call(5, 1, "FAULT:CRASH", {}));
  EXPECT_FALSE(over.answer);
  EXPECT_TRUE(is(over.error, errc::env_failed)) << to_string(over.error);
  EXPECT_NE(to_string(over.error).find("env.max_failure_rate"), std::string::npos);
}

namespace {

env_pool_args faulty_calculator(int64_t every, int64_t max_retries) {
  env_pool_args a;
  a.env.kind = env_kind::calculator;
  a.env.timeout_ms = 1;  // a hang's attempt is seen this much later
  a.env.max_retries = max_retries;
  a.env.max_failure_rate = 1.0;
  a.env.max_observation_tokens = 8;
  a.fault_every = every;
  return a;
}

}  // namespace

// faults.env_fault_every. Catches: a fault on the wrong call (every n-th, counted from 1), a
// kind out of its turn (hang, crash, garbage, flood), a failed attempt that is not counted (the
// rollouter's env_retries and the chaos round's recovery read it), a replay allowed past
// env.max_retries, and a flood that is not over the observation cap.
TEST(EnvPool, InjectedFaultsHitEveryNthCallInTurn) {
  caf::actor_system sys{config()};
  caf::scoped_actor self{sys};
  auto pool = spawn_env_pool(sys, faulty_calculator(2, 1));
  std::vector<env_answer> got;
  for (int32_t i = 1; i <= 10; ++i) {
    auto r = ask(self, pool, call(static_cast<uint64_t>(i), 1, "<<6*7>>", {}));
    ASSERT_TRUE(r.answer) << sys.render(r.error);
    got.push_back(*r.answer);
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const auto& a = got[i];
    SCOPED_TRACE("call " + std::to_string(i + 1));
    EXPECT_EQ(a.injected, i % 2 == 1);
    EXPECT_FALSE(a.failed);
    ASSERT_EQ(a.observations.size(), 1u);
    const int kind = static_cast<int>(i / 2) % 4;  // of the injected calls: 0 hang .. 3 flood
    if (!a.injected) {
      EXPECT_EQ(a.failed_attempts, 0);
      EXPECT_EQ(a.observations[0], "42\n");
    } else if (kind == 3) {
      EXPECT_EQ(a.failed_attempts, 0);  // a flood is an answer, cut by the rollouter
      EXPECT_GT(a.observations[0].size(), 4u * 8u);
      EXPECT_NE(a.observations[0].find("flood"), std::string::npos);
    } else {
      EXPECT_EQ(a.failed_attempts, 1);  // the injected attempt, then the real answer
      EXPECT_EQ(a.observations[0], "42\n");
      if (kind == 0) EXPECT_GE(a.latency_ms, 1.0);  // the hang's timeout passed first
    }
  }
  self->send_exit(pool, caf::exit_reason::user_shutdown);
}

// With no replay allowed the injected failure is the call's outcome: the episode ends as failed.
TEST(EnvPool, AnInjectedFaultWithoutReplaysFailsTheCall) {
  caf::actor_system sys{config()};
  caf::scoped_actor self{sys};
  auto pool = spawn_env_pool(sys, faulty_calculator(1, 0));
  auto r = ask(self, pool, call(1, 1, "<<6*7>>", {}));
  ASSERT_TRUE(r.answer) << sys.render(r.error);
  EXPECT_TRUE(r.answer->injected);
  EXPECT_TRUE(r.answer->failed);
  EXPECT_TRUE(r.answer->done);
  EXPECT_TRUE(r.answer->observations.empty());
  EXPECT_NE(r.answer->error.find("injected hang"), std::string::npos) << r.answer->error;
  self->send_exit(pool, caf::exit_reason::user_shutdown);
}
