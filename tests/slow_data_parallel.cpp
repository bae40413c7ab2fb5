// `asyncrl train` with a data-parallel trainer (trainer.data_parallel, docs/scaling.md): rank 0
// in the train process, the other ranks as `asyncrl trainer-rank` processes it starts, Gloo on
// loopback. N ranks, sharded or not, must give the one-rank run's weights bit for bit
// (params_sha256), Theorem 1 (periodic == sync) must hold with 2 ranks, a rank killed with
// SIGKILL must fail the run naming it and leave no process behind, and `--resume` must then end
// bitwise where the uninterrupted run ends. Labelled "slow".

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/run_checks.hpp"
#include "tests/test_util.hpp"

namespace {

// The prefix bandit ("2" starts about 1 response in 64 of the random model), 16 prompts of 4
// responses a step, so that steps 1, 3 and 4 change the weights: with the math reward the random
// model scores 0, every advantage is 0, and equal weights would prove nothing (so it was until
// 2026-11-29). The tests assert updates (`steps_that_updated`).
const char* kTiny =
    " model.init.hidden_size=32 model.init.intermediate_size=64 model.init.num_hidden_layers=2"
    " data.train_size=200 data.test_size=16 data.train_batch_size=16 rollout.n=4"
    " rollout.max_new_tokens=16 trainer.total_steps=4 trainer.micro_batch_size=4"
    " trainer.ppo_mini_batch_size=16 reward.function=prefix reward.prefix=2"
    " runtime.log_level=warn runtime.eval_before=false runtime.eval_after=false"
    " trainer.dist_timeout_s=60";

struct run_out {
  int status = -1;
  std::string log;
  nlohmann::json summary;
};

run_out train(const std::string& mode, const std::string& extra, const std::string& dir) {
  const std::string cmd = std::string(ASYNCRL_CLI) + " train -c " + ASYNCRL_SOURCE_DIR +
                          "/configs/" + mode + ".yaml" + kTiny + extra + " runtime.run_dir=" + dir +
                          " 2>&1";
  run_out r;
  r.status = asyncrl::test::run_command(cmd, &r.log);
  if (r.status == 0)
    r.summary = nlohmann::json::parse(asyncrl::test::read_text(dir + "/summary.json"));
  return r;
}

std::string sha(const run_out& r) {
  return r.summary.value("params_sha256", std::string());
}

// The steps after `from_step` of the run in `dir` that changed the weights.
int64_t updates_in(const std::string& dir, int64_t from_step) {
  std::vector<std::string> lines;
  std::istringstream in(asyncrl::test::read_text(dir + "/metrics.jsonl"));
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) lines.push_back(l);
  return asyncrl::test::steps_that_updated(lines, from_step);
}

// Processes of `asyncrl trainer-rank` reading this run's config, still alive.
int ranks_alive(const std::string& dir) {
  std::string out;
  // [k]: the pattern does not match the shell that runs pgrep.
  asyncrl::test::run_command("pgrep -f 'trainer-ran[k] --config " + dir + "/' | wc -l", &out);
  return std::stoi(out);
}

}  // namespace

TEST(TrainDataParallel, RanksShardsAndModesGiveTheOneRankWeightsBitwise) {
  asyncrl::test::temp_dir dir("dp_train");
  const auto one = train("sync", "", dir.file("one"));
  ASSERT_EQ(one.status, 0) << one.log;
  ASSERT_EQ(sha(one).size(), 64u);
  ASSERT_GT(updates_in(dir.file("one"), 0), 0) << "the weights never moved: nothing to compare";
  struct variant {
    const char* mode;
    const char* extra;
  };
  for (auto v :
       {variant{"sync", " trainer.data_parallel=2"}, variant{"sync", " trainer.data_parallel=3"},
        variant{"sync", " trainer.data_parallel=2 trainer.shard_optimizer=true"},
        variant{"periodic", " trainer.data_parallel=2"}}) {
    SCOPED_TRACE(std::string(v.mode) + v.extra);
    const auto run_dir =
        dir.file(std::string(v.mode) + std::to_string(std::hash<std::string>{}(v.extra)));
    const auto r = train(v.mode, v.extra, run_dir);
    ASSERT_EQ(r.status, 0) << r.log;
    // The one-rank weights: equal updates at every step (float64 gradient sums over ranks).
    EXPECT_EQ(sha(r), sha(one)) << r.log;
    EXPECT_EQ(r.summary["groups_trained"], one.summary["groups_trained"]);
    EXPECT_EQ(ranks_alive(run_dir), 0);
  }
}

TEST(TrainDataParallel, AKilledRankFailsTheRunNamingItAndResumeEndsBitwise) {
  asyncrl::test::temp_dir dir("dp_kill");
  const std::string dp = " trainer.data_parallel=2 checkpoint.every_steps=2";
  const auto whole = train("sync", dp, dir.file("whole"));
  ASSERT_EQ(whole.status, 0) << whole.log;
  // The resume starts from step 2's checkpoint: what follows it must move the weights.
  ASSERT_GT(updates_in(dir.file("whole"), 2), 0) << "no update after step 2: nothing to compare";

  const auto run_dir = dir.file("killed");
  const auto killed = train("sync", dp + " faults.kill_trainer_rank_at_step=3", run_dir);
  ASSERT_EQ(killed.status, 1) << killed.log;
  EXPECT_NE(killed.log.find("trainer rank 1 (pid"), std::string::npos) << killed.log;
  EXPECT_NE(killed.log.find("was killed by signal 9"), std::string::npos) << killed.log;
  EXPECT_EQ(ranks_alive(run_dir), 0);

  std::string log;
  ASSERT_EQ(asyncrl::test::run_command(
                std::string(ASYNCRL_CLI) + " train --resume " + run_dir + " 2>&1", &log),
            0)
      << log;
  const auto resumed = nlohmann::json::parse(asyncrl::test::read_text(run_dir + "/summary.json"));
  EXPECT_EQ(resumed["params_sha256"], whole.summary["params_sha256"]) << log;
  EXPECT_EQ(resumed["groups_generated"].get<int64_t>(),
            resumed["groups_trained"].get<int64_t>() + resumed["groups_dropped"].get<int64_t>() +
                resumed["groups_in_flight"].get<int64_t>());
  EXPECT_EQ(ranks_alive(run_dir), 0);

  // supervision.trainer_failure=restart: the run restarts itself from step 2's checkpoint with
  // new rank processes, and ends where the uninterrupted run ends.
  const auto restarted_dir = dir.file("restarted");
  const auto restarted =
      train("sync", dp + " faults.kill_trainer_rank_at_step=3 supervision.trainer_failure=restart",
            restarted_dir);
  ASSERT_EQ(restarted.status, 0) << restarted.log;
  EXPECT_EQ(restarted.summary["trainer_restarts"], 1);
  EXPECT_EQ(sha(restarted), sha(whole));
  EXPECT_EQ(restarted.summary["groups_generated"], restarted.summary["groups_trained"]);
  EXPECT_EQ(ranks_alive(restarted_dir), 0);
}

TEST(TrainDataParallel, ARankThatNeverJoinsIsAClearErrorWithinTheTimeout) {
  asyncrl::test::temp_dir dir("dp_absent");
  // Rank 1 is "remote" and nobody starts it.
  const auto r =
      train("sync", " trainer.data_parallel=2 trainer.remote_ranks=1 trainer.dist_timeout_s=3",
            dir.file("run"));
  EXPECT_EQ(r.status, 1) << r.log;
  EXPECT_NE(r.log.find("rank(s) 1 did not join the group"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("within 3000 ms"), std::string::npos) << r.log;
}

TEST(TrainDataParallel, ADeviceThatDoesNotExistIsRefusedNamingItsKey) {
  asyncrl::test::temp_dir dir("dp_device");
  for (auto [extra, key] : {std::pair<std::string, std::string>{" trainer.devices=[cpu,cuda:99]",
                                                                "trainer.devices[1] is 'cuda:99'"},
                            {" rollout.devices=[cuda:98]", "rollout.devices[0] is 'cuda:98'"}}) {
    const auto r = train("sync", extra, dir.file("run"));
    EXPECT_EQ(r.status, 1) << r.log;
    EXPECT_NE(r.log.find(key), std::string::npos) << r.log;
  }
}

TEST(TrainDataParallel, ARankStartedByHandGetsItsPlaceFromTheListenerWithTheRunsSecret) {
  // trainer.remote_ranks=1: train starts rank 0 only and waits; rank 1 is started here as a
  // user on another machine would, with the cluster listener's port (cluster.json) and the run's
  // secret: it gets its rank, the config and the rendezvous from the controller. Without the
  // secret it is refused, and so is a hand-started --join without the group's token. The run
  // must end on the one-rank weights. Bounded: cluster.json within 30 s, the rest by timeouts.
  asyncrl::test::temp_dir dir("dp_remote");
  const auto one = train("sync", "", dir.file("one"));
  ASSERT_EQ(one.status, 0) << one.log;
  const std::string run = dir.file("run"), cli = ASYNCRL_CLI;
  const std::string script =
      cli + " train -c " + ASYNCRL_SOURCE_DIR + "/configs/sync.yaml" + kTiny +
      " trainer.data_parallel=2 trainer.remote_ranks=1 runtime.run_dir=" + run + " > " + run +
      ".train.log 2>&1 & train=$!; "
      "for i in $(seq 1 300); do [ -s " +
      run +
      "/cluster.json ] && break; sleep 0.1; done; "
      "port=$(python3 -c \"import json,sys; print(json.load(open(sys.argv[1]))['port'])\" " +
      run + "/cluster.json); " +
      // refused: no secret; a --join without the token
      "ASYNCRL_RUN_SECRET= timeout 60 " + cli + " trainer-rank --connect 127.0.0.1:$port > " + run +
      ".nosecret.log 2>&1; nosecret=$?; " + "ASYNCRL_DIST_TOKEN= timeout 60 " + cli +
      " trainer-rank -c " + run + "/dp_config.yaml --rank 1 --join 127.0.0.1:1 > " + run +
      ".notoken.log 2>&1; notoken=$?; " +
      // the rank, with the secret
      "timeout 120 " + cli + " trainer-rank --connect 127.0.0.1:$port --secret-file " + run +
      "/run.secret > " + run +
      ".rank1.log 2>&1; rank=$?; "
      "wait $train; t=$?; echo \"train $t rank $rank nosecret $nosecret notoken $notoken\"";
  std::string out;
  asyncrl::test::run_command(script, &out);  // sh -c
  EXPECT_NE(out.find("train 0 rank 0 nosecret 1 notoken 2"), std::string::npos)
      << out << asyncrl::test::read_text(run + ".train.log")
      << asyncrl::test::read_text(run + ".rank1.log");
  EXPECT_NE(asyncrl::test::read_text(run + ".nosecret.log").find("must present the run's secret"),
            std::string::npos);
  EXPECT_NE(asyncrl::test::read_text(run + ".notoken.log").find("no group token"),
            std::string::npos);
  const auto s = nlohmann::json::parse(asyncrl::test::read_text(run + "/summary.json"));
  EXPECT_EQ(s["params_sha256"], one.summary["params_sha256"]);
}
