// Config loading: every error names where the value came from and the key.

#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <utility>

#include "actors/role_params.hpp"
#include "runtime/config/params.hpp"
#include "runtime/config/run_config.hpp"
#include "tests/test_util.hpp"

using namespace asyncrl;

namespace {

// Loads YAML text as a file and returns the config_error message ("" if none).
std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  test::temp_dir dir("cfg");
  auto path = dir.file("c.yaml");
  test::write_text(path, yaml);
  try {
    load_config(path, overrides);
  } catch (const config_error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& sub) {
  return s.find(sub) != std::string::npos;
}

TEST(Config, DefaultsLoadWithoutAFile) {
  auto lc = load_config("", {});
  EXPECT_EQ(lc->cfg.rollout.n, 8);
  EXPECT_EQ(lc->cfg.runtime.device, "cpu");
  EXPECT_EQ(lc->schema.origin("rollout.n").where, "default");
}

TEST(Config, ValuesAndOverridesApplyInOrder) {
  test::temp_dir dir("cfg");
  auto path = dir.file("c.yaml");
  test::write_text(path, "sft:\n  lr: 0.5\n  steps: 7\nrollout:\n  top_p: 0.9\n");
  auto lc = load_config(path, {"sft.steps=9", "runtime.run_dir=\"x y\""});
  EXPECT_DOUBLE_EQ(lc->cfg.sft.lr, 0.5);
  EXPECT_EQ(lc->cfg.sft.steps, 9);
  EXPECT_DOUBLE_EQ(lc->cfg.rollout.top_p, 0.9);
  EXPECT_EQ(lc->cfg.runtime.run_dir, "x y");
  EXPECT_EQ(lc->schema.origin("sft.lr").where, path + ":2");
  EXPECT_TRUE(contains(lc->schema.origin("sft.steps").where, "sft.steps=9"));
}

TEST(Config, UnknownKeyNamesFileLineAndSuggests) {
  auto msg = error_of("sft:\n  steps: 3\n  lrr: 0.1\n");
  EXPECT_TRUE(contains(msg, "c.yaml:3")) << msg;
  EXPECT_TRUE(contains(msg, "unknown key 'sft.lrr'")) << msg;
  EXPECT_TRUE(contains(msg, "did you mean 'sft.lr'")) << msg;
}

TEST(Config, UnknownSectionIsReported) {
  auto msg = error_of("trainr:\n  lr: 1\n");
  EXPECT_TRUE(contains(msg, "c.yaml:2: unknown key 'trainr.lr'")) << msg;
}

TEST(Config, WrongTypesNameTheKey) {
  auto msg = error_of("rollout:\n  n: eight\n");
  EXPECT_TRUE(contains(msg, "c.yaml:2: key 'rollout.n': expected an integer, got 'eight'")) << msg;
  msg = error_of("sft:\n  lr: fast\n");
  EXPECT_TRUE(contains(msg, "key 'sft.lr': expected a finite number")) << msg;
  msg = error_of("model:\n  init:\n    tie_word_embeddings: maybe\n");
  EXPECT_TRUE(
      contains(msg, "c.yaml:3: key 'model.init.tie_word_embeddings': expected true or false"))
      << msg;
  msg = error_of("rollout:\n  n: 2.5\n");
  EXPECT_TRUE(contains(msg, "expected an integer, got '2.5'")) << msg;
}

TEST(Config, BadValuesSayWhatIsExpected) {
  auto msg = error_of("rollout:\n  n: 0\n");
  EXPECT_TRUE(contains(msg, "key 'rollout.n': must be > 0 (got 0)")) << msg;
  msg = error_of("rollout:\n  top_p: 1.5\n");
  EXPECT_TRUE(contains(msg, "key 'rollout.top_p': must be in (0, 1]")) << msg;
  msg = error_of("sft:\n  schedule: linear\n");
  EXPECT_TRUE(contains(msg, "key 'sft.schedule': expected one of {constant, warmup, cosine}"))
      << msg;
  msg = error_of("runtime:\n  device: tpu\n");
  EXPECT_TRUE(contains(msg, "key 'runtime.device'")) << msg;
  msg = error_of("data:\n  arith:\n    ops: \"*\"\n");
  EXPECT_TRUE(contains(msg, "c.yaml:3: key 'data.arith.ops'")) << msg;
}

// Catches a role device that ignores its own key or does not fall back to runtime.device, and a
// malformed device accepted until torch throws deep inside a role.
TEST(Config, RoleDevicesDefaultToTheRuntimeDevice) {
  auto lc = load_config("", {"runtime.device=cuda:1"});
  EXPECT_EQ(trainer_device(lc->cfg.trainer, lc->cfg.runtime), "cuda:1");
  EXPECT_EQ(rollout_device(lc->cfg.rollout, lc->cfg.runtime), "cuda:1");
  lc = load_config("", {"runtime.device=cuda:1", "trainer.device=cuda:0", "rollout.device=cpu"});
  EXPECT_EQ(trainer_device(lc->cfg.trainer, lc->cfg.runtime), "cuda:0");
  EXPECT_EQ(rollout_device(lc->cfg.rollout, lc->cfg.runtime), "cpu");
  for (const char* bad : {"trainer.device=cuda:x", "rollout.device=gpu", "trainer.device=cuda:"}) {
    auto msg = error_of("", {bad});
    const std::string key = std::string(bad).substr(0, std::string(bad).find('='));
    EXPECT_TRUE(contains(msg, "key '" + key + "': expected cpu, cuda or cuda:N")) << msg;
  }
  auto msg = error_of("", {"runtime.device="});
  EXPECT_TRUE(contains(msg, "key 'runtime.device'")) << msg;
}

TEST(Config, CrossKeyChecksNameTheLaterKey) {
  auto msg = error_of("data:\n  arith:\n    min_digits: 4\n    max_digits: 2\n");
  EXPECT_TRUE(contains(msg,
                       "c.yaml:4: key 'data.arith.max_digits': must be >= "
                       "data.arith.min_digits (4)"))
      << msg;
  msg = error_of("", {"model.init.num_key_value_heads=3"});
  EXPECT_TRUE(contains(msg, "command line argument 'model.init.num_key_value_heads=3'")) << msg;
  EXPECT_TRUE(contains(msg, "must divide model.init.num_attention_heads")) << msg;
}

TEST(Config, OverrideErrorsNameTheArgument) {
  auto msg = error_of("", {"sft.steps"});
  EXPECT_TRUE(contains(msg, "command line argument 'sft.steps': expected dotted.key=value")) << msg;
  msg = error_of("", {"sft.stepz=3"});
  EXPECT_TRUE(contains(msg, "unknown key 'sft.stepz' (did you mean 'sft.steps'?)")) << msg;
  msg = error_of("", {"sft.steps=-1"});
  EXPECT_TRUE(contains(msg, "command line argument 'sft.steps=-1': key 'sft.steps': must be > 0"))
      << msg;
}

TEST(Config, SyntaxErrorsListsAndMissingValues) {
  auto msg = error_of("sft:\n  steps: [1, 2\n");
  EXPECT_TRUE(contains(msg, "c.yaml:")) << msg;
  EXPECT_TRUE(contains(msg, "invalid YAML")) << msg;
  msg = error_of("sft:\n  steps: [1, 2]\n");
  EXPECT_TRUE(contains(msg, "c.yaml:2: key 'sft.steps': lists are not supported")) << msg;
  msg = error_of("sft:\n  steps:\n");
  EXPECT_TRUE(contains(msg, "c.yaml:2: key 'sft.steps': has no value")) << msg;
  msg = error_of("- a\n- b\n");
  EXPECT_TRUE(contains(msg, "top level must be a map")) << msg;
}

TEST(Config, MissingFileIsNamed) {
  try {
    load_config("/nonexistent/x.yaml", {});
    FAIL();
  } catch (const config_error& e) {
    EXPECT_TRUE(contains(e.what(), "/nonexistent/x.yaml: cannot open config file")) << e.what();
  }
}

TEST(Config, DumpRoundTrips) {
  auto lc = load_config("", {"sft.lr=0.25", "runtime.run_dir=out/dir", "rollout.n=3"});
  test::temp_dir dir("cfg");
  auto path = dir.file("dump.yaml");
  test::write_text(path, lc->schema.dump_yaml());
  auto again = load_config(path, {});
  EXPECT_DOUBLE_EQ(again->cfg.sft.lr, 0.25);
  EXPECT_EQ(again->cfg.runtime.run_dir, "out/dir");
  EXPECT_EQ(again->cfg.rollout.n, 3);
  EXPECT_EQ(again->schema.dump_yaml(), lc->schema.dump_yaml());
}

TEST(Config, BaseFileIsAppliedFirstAndCyclesAreReported) {
  test::temp_dir dir("cfg");
  test::write_text(dir.file("base.yaml"), "sft:\n  lr: 0.5\n  steps: 7\n");
  test::write_text(dir.file("child.yaml"), "base: base.yaml\nsft:\n  steps: 9\n");
  auto lc = load_config(dir.file("child.yaml"), {});
  EXPECT_DOUBLE_EQ(lc->cfg.sft.lr, 0.5);
  EXPECT_EQ(lc->cfg.sft.steps, 9);
  EXPECT_EQ(lc->schema.origin("sft.lr").where, dir.file("base.yaml") + ":2");
  test::write_text(dir.file("a.yaml"), "base: b.yaml\n");
  test::write_text(dir.file("b.yaml"), "base: a.yaml\n");
  try {
    load_config(dir.file("a.yaml"), {});
    FAIL();
  } catch (const config_error& e) {
    EXPECT_TRUE(contains(e.what(), "includes itself")) << e.what();
  }
  // An error in the base file names the base file.
  test::write_text(dir.file("bad.yaml"), "sft:\n  stepz: 1\n");
  test::write_text(dir.file("uses_bad.yaml"), "base: bad.yaml\n");
  try {
    load_config(dir.file("uses_bad.yaml"), {});
    FAIL();
  } catch (const config_error& e) {
    EXPECT_TRUE(contains(e.what(), "bad.yaml:2: unknown key 'sft.stepz'")) << e.what();
  }
}

TEST(Config, ShippedConfigsLoad) {
  for (auto name :
       {"demo.yaml", "sync.yaml", "sync_decoupled.yaml", "periodic.yaml", "stream_off_policy.yaml",
        "fully_async_stale.yaml", "fully_async_partial.yaml"}) {
    auto path = std::string(ASYNCRL_SOURCE_DIR) + "/configs/" + name;
    EXPECT_NO_THROW(load_config(path, {})) << path;
  }
}

// --- issue 9 -----------------------------------------------------------------------------

TEST(Config, EtaBelowTheSyncWindowIsRefused) {
  // k = 2: the second step of a window trains on groups one version old. eta = 0 would drop
  // every one of them and the run could never finish that step.
  auto msg = error_of(
      "async_training:\n  mode: fully_async\n  trigger_parameter_sync_step: 2\n"
      "  max_staleness: 0\n");
  EXPECT_TRUE(contains(msg, "c.yaml:4: key 'async_training.max_staleness'")) << msg;
  EXPECT_TRUE(contains(msg, "require_batches * trigger_parameter_sync_step - 1 (1)")) << msg;
  // The boundary itself is fine, and so is eta off.
  EXPECT_EQ(error_of("async_training:\n  mode: fully_async\n  trigger_parameter_sync_step: 2\n"
                     "  max_staleness: 1\n"),
            "");
  EXPECT_EQ(error_of("", {"async_training.mode=fully_async", "async_training.require_batches=3",
                          "async_training.max_staleness=-1"}),
            "");
  msg = error_of("", {"async_training.mode=fully_async", "async_training.require_batches=3",
                      "async_training.max_staleness=1"});
  EXPECT_TRUE(contains(msg, "(2)")) << msg;  // R k - 1 = 2, not 1: catches R ignored
}

TEST(Config, SyncQueueSmallerThanABatchIsRefused) {
  // sync trains on whole batches: a queue that cannot hold one never fills.
  auto msg = error_of("", {"async_training.mode=sync", "data.train_batch_size=16",
                           "async_training.queue_capacity=15"});
  EXPECT_TRUE(contains(msg, "key 'async_training.queue_capacity': must be 0 (automatic) or >= 16"))
      << msg;
  EXPECT_EQ(error_of("", {"async_training.mode=sync", "data.train_batch_size=16",
                          "async_training.queue_capacity=16"}),
            "");
  // periodic streams, so a small queue only limits concurrency.
  EXPECT_EQ(error_of("", {"async_training.mode=periodic", "data.train_batch_size=16",
                          "async_training.queue_capacity=4"}),
            "");
}

TEST(Config, StaleCoupledGrpoUsesTheRolloutLogprobs) {
  // fully_async + the coupled loss: the generator's log-probs are the behaviour policy (verl);
  // without them the ratio would start at 1 however stale the tokens are.
  auto lc = load_config("", {"async_training.mode=fully_async", "algorithm.loss=grpo"});
  EXPECT_TRUE(lc->cfg.algorithm.use_rollout_logprobs);
  // On-policy modes keep the default (an old-policy forward, equal to the rollout's).
  EXPECT_FALSE(
      load_config("", {"async_training.mode=periodic"})->cfg.algorithm.use_rollout_logprobs);
  // An explicit false is refused, naming the key and the way out.
  auto msg = error_of(
      "algorithm:\n  loss: grpo\n  use_rollout_logprobs: false\n"
      "async_training:\n  mode: fully_async\n");
  EXPECT_TRUE(contains(msg, "c.yaml:3: key 'algorithm.use_rollout_logprobs': must be true")) << msg;
  EXPECT_TRUE(contains(msg, "algorithm.loss=decoupled")) << msg;
}

// Rollout correction: the keys reach the trainer's parameters; a correction that cannot act
// (the coupled loss with the rollout's log-probs as the old policy: every ratio is 1) and a
// lower bound above the upper are refused, naming the key and its line.
TEST(Config, RolloutCorrectionKeys) {
  auto lc = load_config(
      "",
      {"algorithm.rollout_correction.is=sequence", "algorithm.rollout_correction.is_threshold=3",
       "algorithm.rollout_correction.rs=geometric", "algorithm.rollout_correction.rs_threshold=1.5",
       "algorithm.rollout_correction.veto_threshold=1e-4"});
  const auto p = policy_trainer_params_from(lc->cfg).rollout_correction;
  EXPECT_EQ(p.is, rc_is_level::sequence);
  EXPECT_EQ(p.is_threshold, 3.0);
  EXPECT_EQ(p.rs, rc_rs_level::geometric);
  EXPECT_EQ(p.rs_threshold, 1.5);
  EXPECT_DOUBLE_EQ(p.rs_lower(), 1.0 / 1.5);
  EXPECT_EQ(p.veto_threshold, 1e-4);
  auto msg = error_of(
      "algorithm:\n  loss: grpo\n  rollout_correction:\n    is: token\n"
      "async_training:\n  mode: fully_async\n");
  EXPECT_TRUE(contains(msg, "c.yaml:4: key 'algorithm.rollout_correction.is'")) << msg;
  EXPECT_TRUE(contains(msg, "algorithm.loss=decoupled")) << msg;
  // The same with an explicit use_rollout_logprobs in an on-policy mode.
  msg = error_of("algorithm:\n  use_rollout_logprobs: true\n",
                 {"algorithm.rollout_correction.rs=token"});
  EXPECT_TRUE(contains(msg, "key 'algorithm.rollout_correction.rs'")) << msg;
  // A recomputed old policy (the default on-policy) or the decoupled loss are fine.
  EXPECT_EQ(error_of("algorithm:\n  rollout_correction:\n    is: token\n"), "");
  EXPECT_EQ(error_of("algorithm:\n  loss: decoupled\n  rollout_correction:\n    is: token\n"
                     "async_training:\n  mode: fully_async\n"),
            "");
  msg = error_of(
      "algorithm:\n  rollout_correction:\n    rs: token\n    rs_threshold: 2\n"
      "    rs_threshold_lower: 3\n");
  EXPECT_TRUE(contains(msg, "c.yaml:5: key 'algorithm.rollout_correction.rs_threshold_lower'"))
      << msg;
}

// stale_policy wait is the default and acts only where eta does (fully_async): the schedule
// asks the queue to wait, and the rollouters to report their groups' starts, only there.
// Catches a default flipped back to drop and a wait switched on in the on-policy modes.
TEST(Config, StalePolicyWaitIsTheDefaultAndActsInFullyAsyncOnly) {
  auto plan = [](const std::vector<std::string>& o) {
    return make_schedule(schedule_params_from(load_config("", o)->cfg)).admission;
  };
  EXPECT_EQ(load_config("", {})->cfg.async_training.stale_policy, stale_action::wait);
  EXPECT_FALSE(plan({}).wait_for_stale);  // periodic
  EXPECT_TRUE(
      plan({"async_training.mode=fully_async", "async_training.max_staleness=2"}).wait_for_stale);
  EXPECT_FALSE(plan({"async_training.mode=fully_async", "async_training.max_staleness=2",
                     "async_training.stale_policy=drop"})
                   .wait_for_stale);
}

// rollout.batch_invariant promises equal bits: it refuses two precisions (which can never
// agree) and a GPU (no CUDA kernels), naming the key and line; one precision on the CPU loads
// and reaches both the rollouter and the trainer. Catches a check on the wrong key, a bf16
// trainer accepted against float32 rollouts, and a flag that reaches one side only.
TEST(Config, BatchInvariantNeedsOnePrecisionOnTheCpuAndReachesBothSides) {
  auto e = error_of("rollout:\n  batch_invariant: true\n  dtype: bf16\n");
  EXPECT_TRUE(contains(e, "c.yaml:2") && contains(e, "'rollout.batch_invariant'") &&
              contains(e, "one precision"))
      << e;
  e = error_of("rollout:\n  batch_invariant: true\n", {"trainer.device=cuda"});
  EXPECT_TRUE(contains(e, "CPU kernels only")) << e;
  EXPECT_EQ(
      error_of("rollout:\n  batch_invariant: true\n  dtype: bf16\n", {"trainer.precision=bf16"}),
      "");
  auto lc = load_config("", {"rollout.batch_invariant=true"});
  EXPECT_TRUE(policy_trainer_params_from(lc->cfg).batch_invariant);
  EXPECT_TRUE(make_role_params(lc->cfg).rollouter.batch_invariant);
  EXPECT_FALSE(load_config("", {})->cfg.rollout.batch_invariant);
}

// --- issue 10: choice keys are enums --------------------------------------------------------

// Each spelling of `key`, in --describe's order, and the value it must parse to. Catches a
// name table with a typo, two names swapped, a value missing, or a table in another order: the
// spelling has to reach the typed field through the config, and come back out of the dump and
// to_string() unchanged.
template <class E, class Get>
void expect_names(const std::string& key, Get field,
                  const std::vector<std::pair<std::string, E>>& want,
                  const std::vector<std::string>& extra = {}) {
  SCOPED_TRACE(key);
  std::vector<std::pair<std::string, E>> table;
  for (const auto& n : enum_names(E{}))
    table.emplace_back(n.name, n.value);
  EXPECT_TRUE(table == want) << "the name table of " << key << " is not the expected one";
  for (const auto& [name, value] : want) {
    EXPECT_EQ(std::string(to_string(value)), name);
    EXPECT_TRUE(parse_enum<E>(name) == value) << name;
    auto overrides = extra;
    overrides.push_back(key + "=" + name);
    auto lc = load_config("", overrides);
    EXPECT_TRUE(field(lc->cfg) == value) << name;
    EXPECT_EQ(lc->schema.value(key), name);
  }
  EXPECT_FALSE(parse_enum<E>("no-such-name").has_value());
}

TEST(ConfigEnums, EveryNameRoundTrips) {
  expect_names<model_arch>("model.init.arch", [](const run_config& c) { return c.model.init.arch; },
                           {{"qwen2", model_arch::qwen2}, {"llama", model_arch::llama}});
  expect_names<lr_schedule_kind>("sft.schedule", [](const run_config& c) { return c.sft.schedule; },
                                 {{"constant", lr_schedule_kind::constant},
                                  {"warmup", lr_schedule_kind::warmup},
                                  {"cosine", lr_schedule_kind::cosine}});
  expect_names<lr_schedule_kind>("trainer.lr_schedule",
                                 [](const run_config& c) { return c.trainer.lr_schedule; },
                                 {{"constant", lr_schedule_kind::constant},
                                  {"warmup", lr_schedule_kind::warmup},
                                  {"cosine", lr_schedule_kind::cosine}});
  expect_names<reward_function>("reward.function",
                                [](const run_config& c) { return c.reward.function; },
                                {{"math", reward_function::math},
                                 {"prefix", reward_function::prefix},
                                 {"external", reward_function::external}},
                                {"reward.prefix=x", "reward.external.command=/bin/cat"});
  expect_names<async_mode>("async_training.mode",
                           [](const run_config& c) { return c.async_training.mode; },
                           {{"sync", async_mode::sync},
                            {"periodic", async_mode::periodic},
                            {"fully_async", async_mode::fully_async}});
  expect_names<stale_action>("async_training.stale_policy",
                             [](const run_config& c) { return c.async_training.stale_policy; },
                             {{"drop", stale_action::drop},
                              {"regenerate", stale_action::regenerate},
                              {"wait", stale_action::wait}},
                             {"async_training.mode=fully_async", "async_training.max_staleness=1"});
  expect_names<workload_lengths>("workload.lengths",
                                 [](const run_config& c) { return c.workload.lengths; },
                                 {{"model", workload_lengths::model},
                                  {"fixed", workload_lengths::fixed},
                                  {"lognormal", workload_lengths::lognormal}});
  expect_names<advantage_estimator>(
      "algorithm.adv_estimator", [](const run_config& c) { return c.algorithm.adv_estimator; },
      {{"grpo", advantage_estimator::grpo}, {"drgrpo", advantage_estimator::drgrpo}});
  expect_names<loss_kind>("algorithm.loss", [](const run_config& c) { return c.algorithm.loss; },
                          {{"grpo", loss_kind::grpo}, {"decoupled", loss_kind::decoupled}});
  expect_names<prox_method>(
      "algorithm.prox_logp", [](const run_config& c) { return c.algorithm.prox_logp; },
      {{"recompute", prox_method::recompute}, {"loglinear", prox_method::loglinear}});
  expect_names<rc_is_level>("algorithm.rollout_correction.is",
                            [](const run_config& c) { return c.algorithm.rollout_correction.is; },
                            {{"none", rc_is_level::none},
                             {"token", rc_is_level::token},
                             {"sequence", rc_is_level::sequence}});
  expect_names<rc_rs_level>("algorithm.rollout_correction.rs",
                            [](const run_config& c) { return c.algorithm.rollout_correction.rs; },
                            {{"none", rc_rs_level::none},
                             {"token", rc_rs_level::token},
                             {"sequence", rc_rs_level::sequence},
                             {"geometric", rc_rs_level::geometric}});
  expect_names<loss_aggregation>(
      "algorithm.loss_agg", [](const run_config& c) { return c.algorithm.loss_agg; },
      {{"token-mean", loss_aggregation::token_mean}, {"seq-mean", loss_aggregation::seq_mean}});
  expect_names<train_precision>("trainer.precision",
                                [](const run_config& c) { return c.trainer.precision; },
                                {{"float32", train_precision::float32},
                                 {"float64", train_precision::float64},
                                 {"bf16", train_precision::bf16}});
  expect_names<rollout_dtype>("rollout.dtype", [](const run_config& c) { return c.rollout.dtype; },
                              {{"float32", rollout_dtype::float32}, {"bf16", rollout_dtype::bf16}});
}

TEST(ConfigEnums, DefaultsAreSpelledAsBefore) {
  auto lc = load_config("", {});
  const std::vector<std::pair<std::string, std::string>> want{
      {"model.init.arch", "qwen2"},         {"sft.schedule", "cosine"},
      {"trainer.lr_schedule", "constant"},  {"reward.function", "math"},
      {"async_training.mode", "periodic"},  {"async_training.stale_policy", "wait"},
      {"workload.lengths", "model"},        {"algorithm.adv_estimator", "grpo"},
      {"algorithm.loss", "grpo"},           {"algorithm.prox_logp", "recompute"},
      {"algorithm.loss_agg", "token-mean"}, {"trainer.precision", "float32"}};
  for (const auto& [key, name] : want)
    EXPECT_EQ(lc->schema.value(key), name) << key;
}

TEST(ConfigEnums, BadValueNamesTheKeyAndListsTheChoices) {
  EXPECT_EQ(error_of("", {"async_training.mode=perodic"}),
            "command line argument 'async_training.mode=perodic': key 'async_training.mode': "
            "expected one of {sync, periodic, fully_async}, got 'perodic'");
  auto msg = error_of("algorithm:\n  loss: grp\n");
  EXPECT_TRUE(
      contains(msg, "c.yaml:2: key 'algorithm.loss': expected one of {grpo, decoupled}, got 'grp'"))
      << msg;
  msg = error_of("algorithm:\n  loss_agg: token_mean\n");
  EXPECT_TRUE(contains(msg,
                       "c.yaml:2: key 'algorithm.loss_agg': expected one of {token-mean, "
                       "seq-mean}, got 'token_mean'"))
      << msg;
  // The C++ spelling of a value is not a config spelling.
  msg = error_of("", {"trainer.precision=f64"});
  EXPECT_TRUE(contains(msg, "key 'trainer.precision': expected one of {float32, float64, bf16}"))
      << msg;
  msg = error_of("workload:\n  lengths:\n");
  EXPECT_TRUE(contains(msg,
                       "c.yaml:2: key 'workload.lengths': has no value; expected one of "
                       "{model, fixed, lognormal}"))
      << msg;
}

TEST(ConfigEnums, DescribeListsTheNames) {
  auto d = load_config("", {})->schema.describe();
  EXPECT_TRUE(contains(d,
                       "async_training.mode (one of {sync, periodic, fully_async}, "
                       "'periodic'): sync: generate the whole batch"))
      << d;
  EXPECT_TRUE(contains(d, "algorithm.loss_agg (one of {token-mean, seq-mean}, 'token-mean')")) << d;
}

// policy_trainer_params keeps its own defaults (tests and benchmarks build it by hand); they
// must be the config's, or a benchmark would measure another trainer than a run uses.
TEST(ConfigParams, PolicyTrainerDefaultsAreTheConfigDefaults) {
  const policy_trainer_params d;
  const auto p = policy_trainer_params_from(run_config{});
  EXPECT_EQ(p.loss, d.loss);
  EXPECT_EQ(p.prox_logp, d.prox_logp);
  EXPECT_EQ(p.use_rollout_logprobs, d.use_rollout_logprobs);
  EXPECT_EQ(p.clip_eps_low, d.clip_eps_low);
  EXPECT_EQ(p.clip_eps_high, d.clip_eps_high);
  EXPECT_EQ(p.dual_clip_c, d.dual_clip_c);
  EXPECT_EQ(p.kl_coef, d.kl_coef);
  EXPECT_EQ(p.imp_weight_cap, d.imp_weight_cap);
  EXPECT_EQ(p.rollout_correction.is, d.rollout_correction.is);
  EXPECT_EQ(p.rollout_correction.is_threshold, d.rollout_correction.is_threshold);
  EXPECT_EQ(p.rollout_correction.rs, d.rollout_correction.rs);
  EXPECT_EQ(p.rollout_correction.rs_threshold, d.rollout_correction.rs_threshold);
  EXPECT_EQ(p.rollout_correction.rs_threshold_lower, d.rollout_correction.rs_threshold_lower);
  EXPECT_EQ(p.rollout_correction.veto_threshold, d.rollout_correction.veto_threshold);
  EXPECT_EQ(p.loss_agg, d.loss_agg);
  EXPECT_EQ(p.shared_prompt_attention, d.shared_prompt_attention);
  EXPECT_EQ(p.padding_free, d.padding_free);
  EXPECT_EQ(p.deterministic_accumulation, d.deterministic_accumulation);
  EXPECT_EQ(p.grad_bucket_bytes, d.grad_bucket_bytes);
  EXPECT_EQ(p.overlap_grad_reduce, d.overlap_grad_reduce);
  EXPECT_EQ(p.precision, d.precision);
  EXPECT_EQ(p.compute_ref, d.compute_ref);
  EXPECT_EQ(p.lr, d.lr);
  EXPECT_EQ(p.min_lr_ratio, d.min_lr_ratio);
  EXPECT_EQ(p.lr_schedule, d.lr_schedule);
  EXPECT_EQ(p.warmup_steps, d.warmup_steps);
  EXPECT_EQ(p.weight_decay, d.weight_decay);
  EXPECT_EQ(p.beta1, d.beta1);
  EXPECT_EQ(p.beta2, d.beta2);
  EXPECT_EQ(p.grad_clip, d.grad_clip);
  EXPECT_EQ(p.total_steps, d.total_steps);
  EXPECT_EQ(p.temperature, d.temperature);
  // A greedy rollout (temperature 0) trains on unscaled logits.
  auto lc = load_config("", {"rollout.temperature=0"});
  EXPECT_EQ(policy_trainer_params_from(lc->cfg).temperature, 1.0);
}

TEST(ConfigParams, ScheduleTakesTheSectionAndTheBatchSizes) {
  auto lc = load_config("", {"async_training.mode=fully_async", "rollout.n=4",
                             "data.train_batch_size=8", "trainer.ppo_mini_batch_size=2",
                             "async_training.require_batches=3", "trainer.total_steps=7"});
  auto sp = schedule_params_from(lc->cfg);
  EXPECT_EQ(sp.async_training.mode, async_mode::fully_async);
  EXPECT_EQ(sp.group_size, 4);
  EXPECT_EQ(sp.train_batch_size, 8);
  EXPECT_EQ(sp.ppo_mini_batch_size, 2);
  EXPECT_EQ(sp.total_steps, 7);
  auto plan = make_schedule(sp);
  EXPECT_EQ(plan.mode, async_mode::fully_async);
  EXPECT_EQ(plan.groups_per_step, 2);
  EXPECT_EQ(plan.steps_per_update, 3);
  // The struct's defaults are the config's.
  auto d = schedule_params_from(run_config{});
  const schedule_params fresh;
  EXPECT_EQ(d.group_size, fresh.group_size);
  EXPECT_EQ(d.train_batch_size, fresh.train_batch_size);
  EXPECT_EQ(d.ppo_mini_batch_size, fresh.ppo_mini_batch_size);
  EXPECT_EQ(d.total_steps, fresh.total_steps);
}

TEST(Config, CafThreadsIsAKey) {
  EXPECT_EQ(load_config("", {})->cfg.runtime.caf_threads, 0);
  EXPECT_EQ(load_config("", {"runtime.caf_threads=3"})->cfg.runtime.caf_threads, 3);
  auto msg = error_of("runtime:\n  caf_threads: -1\n");
  EXPECT_TRUE(contains(msg, "c.yaml:2: key 'runtime.caf_threads': must be >= 0 (got -1)")) << msg;
}

}  // namespace

// Doubles print as the shortest text that reads back exactly: readable in config.yaml, the
// console's answers and events.jsonl, and still bit-for-bit (checkpoints compare configs).
TEST(Config, DoublesPrintShortAndRoundTripExactly) {
  auto lc = load_config("", {"trainer.lr=2e-4", "rollout.temperature=0.7"});
  EXPECT_EQ(lc->schema.value("trainer.lr"), "0.0002");
  EXPECT_EQ(lc->schema.value("rollout.temperature"), "0.7");
  // (Subnormals are left out: the loader refuses what strtod flags as out of range.)
  for (double v : {1.0 / 3.0, 0.1, 1e-300, 2.2250738585072014e-308, 123456789.125, 2e-7 / 3}) {
    std::ostringstream os;
    os.precision(17);
    os << v;
    auto again = load_config("", {"trainer.lr=" + os.str()});
    const auto text = again->schema.value("trainer.lr");
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), v) << text;
    EXPECT_EQ(again->cfg.trainer.lr, v);
  }
}

// Multi-turn episodes (docs/episodes.md). Catches: more turns with nothing to answer them (the
// episode would end after its first turn, silently single-turn), an environment that can never
// answer (max_turns 1), an external environment without a command or socket, and an episode
// budget smaller than one turn.
TEST(Config, EpisodeKeysAreCheckedTogether) {
  auto msg = error_of("rollout:\n  max_turns: 3\n");
  EXPECT_TRUE(contains(msg, "c.yaml:2: key 'rollout.max_turns'")) << msg;
  EXPECT_TRUE(contains(msg, "needs an environment")) << msg;
  msg = error_of("env:\n  kind: calculator\n");
  EXPECT_TRUE(contains(msg, "key 'env.kind': needs rollout.max_turns >= 2")) << msg;
  msg = error_of("rollout:\n  max_turns: 2\nenv:\n  kind: external\n");
  EXPECT_TRUE(contains(msg, "external needs env.command")) << msg;
  msg = error_of(
      "rollout:\n  max_turns: 2\n  max_new_tokens: 32\n  max_episode_tokens: 16\n"
      "env:\n  kind: calculator\n");
  EXPECT_TRUE(contains(msg,
                       "key 'rollout.max_episode_tokens': must be 0 or >= "
                       "rollout.max_new_tokens (32)"))
      << msg;
  EXPECT_EQ(error_of("rollout:\n  max_turns: 2\nenv:\n  kind: calculator\n"), "");
  // Evaluation runs the training episodes unless told otherwise.
  auto lc = load_config_text(
      "rollout:\n  max_turns: 3\n  max_episode_tokens: 90\n"
      "env:\n  kind: calculator\n",
      "c.yaml", {});
  EXPECT_EQ(lc->cfg.eval.max_turns, 3);
  EXPECT_EQ(lc->cfg.eval.max_episode_tokens, 90);
  EXPECT_EQ(lc->cfg.eval.env.kind, env_kind::calculator);
}
