// Every message payload survives CAF's binary serialization, alone and inside a caf::message
// (which needs the type-ID registration), and weight snapshots round-trip bit-exactly through
// msgpack while unpack_weights rejects corrupt bytes with std::runtime_error.

#include <gtest/gtest.h>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/deep_to_string.hpp>
#include <caf/message.hpp>
#include <msgpack.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "actors/controller.hpp"
#include "actors/metrics_log.hpp"
#include "messages/type_ids.hpp"
#include "runtime/model/model.hpp"
#include "runtime/model/weight_sync.hpp"
#include "tests/test_builders.hpp"
#include "tests/tiny_model.hpp"

namespace asyncrl {
namespace {

using test::make_queue_stats;

// A payload nobody registered: serializing it inside a message must fail.
struct unregistered_payload {
  int32_t a = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, unregistered_payload& x) {
  return f(caf::meta::type_name("unregistered_payload"), x.a);
}

template <class T>
void expect_field(const T& x, const T& y, const char* name) {
  EXPECT_EQ(x, y) << name;
}

// An expression, so that a whole struct's fields fit on a few lines.
#define SAME(field) expect_field(a.field, b.field, #field)

void expect_same(const scored_sample& a, const scored_sample& b) {
  SAME(uid), SAME(group_id), SAME(index), SAME(prompt), SAME(response), SAME(logprobs),
      SAME(versions), SAME(reward), SAME(advantage), SAME(interruptions), SAME(reward_failed);
}

void expect_same(const scored_group& a, const scored_group& b) {
  SAME(group_id), SAME(prompt_index), SAME(seq), SAME(ground_truth), SAME(filtered), SAME(worker);
  ASSERT_EQ(a.samples.size(), b.samples.size());
  for (size_t i = 0; i < a.samples.size(); ++i)
    expect_same(a.samples[i], b.samples[i]);
}

void expect_same(const prompt_task& a, const prompt_task& b) {
  SAME(group_id), SAME(prompt_index), SAME(seq), SAME(prompt), SAME(ground_truth);
}

void expect_same(const fault_counts& a, const fault_counts& b) {
  SAME(rollouter_kills), SAME(reward_worker_kills), SAME(reward_throws), SAME(reward_hangs),
      SAME(sync_drops), SAME(sync_delays), SAME(trainer_crashes), SAME(checkpoints_damaged),
      SAME(trainer_rank_kills), SAME(checkpoints_skipped);
}

void expect_same(const rollout_progress& a, const rollout_progress& b) {
  SAME(worker), SAME(tokens_generated), SAME(groups_completed), SAME(busy_ms), SAME(idle_ms),
      SAME(version), SAME(state), SAME(completed);
  expect_same(a.faults, b.faults);
}

void expect_same(const trainer_status& a, const trainer_status& b) {
  SAME(phase), SAME(step);
}

void expect_same(const sync_status& a, const sync_status& b) {
  SAME(activity), SAME(version);
}

void expect_same(const queue_stats& a, const queue_stats& b) {
  SAME(depth), SAME(running), SAME(received), SAME(delivered), SAME(dropped_stale),
      SAME(regenerated), SAME(abandoned), SAME(lost), SAME(restored), SAME(refilled),
      SAME(admitted_in_window), SAME(window_budget), SAME(carried), SAME(capacity),
      SAME(published_version), SAME(max_delivered_staleness), SAME(received_tokens),
      SAME(dropped_tokens), SAME(stale_waits), SAME(credit_requests_waiting),
      SAME(pull_waiting_min), SAME(pull_waiting_old), SAME(admission_limit), SAME(held),
      SAME(window_granted), SAME(window_carried);
}

void expect_same(const delivery& a, const delivery& b) {
  ASSERT_EQ(a.groups.size(), b.groups.size());
  for (size_t i = 0; i < a.groups.size(); ++i)
    expect_same(a.groups[i], b.groups[i]);
  expect_same(a.stats, b.stats);
}

void expect_same(const sync_report& a, const sync_report& b) {
  SAME(version), SAME(time_ms), SAME(bytes), SAME(workers), SAME(ok), SAME(superseded), SAME(error);
}

void expect_same(const update_stats& a, const update_stats& b) {
  // Walks the one field list, so a metric added to update_stats is checked here too.
  for_each_field(a, [&](const char* name, const auto& x) {
    bool found = false;
    for_each_field(b, [&](const char* other, const auto& y) {
      if constexpr (std::is_same_v<decltype(x), decltype(y)>)
        if (std::string(name) == other) found = true, expect_field(x, y, name);
    });
    EXPECT_TRUE(found) << name;
  });
}

void expect_same(const step_report& a, const step_report& b) {
  SAME(step), SAME(policy_version), SAME(reward_mean), SAME(accuracy), SAME(samples),
      SAME(stale_samples), SAME(partial_ratio), SAME(max_partial_span), SAME(groups_trained),
      SAME(filtered_groups), SAME(refilled_groups), SAME(refill_exhausted), SAME(reward_failures),
      SAME(step_ms), SAME(trainer_idle_ms), SAME(sync_time_ms), SAME(sync_bytes),
      SAME(params_checksum), SAME(prox_version), SAME(out_of_order_groups), SAME(eval_accuracy),
      SAME(eval_time_s), SAME(group_ids), SAME(rewards), SAME(response_lengths);
  expect_same(a.update, b.update);
  expect_same(a.queue, b.queue);
}

void expect_same(const rollout_counts& a, const rollout_counts& b) {
  SAME(worker), SAME(groups_completed), SAME(groups_unfinished), SAME(tokens_generated),
      SAME(interruptions);
  expect_same(a.faults, b.faults);
}

void expect_same(const reward_counts& a, const reward_counts& b) {
  SAME(received), SAME(forwarded), SAME(in_progress), SAME(failures), SAME(timeouts),
      SAME(worker_restarts), SAME(fenced), SAME(scorer_timeouts), SAME(scorer_crashes),
      SAME(scorer_malformed), SAME(scorer_unavailable), SAME(scorer_restarts),
      SAME(scorer_start_failures);
  expect_same(a.faults, b.faults);
}

void expect_same(const trainer_counts& a, const trainer_counts& b) {
  SAME(deliveries), SAME(received), SAME(trained), SAME(filtered), SAME(refilled), SAME(held),
      SAME(steps), SAME(skipped_steps), SAME(version);
}

// Bit-exact, so NaN payloads, -0 and denormals count too.
void expect_same(const weight_snapshot& a, const weight_snapshot& b) {
  SAME(version);
  ASSERT_EQ(a.blob == nullptr, b.blob == nullptr);
  if (!a.blob) return;
  EXPECT_EQ(a.blob->names, b.blob->names);
  EXPECT_EQ(a.blob->shapes, b.blob->shapes);
  EXPECT_EQ(a.blob->dtype, b.blob->dtype);
  ASSERT_EQ(a.blob->data.size(), b.blob->data.size());
  // Bit-exact; memcmp must not see the null data() of an empty vector.
  if (!a.blob->data.empty())
    EXPECT_EQ(0, std::memcmp(a.blob->data.data(), b.blob->data.data(), a.blob->bytes()));
}

void expect_same(const run_result& a, const run_result& b) {
  SAME(ok), SAME(status), SAME(error), SAME(resumed_from_step), SAME(checkpoints), SAME(checkpoint),
      SAME(checkpoint_step), SAME(rollouter_restarts), SAME(sync_retries), SAME(restartable),
      SAME(steps), SAME(groups_generated), SAME(groups_trained), SAME(groups_dropped),
      SAME(groups_in_flight), SAME(groups_filtered), SAME(tokens_generated), SAME(tokens_trained),
      SAME(syncs), SAME(wall_time_s), SAME(train_time_s);
  ASSERT_EQ(a.rollouters.size(), b.rollouters.size());
  for (size_t i = 0; i < a.rollouters.size(); ++i)
    expect_same(a.rollouters[i], b.rollouters[i]);
  expect_same(a.reward, b.reward);
  expect_same(a.queue, b.queue);
  expect_same(a.trainer, b.trainer);
  expect_same(a.faults, b.faults);
  expect_same(a.final_weights, b.final_weights);
}

#undef SAME

// Fillers: every field distinct from its default and from its neighbours.
scored_sample make_sample(uint64_t k) {
  scored_sample s;
  s.uid = (1ULL << 63) + k, s.group_id = (1ULL << 40) + k, s.index = 7 + static_cast<uint32_t>(k);
  s.prompt = {11, -12, 13}, s.response = {21, 22, 23, 24}, s.versions = {3, 3, 4, 5};
  s.logprobs = {-0.5f, -1.25f, -3e-8f, 0.0f}, s.reward = 0.75 + k, s.advantage = -1.5 - k;
  s.interruptions = 2 + static_cast<int32_t>(k), s.reward_failed = true;
  return s;
}

scored_group make_group(uint64_t k) {
  scored_group g;
  g.group_id = (1ULL << 41) + k, g.prompt_index = 900 + k, g.filtered = true;
  g.worker = 3 + static_cast<int32_t>(k), g.seq = 4000 + k;
  g.ground_truth = "\\boxed{42} \xe2\x88\x9a", g.samples = {make_sample(k), make_sample(k + 1)};
  return g;
}

std::shared_ptr<weight_blob> make_blob() {
  auto b = std::make_shared<weight_blob>();
  b->names = {"embed.weight", "layers.0.attn.qkv", "scale", "empty"};
  b->shapes = {{3, 4}, {5}, {}, {2, 0, 7}};  // 12 + 5 + 1 + 0 floats
  b->resize(18);
  float* f = b->floats();
  for (int i = 0; i < 18; ++i)
    f[i] = 0.1f * static_cast<float>(i) - 0.7f;
  uint32_t nan_bits = 0x7fc01234u;  // a quiet NaN with a payload
  std::memcpy(&f[0], &nan_bits, sizeof nan_bits);
  f[1] = -0.0f;
  f[2] = std::numeric_limits<float>::infinity();
  f[3] = std::numeric_limits<float>::denorm_min();
  f[4] = std::numeric_limits<float>::max();
  return b;
}

// The same tensors as bf16: 18 two-byte elements whose bit patterns (a NaN payload, -0, inf,
// the smallest subnormal) a float32 path would not keep.
std::shared_ptr<weight_blob> make_bf16_blob() {
  auto b = make_blob();
  b->dtype = weight_dtype::bf16;
  b->resize(18);
  const uint16_t bits[] = {0x7fc1, 0x8000, 0x7f80, 0x0001, 0x7f7f, 0x3f80};
  for (size_t i = 0; i < 18; ++i) {
    uint16_t v = i < 6 ? bits[i] : static_cast<uint16_t>(0x3c00 + 37 * i);
    std::memcpy(b->data.data() + 2 * i, &v, 2);
  }
  return b;
}

run_result make_run_result() {
  run_result r;
  r.ok = false, r.error = "trainer died", r.steps = 31, r.groups_generated = 32;
  r.status = run_status::interrupted, r.resumed_from_step = 42, r.checkpoints = 43;
  r.checkpoint = "runs/x/checkpoints/step-00000044.ckpt", r.checkpoint_step = 44;
  r.rollouter_restarts = 45, r.sync_retries = 46, r.restartable = true;
  r.groups_trained = 33, r.groups_dropped = 34, r.groups_in_flight = 35, r.groups_filtered = 36;
  r.tokens_generated = 37, r.tokens_trained = 38, r.syncs = 39, r.wall_time_s = 40.25;
  r.train_time_s = 41.5, r.rollouters = {{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}};
  r.reward = {51, 52, 53, 54, 55}, r.queue = make_queue_stats();
  r.trainer = {61, 62, 63, 64, 65, 66, 67, 68};
  r.faults = {71, 72, 73, 74, 75, 76, 77, 78, 79};
  r.rollouters[1].faults = {0, 0, 0, 0, 81, 82};
  r.reward.faults = {0, 83, 84, 85};
  r.final_weights = {17, make_blob()};
  return r;
}

step_report make_step_report() {
  test::step_report_values v;
  v.accuracy = 4.5, v.partial_ratio = 7.5, v.sync_bytes = 15, v.params_checksum = 16.5;
  v.eval_accuracy = 19.5, v.first_group_ms = 13.75, v.last_group_ms = 13.875;
  v.first_train_ms = 13.9375;
  return test::make_step_report(v);
}

class Messages : public ::testing::Test {
 protected:
  static caf::actor_system_config& registered(caf::actor_system_config& cfg) {
    register_message_types(cfg);
    return cfg;
  }

  template <class T>
  std::vector<char> save(T& x, caf::actor_system& s) {
    std::vector<char> buf;
    caf::binary_serializer sink{s, buf};
    auto err = sink(x);
    EXPECT_FALSE(err) << s.render(err);
    return buf;
  }

  // Serializes `x`, deserializes into a fresh T, and checks all bytes were consumed.
  template <class T>
  T round_trip(T x) {
    auto buf = save(x, sys);
    T y;
    caf::binary_deserializer source{sys, buf};
    auto err = source(y);
    EXPECT_FALSE(err) << sys.render(err);
    EXPECT_EQ(source.remaining(), 0u);
    return y;
  }

  // CAF 0.17.6 pitfall: `sink(msg)` / `source(msg)` on a caf::message go through the
  // type_erased_tuple `serialize()` overload, which drops the error (an unregistered type then
  // "succeeds" with nothing written). message::save / message::load return it.
  caf::error save_message(const caf::message& msg, std::vector<char>& buf, caf::actor_system& s) {
    caf::binary_serializer sink{s, buf};
    return msg.save(sink);
  }

  caf::error load_message(caf::message& out, const std::vector<char>& buf, caf::actor_system& s) {
    caf::binary_deserializer source{s, buf};
    auto err = out.load(source);
    if (!err) EXPECT_EQ(source.remaining(), 0u);
    return err;
  }

  // The same through a type-erased caf::message, as the middleman sends it.
  template <class T>
  T message_round_trip(const T& x) {
    std::vector<char> buf;
    auto err = save_message(caf::make_message(x), buf, sys);
    EXPECT_FALSE(err) << sys.render(err);
    caf::message out;
    err = load_message(out, buf, sys);
    EXPECT_FALSE(err) << sys.render(err);
    if (out.size() != 1 || !out.match_element<T>(0)) {
      ADD_FAILURE() << "wrong message: " << caf::to_string(out);
      return T{};
    }
    return out.get_as<T>(0);
  }

  template <class T>
  void check(const T& x) {
    SCOPED_TRACE(caf::type_name<T>::value);
    expect_same(x, round_trip(x));
    expect_same(x, message_round_trip(x));
  }

  caf::actor_system_config cfg;
  caf::actor_system sys{registered(cfg)};
};

TEST_F(Messages, EveryPayloadRoundTrips) {
  check(prompt_task{(1ULL << 62) + 5, 77, 1ULL << 45, {1, -2, 3, 40000}, "ground \"truth\"\n"});
  check(make_sample(3));
  check(make_group(5));
  check(rollout_progress{3,
                         1LL << 40,
                         55,
                         12.25,
                         0.125,
                         9,
                         rollouter_state::resuming,
                         {7, 1ULL << 60},
                         {1, 2, 3, 4, 5, 6, 7, 8, 9}});
  check(trainer_status{trainer_phase::stopping, 1LL << 40});
  check(sync_status{sync_activity::joining, (1LL << 41) + 3});
  check(make_queue_stats());
  check(delivery{{make_group(1), make_group(2)}, make_queue_stats()});
  check(sync_report{14, 3.75, 1LL << 33, 4, false, true, "worker 2 unreachable"});
  check(make_step_report());
  check(rollout_counts{2, 71, 72, 73, 74, {11, 12, 13, 14, 15, 16, 17, 18, 19}});
  reward_counts rc{81, 82, 83, 84, 85, 86, 87, 181, 182, 183, 184, 185, 186};
  rc.faults = {21, 22, 23, 24, 25, 26, 27, 28, 29};
  check(rc);
  check(trainer_counts{91, 92, 93, 94, 95, 96, 97, 98, 99});
  check(make_run_result());
  check(weight_snapshot{23, make_blob()});
  check(weight_snapshot{24, make_bf16_blob()});
}

// The controller's end-of-run sum: the run's own counts plus the Reward's and each live
// rollouter's part, each added once and field by field. Catches a part left out or added twice,
// and a field added to the wrong total (each part and field has digits of its own).
TEST(FaultCounts, AddRoleFaultsAddsEachRolesPartOnce) {
  run_result r;
  r.faults = {1, 0, 0, 0, 0, 0, 1, 1, 1};  // the controller's own: kills, crash, checkpoints
  r.reward.faults = {0, 10, 100, 1000};
  r.rollouters.resize(2);
  r.rollouters[0].faults = {0, 0, 0, 0, 10000, 100000};
  r.rollouters[1].faults = {0, 0, 0, 0, 20000, 200000};
  add_role_faults(r);
  EXPECT_EQ(r.faults.rollouter_kills, 1);
  EXPECT_EQ(r.faults.reward_worker_kills, 10);
  EXPECT_EQ(r.faults.reward_throws, 100);
  EXPECT_EQ(r.faults.reward_hangs, 1000);
  EXPECT_EQ(r.faults.sync_drops, 30000);
  EXPECT_EQ(r.faults.sync_delays, 300000);
  EXPECT_EQ(r.faults.trainer_crashes, 1);
  EXPECT_EQ(r.faults.checkpoints_damaged, 1);
  EXPECT_EQ(r.faults.checkpoints_skipped, 1);
}

// CAF 0.17.6's own float packing turns -0 into +0, NaN into 1, subnormals into huge values and
// loops forever on inf; a scored sample crosses nodes, so its floats must travel as raw bits.
// Catches: logprobs/reward/advantage serialized as plain floats again (this test then hangs on
// inf or fails on the others; ctest's timeout bounds it).
TEST_F(Messages, SampleFloatsCrossBitExactIncludingInfNanSubnormalAndNegativeZero) {
  const float special[] = {
      -0.0f,   std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
      -1e-39f, -std::numeric_limits<float>::infinity(), -87.25f};
  auto s = make_sample(1);
  s.logprobs.assign(std::begin(special), std::end(special));
  s.response.resize(s.logprobs.size(), 7);
  s.versions.resize(s.logprobs.size(), 1);
  s.reward = -std::numeric_limits<double>::infinity();
  s.advantage = 1e-310;  // subnormal double
  for (auto y : {round_trip(s), message_round_trip(s)}) {
    ASSERT_EQ(y.logprobs.size(), s.logprobs.size());
    for (size_t i = 0; i < s.logprobs.size(); ++i)
      EXPECT_EQ(float_bits(y.logprobs[i]), float_bits(s.logprobs[i])) << "logprob " << i;
    EXPECT_EQ(double_bits(y.reward), double_bits(s.reward));
    EXPECT_EQ(double_bits(y.advantage), double_bits(s.advantage));
  }
}

TEST_F(Messages, RegisteredContainersAndMultiElementMessages) {
  auto msg =
      caf::make_message(put_atom::value, std::vector<prompt_task>{{1, 2, 9, {3}, "4"}},
                        std::vector<scored_group>{make_group(9)},
                        std::vector<rollout_counts>{{5, 6, 7, 8, 9}}, std::vector<int32_t>{-1, 2},
                        std::vector<float>{0.5f}, std::vector<char>{'x', '\0', 'y'}, int32_t{7});
  std::vector<char> buf;
  auto err = save_message(msg, buf, sys);
  ASSERT_FALSE(err) << sys.render(err);
  caf::message out;
  err = load_message(out, buf, sys);
  ASSERT_FALSE(err) << sys.render(err);
  ASSERT_TRUE((out.match_elements<put_atom, std::vector<prompt_task>, std::vector<scored_group>,
                                  std::vector<rollout_counts>, std::vector<int32_t>,
                                  std::vector<float>, std::vector<char>, int32_t>()));
  expect_same(out.get_as<std::vector<prompt_task>>(1).at(0), prompt_task{1, 2, 9, {3}, "4"});
  expect_same(out.get_as<std::vector<scored_group>>(2).at(0), make_group(9));
  expect_same(out.get_as<std::vector<rollout_counts>>(3).at(0), rollout_counts{5, 6, 7, 8, 9});
  EXPECT_EQ(out.get_as<std::vector<int32_t>>(4), (std::vector<int32_t>{-1, 2}));
  EXPECT_EQ(out.get_as<std::vector<float>>(5), std::vector<float>{0.5f});
  EXPECT_EQ(out.get_as<std::vector<char>>(6), (std::vector<char>{'x', '\0', 'y'}));
  EXPECT_EQ(out.get_as<int32_t>(7), 7);
}

TEST_F(Messages, UnregisteredTypesFailToSerialize) {
  // Control: without registration a message cannot be saved, so the passing tests above really
  // depend on register_message_types.
  std::vector<char> buf;
  EXPECT_EQ(save_message(caf::make_message(unregistered_payload{5}), buf, sys),
            caf::sec::unknown_type);
  caf::actor_system_config bare_cfg;
  caf::actor_system bare{bare_cfg};
  auto task = caf::make_message(prompt_task{1, 2, 9, {3}, "4"});
  std::vector<char> bare_buf;
  EXPECT_EQ(save_message(task, bare_buf, bare), caf::sec::unknown_type);
  // And a node that did not register cannot read what a registered one sent.
  std::vector<char> good;
  ASSERT_FALSE(save_message(task, good, sys));
  caf::message out;
  EXPECT_EQ(load_message(out, good, bare), caf::sec::unknown_type);
  EXPECT_EQ(out.size(), 0u);
}

TEST_F(Messages, SnapshotWireFormatIsVersionThenMsgpackBytes) {
  weight_snapshot w{23, make_blob()};
  auto packed = pack_weights(w);
  int64_t version = 23;
  std::vector<char> expected;
  caf::binary_serializer sink{sys, expected};
  ASSERT_FALSE(sink(version, packed));
  EXPECT_EQ(save(w, sys), expected);
  expect_same(w, unpack_weights(packed.data(), packed.size()));
}

// A GPU trainer's device snapshot (here its CPU form: the same flat tensor) crosses a process
// boundary as the host snapshot's bytes. Bug it catches: serializing the empty host buffer of a
// device snapshot, or a throw from pack_weights inside CAF's serializer.
TEST_F(Messages, DeviceSnapshotCrossesAsItsHostBytes) {
  auto model = init_causal_lm(test::tiny_model_config(), 0.3, 4, torch::kCPU);
  auto dev = snapshot_weights(*model, 9, weight_dtype::float32, snapshot_place::device);
  ASSERT_TRUE(dev.blob->on_device());
  auto y = round_trip(dev);
  EXPECT_EQ(y.version, 9);
  ASSERT_NE(y.blob, nullptr);
  EXPECT_EQ(y.blob->data, snapshot_weights(*model, 9).blob->data);
}

TEST_F(Messages, EmptySnapshotRoundTripsToNullBlob) {
  auto y = round_trip(weight_snapshot{5, nullptr});
  EXPECT_EQ(y.version, 5);
  EXPECT_EQ(y.blob, nullptr);
  EXPECT_THROW(pack_weights(weight_snapshot{5, nullptr}), std::invalid_argument);
  // A blob without tensors is not the same as no blob.
  auto z = round_trip(weight_snapshot{6, std::make_shared<weight_blob>()});
  EXPECT_EQ(z.version, 6);
  ASSERT_NE(z.blob, nullptr);
  EXPECT_TRUE(z.blob->names.empty());
  EXPECT_TRUE(z.blob->data.empty());
}

// No floats at all: the bin body is empty, and neither side may hand memcpy a null pointer
// (UBSan's nonnull-attribute check fails here if one does).
TEST_F(Messages, SnapshotWithoutDataPacksAndUnpacks) {
  auto packed = pack_weights(weight_snapshot{7, std::make_shared<weight_blob>()});
  auto w = unpack_weights(packed.data(), packed.size());
  EXPECT_EQ(w.version, 7);
  ASSERT_NE(w.blob, nullptr);
  EXPECT_TRUE(w.blob->names.empty());
  EXPECT_TRUE(w.blob->shapes.empty());
  EXPECT_TRUE(w.blob->data.empty());
  // A tensor with a zero dimension holds no floats either.
  auto b = std::make_shared<weight_blob>();
  b->names = {"e"};
  b->shapes = {{0, 3}};
  weight_snapshot zero{8, b};
  auto packed_zero = pack_weights(zero);
  expect_same(zero, unpack_weights(packed_zero.data(), packed_zero.size()));
}

TEST_F(Messages, LargeSnapshotRoundTripsAndPrintsShort) {
  auto b = std::make_shared<weight_blob>();
  b->names = {"w"};
  b->shapes = {{1000, 1000}};
  b->resize(1000000);
  for (int64_t i = 0; i < b->numel(); ++i)
    b->floats()[i] = std::sin(static_cast<float>(i));
  weight_snapshot w{41, b};
  auto buf = save(w, sys);
  EXPECT_GE(buf.size(), 4000000u);
  EXPECT_LE(buf.size(), 4000000u + 256u);  // the floats go over the wire once
  expect_same(w, round_trip(w));
  // In one process a message shares the blob instead of copying it.
  EXPECT_EQ(caf::make_message(w).get_as<weight_snapshot>(0).blob.get(), b.get());

  auto text = caf::to_string(caf::make_message(w));
  EXPECT_LT(text.size(), 100u) << text.substr(0, 200);
  EXPECT_NE(text.find("41"), std::string::npos) << text;
  EXPECT_NE(text.find("4000000"), std::string::npos) << text;
  EXPECT_LT(caf::deep_to_string(w).size(), 100u);
  run_result r;
  r.final_weights = w;
  EXPECT_LT(caf::deep_to_string(r).size(), 1000u);
}

// Hand-built msgpack maps for unpack_weights; `skip` leaves a key out.
template <class Names = std::vector<std::string>>
std::vector<char> pack_map(const Names& names, const std::vector<std::vector<int64_t>>& shapes,
                           size_t data_bytes, const std::string& skip = "", int64_t version = 3) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(&buf);
  pk.pack_map(4 - (skip.empty() ? 0 : 1));
  if (skip != "version") pk.pack(std::string("version")), pk.pack(version);
  if (skip != "names") pk.pack(std::string("names")), pk.pack(names);
  if (skip != "shapes") pk.pack(std::string("shapes")), pk.pack(shapes);
  if (skip != "data") {
    std::vector<char> data(data_bytes, 0);
    pk.pack(std::string("data"));
    pk.pack_bin(static_cast<uint32_t>(data_bytes));
    pk.pack_bin_body(data.data(), static_cast<uint32_t>(data_bytes));
  }
  return std::vector<char>(buf.data(), buf.data() + buf.size());
}

template <class... Ts>
std::vector<char> pack_values(const Ts&... xs) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(&buf);
  (pk.pack(xs), ...);
  return std::vector<char>(buf.data(), buf.data() + buf.size());
}

void expect_rejected(const std::vector<char>& bytes, const char* what) {
  EXPECT_THROW(unpack_weights(bytes.data(), bytes.size()), std::runtime_error) << what;
}

TEST_F(Messages, UnpackWeightsRejectsCorruptInput) {
  auto good = pack_map({"a", "b"}, {{2, 3}, {4}}, 40);
  auto w = unpack_weights(good.data(), good.size());  // control: the hand-built map is valid
  EXPECT_EQ(w.version, 3);
  EXPECT_EQ(w.blob->numel(), 10);
  EXPECT_EQ(w.blob->dtype, weight_dtype::float32);  // no "dtype" key: what older senders wrote

  auto full = pack_weights(weight_snapshot{9, make_blob()});
  for (size_t n = 0; n < full.size(); ++n)
    EXPECT_THROW(unpack_weights(full.data(), n), std::runtime_error) << "truncated to " << n;
  expect_rejected(pack_values(std::vector<int>{1, 2, 3}), "an array");
  expect_rejected(pack_values(42), "an integer");
  expect_rejected(pack_map({"a", "b"}, {{2, 3}, {4}}, 36), "data one float short");
  expect_rejected(pack_map({"a", "b"}, {{2, 3}, {4}}, 44), "data one float long");
  expect_rejected(pack_map({"a", "b"}, {{2, 3}, {4}}, 41), "data not a multiple of 4");
  expect_rejected(pack_map({"a", "b"}, {{10}}, 40), "names and shapes differ in count");
  expect_rejected(pack_map({"a"}, {{-2, -2}}, 16), "negative dimensions with a positive product");
  for (const char* key : {"names", "shapes", "data"})
    expect_rejected(pack_map({"a"}, {{2}}, 8, key), key);
  expect_rejected(pack_map({"a"}, {{2}}, 8, "", -1), "negative version");
  // Versions are int64 end to end: one past int32 survives the round trip.
  const int64_t big = (int64_t{1} << 31) + 5;
  auto packed = pack_map({"a"}, {{2}}, 8, "", big);
  EXPECT_EQ(unpack_weights(packed.data(), packed.size()).version, big);
  expect_rejected(pack_map(7, {}, 0), "names not an array");
  expect_rejected(pack_values(std::map<int, int>{{1, 2}}), "a key that is not a string");
  expect_rejected(pack_values(std::map<std::string, std::vector<float>>{
                      {"names", {}}, {"shapes", {}}, {"data", {1.0f}}}),
                  "data as an array, not bin");
}

// bf16 snapshots (rollout.dtype=bf16) carry 2-byte elements under a "dtype" key, which may come
// after the data. Catches the element count taken as bytes / 4 whatever the dtype, the dtype
// key ignored or read only before "data", and an unknown dtype taken as float32.
TEST_F(Messages, Bf16SnapshotsRoundTripInTwoByteElements) {
  weight_snapshot w{24, make_bf16_blob()};
  auto packed = pack_weights(w);
  expect_same(w, unpack_weights(packed.data(), packed.size()));
  expect_same(w, round_trip(w));
  EXPECT_THROW(w.blob->floats(), std::logic_error);  // not float32
  // {2, 3} and {4}: 10 elements; "dtype" after "data".
  auto map = [](const std::string& dtype, size_t bytes) {
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(&buf);
    pk.pack_map(5);
    pk.pack(std::string("version")), pk.pack(int64_t{3});
    pk.pack(std::string("names")), pk.pack(std::vector<std::string>{"a", "b"});
    pk.pack(std::string("shapes")), pk.pack(std::vector<std::vector<int64_t>>{{2, 3}, {4}});
    std::vector<char> data(bytes, 0);
    pk.pack(std::string("data"));
    pk.pack_bin(static_cast<uint32_t>(bytes));
    pk.pack_bin_body(data.data(), static_cast<uint32_t>(bytes));
    pk.pack(std::string("dtype")), pk.pack(dtype);
    return std::vector<char>(buf.data(), buf.data() + buf.size());
  };
  auto ok = map("bf16", 20);
  auto u = unpack_weights(ok.data(), ok.size());
  EXPECT_EQ(u.blob->dtype, weight_dtype::bf16);
  EXPECT_EQ(u.blob->numel(), 10);
  auto f32 = map("float32", 40);
  EXPECT_EQ(unpack_weights(f32.data(), f32.size()).blob->numel(), 10);
  expect_rejected(map("bf16", 40), "float32-sized data under a bf16 dtype");
  expect_rejected(map("bf16", 21), "an odd byte count for bf16");
  expect_rejected(map("float32", 20), "bf16-sized data under float32");
  expect_rejected(map("fp8", 10), "an unknown dtype");
}

// Element counts must not wrap: 4 * (2^62 + 1) is 4 modulo 2^64.
TEST_F(Messages, UnpackWeightsRejectsShapesWhoseSizeOverflows) {
  expect_rejected(pack_map({"a"}, {{4, (int64_t{1} << 62) + 1}}, 16), "overflowing shape");
}

TEST_F(Messages, CorruptSnapshotIsADeserializationErrorNotAnException) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  ASSERT_FALSE(sink(int64_t{3}, pack_map({"a"}, {{3}}, 8)));  // data one float short
  weight_snapshot y;
  caf::binary_deserializer source{sys, buf};
  caf::error err;
  EXPECT_NO_THROW(err = source(y));
  EXPECT_EQ(err, caf::sec::invalid_argument);
  EXPECT_EQ(y.blob, nullptr);
}

// metrics.jsonl carries every update metric under its field-list name with its value, and the
// run-wide fields keep theirs (a metric dropped from the writer, or two swapped, fails here).
TEST(MetricsLine, CarriesEveryUpdateMetricByName) {
  auto r = make_step_report();
  auto j = nlohmann::json::parse(metrics_line(r, 40.0, 1000, 0.25, 7, 1));
  for_each_field(r.update, [&](const char* name, const auto& v) {
    ASSERT_TRUE(j.contains(name)) << name;
    EXPECT_EQ(j[name].get<std::decay_t<decltype(v)>>(), v) << name;
  });
  EXPECT_EQ(j["step"], r.step);
  EXPECT_EQ(j["samples"], r.samples);
  EXPECT_EQ(j["dropped_groups"], 7);
  EXPECT_EQ(j["tokens_generated"], 1000);
  EXPECT_DOUBLE_EQ(j["step_time_s"].get<double>(), r.step_ms / 1000.0);
  // tokens per second per device: trained tokens over the step time, 1 rollouter + 1 trainer.
  EXPECT_DOUBLE_EQ(j["tpspd"].get<double>(), r.update.tokens_trained / (r.step_ms / 1000.0) / 2.0);
  EXPECT_EQ(j["queue_depth"], r.queue.depth);
  EXPECT_EQ(j["eval_accuracy"], r.eval_accuracy);
  r.eval_accuracy = -1;  // no evaluation this step: no key
  EXPECT_FALSE(
      nlohmann::json::parse(metrics_line(r, 40.0, 1000, 0.25, 7, 1)).contains("eval_accuracy"));
}

}  // namespace
// Found by tests/fuzz/fuzz_weights: a packed snapshot whose map declares 2^32 - 1 entries
// made msgpack allocate for all of them before reading one. The decoder now bounds every
// count by the input's size and refuses it, naming the overflow.
TEST(WeightsDecoding, AHugeDeclaredCountIsRefusedNotAllocated) {
  const std::string bytes("\xdf\xff\xff\xff\xff", 5);
  try {
    unpack_weights(bytes.data(), bytes.size());
    FAIL() << "accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("size overflow"), std::string::npos) << e.what();
  }
}

}  // namespace asyncrl
