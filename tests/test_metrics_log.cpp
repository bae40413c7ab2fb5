// The controller's metrics.jsonl writer (actors/metrics_log): the per-step deltas, the console's
// recent lines, and the trim of a resumed run's file.

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "actors/metrics_log.hpp"
#include "tests/test_util.hpp"

namespace asyncrl {
namespace {

using json = nlohmann::json;

step_report report(int64_t step, int64_t dropped_stale) {
  step_report r;
  r.step = step;
  r.step_ms = 1000;
  r.queue.dropped_stale = dropped_stale;
  return r;
}

// Each line carries what happened since the previous one: tokens generated, groups dropped as
// stale, and the rollouters' idle share 1 - busy / (span x rollouters). A writer that reported
// totals, or forgot to advance its reference, fails here.
TEST(MetricsLog, EachLineHoldsTheDeltasSinceThePreviousOne) {
  metrics_log log;
  auto a = json::parse(log.write(report(1, 2), 10.0, 100, {{0, 4000.0}}, 1));
  EXPECT_EQ(a["tokens_generated"], 100);
  EXPECT_EQ(a["dropped_groups"], 2);
  EXPECT_DOUBLE_EQ(a["rollouter_idle_ratio"].get<double>(), 0.6);  // 4 s busy of 10
  auto b = json::parse(log.write(report(2, 5), 20.0, 250, {{0, 9000.0}}, 1));
  EXPECT_EQ(b["tokens_generated"], 150);
  EXPECT_EQ(b["dropped_groups"], 3);
  EXPECT_DOUBLE_EQ(b["rollouter_idle_ratio"].get<double>(), 0.5);  // 5 s busy of 10
  // Two rollouters over 10 s: 20 s of capacity, 3 + 1 s busy.
  auto c = json::parse(log.write(report(3, 5), 30.0, 250, {{0, 12000.0}, {1, 1000.0}}, 2));
  EXPECT_DOUBLE_EQ(c["rollouter_idle_ratio"].get<double>(), 0.8);
  EXPECT_EQ(c["dropped_groups"], 0);
}

// A rollouter that died and came back counts its busy time from 0 again: without the forget,
// its new 1 s would read as negative and count as nothing.
TEST(MetricsLog, ARestartedRollouterCountsFromZero) {
  metrics_log log;
  log.write(report(1, 0), 10.0, 0, {{0, 9000.0}}, 1);
  log.forget_worker(0);
  auto j = json::parse(log.write(report(2, 0), 20.0, 0, {{0, 1000.0}}, 1));
  EXPECT_DOUBLE_EQ(j["rollouter_idle_ratio"].get<double>(), 0.9);
}

// A resume continues the deltas from the checkpoint's totals, and the file keeps only the
// steps the checkpoint covers before the resumed run appends.
TEST(MetricsLog, AResumeContinuesFromTheCheckpointAndTrimsTheFile) {
  test::temp_dir dir;
  {
    metrics_log first;
    first.open(dir.path().string(), /*append=*/false);
    for (int64_t s = 1; s <= 5; ++s)
      first.write(report(s, 0), 10.0 * double(s), 100 * s, {}, 1);
  }
  const auto path = dir.file("metrics.jsonl");
  trim_metrics(path, 3);
  metrics_log resumed;
  resumed.continue_from(300, 30.0);
  resumed.open(dir.path().string(), /*append=*/true);
  auto j = json::parse(resumed.write(report(4, 0), 40.0, 420, {}, 1));
  EXPECT_EQ(j["tokens_generated"], 120);
  std::ifstream in(path);
  std::vector<int64_t> steps;
  for (std::string line; std::getline(in, line);)
    steps.push_back(json::parse(line)["step"].get<int64_t>());
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3, 4}));
}

TEST(MetricsLog, RecentGivesTheLastLinesOldestFirst) {
  metrics_log log;
  for (int64_t s = 1; s <= 4; ++s)
    log.write(report(s, 0), double(s), 0, {}, 1);
  auto r = log.recent(2);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(json::parse(r[0])["step"], 3);
  EXPECT_EQ(json::parse(r[1])["step"], 4);
  EXPECT_EQ(log.recent(10).size(), 4u);
  EXPECT_TRUE(log.recent(0).empty());
}

}  // namespace
}  // namespace asyncrl
