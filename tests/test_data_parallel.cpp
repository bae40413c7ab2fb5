// The data-parallel trainer (docs/scaling.md): W ranks, each a policy_trainer joined to a Gloo
// group on loopback (threads here; processes in tests/dp/), accumulating their token-balanced
// share of each step's micro-batches, must take the update one trainer takes on all of them:
// the same weights bit for bit (the ranks sum float64 gradient sums; a float64 rounding
// difference could in principle flip a float32 rounding, which these fixed seeds never hit),
// with the optimizer state sharded or not, across a checkpoint written by W ranks and read by
// another number. A rank that never joins, or leaves mid-step, is a dist_error, not a hang.

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "runtime/config/run_config.hpp"
#include "runtime/dist/dist_group.hpp"
#include "runtime/model/model.hpp"
#include "runtime/train/dp_follower.hpp"
#include "runtime/train/dp_leader.hpp"
#include "runtime/train/dp_split.hpp"
#include "runtime/train/grad_reducer.hpp"
#include "runtime/train/policy_trainer.hpp"
#include "runtime/train/sample_codec.hpp"
#include "runtime/train/shard_layout.hpp"
#include "tests/tiny_model.hpp"
#include "tests/trainer_samples.hpp"

using namespace asyncrl;

namespace {

constexpr int kGroups = 6, kGroupSize = 4;

policy_trainer_params settings(int64_t bucket_bytes = kPolicyTrainerDefaults.grad_bucket_bytes,
                               bool float64_sums = true) {
  policy_trainer_params p;
  p.grad_bucket_bytes = bucket_bytes;
  p.loss = loss_kind::grpo;
  p.kl_coef = 0.05;
  p.lr = 1e-2;  // large enough that every step moves every weight
  p.weight_decay = 0.01;
  p.grad_clip = 0.5;  // below the norms here: the global-norm clip is exercised
  p.deterministic_accumulation = float64_sums;
  return p;
}

// Rank r's model starts from another seed: join_data_parallel must replace it by rank 0's.
CausalLM model_for(int rank) {
  return init_causal_lm(test::tiny_model_config(), 0.3, 11 + static_cast<uint64_t>(rank),
                        torch::kCPU);
}

// Step s's batch: kGroups prompts x kGroupSize responses, one micro-batch per group.
std::vector<scored_sample> batch(int s) {
  test::sample_draw d;
  d.groups = kGroups, d.group_size = kGroupSize, d.prompt_max = 6;
  d.response_min = 1, d.response_max = 11;  // uneven groups: the split balances tokens
  return test::random_samples(d, 1000 + static_cast<uint64_t>(s));
}

// Steps [first, first + n) on this rank's share. `mark_last`: the rank's last micro-batch of each
// step says so (its backward then sums the gradients over the ranks as it goes); a rank with no
// micro-batch closes its gradients itself.
std::vector<update_stats> train(policy_trainer& pt, int rank, int world, int first, int n,
                                bool mark_last = false) {
  std::vector<update_stats> out;
  for (int s = first; s < first + n; ++s) {
    const auto samples = batch(s);
    std::vector<int64_t> tokens(kGroups, 0);
    for (const auto& x : samples)
      tokens[x.group_id] += static_cast<int64_t>(x.response.size());
    const auto owner = assign_by_tokens(tokens, world);
    pt.begin_batch();
    int mine = 0;
    for (int g = 0; g < kGroups; ++g)
      mine += owner[g] == rank;
    for (int g = 0; g < kGroups; ++g) {
      if (owner[g] != rank) continue;
      std::vector<const scored_sample*> mb;
      for (const auto& x : samples)
        if (static_cast<int>(x.group_id) == g) mb.push_back(&x);
      pt.accumulate(mb, mark_last && --mine == 0);
    }
    if (mark_last) pt.close_gradients();  // a no-op when the last backward already did
    out.push_back(pt.step());
  }
  return out;
}

struct rank_out {
  std::vector<at::Tensor> params;
  std::vector<update_stats> stats;
  int64_t state_bytes = 0;
  std::string state;  // save_state() after the steps, when asked
  std::string error;
};

std::vector<at::Tensor> params_of(const policy_trainer& pt) {
  std::vector<at::Tensor> v;
  for (auto& p : pt.policy()->parameters())
    v.push_back(p.detach().clone());
  return v;
}

struct run_spec {
  int world = 1;
  bool shard = false;
  int steps = 3;
  std::string resume;  // a saved state to load before step `first`
  int first = 0;
  bool save = false;
  bool mark_last = false;  // train()'s
  int64_t bucket_bytes = kPolicyTrainerDefaults.grad_bucket_bytes;
  bool float64_sums = true;
};

// One trainer per rank, each on its own thread and Gloo group (world > 1), or one plain trainer.
std::vector<rank_out> run(const run_spec& spec) {
  std::vector<rank_out> out(spec.world);
  auto body = [&](int r, dist_group* g) {
    try {
      policy_trainer pt(model_for(r), settings(spec.bucket_bytes, spec.float64_sums));
      if (g) pt.join_data_parallel(*g, spec.shard);
      if (!spec.resume.empty()) pt.load_state(spec.resume);
      out[r].stats = train(pt, r, spec.world, spec.first, spec.steps, spec.mark_last);
      out[r].params = params_of(pt);
      out[r].state_bytes = pt.optimizer_state_bytes();
      if (spec.save) out[r].state = pt.save_state();
    } catch (const std::exception& e) {
      out[r].error = e.what();
    }
  };
  if (spec.world == 1) {
    body(0, nullptr);
    return out;
  }
  std::promise<int> port;
  auto port_f = port.get_future().share();
  std::vector<std::thread> threads;
  for (int r = 0; r < spec.world; ++r)
    threads.emplace_back([&, r] {
      dist_options o;
      o.rank = r, o.world = spec.world, o.timeout = std::chrono::milliseconds(20000);
      std::unique_ptr<dist_group> g;
      bool told = false;  // rank 0 gave its port (a second set_value would throw)
      try {
        if (r == 0) {
          g = dist_group::connect(o, [&](int p) { port.set_value(p), told = true; });
        } else {
          o.port = port_f.get();
          g = dist_group::connect(o);
        }
      } catch (const std::exception& e) {
        if (r == 0 && !told) port.set_value(-1);
        out[r].error = e.what();
        return;
      }
      body(r, g.get());
    });
  for (auto& t : threads)
    t.join();
  return out;
}

// Elements of a that are not bit for bit those of b.
int64_t differing(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  int64_t n = 0;
  for (size_t i = 0; i < a.size(); ++i)
    n += a[i].ne(b[i]).sum().item<int64_t>();
  return n;
}

void expect_same_run(const std::vector<rank_out>& ranks, const rank_out& one) {
  ASSERT_TRUE(one.error.empty()) << one.error;
  for (size_t r = 0; r < ranks.size(); ++r) {
    ASSERT_TRUE(ranks[r].error.empty()) << "rank " << r << ": " << ranks[r].error;
    EXPECT_EQ(differing(ranks[r].params, one.params), 0) << "rank " << r;
    ASSERT_EQ(ranks[r].stats.size(), one.stats.size());
    for (size_t s = 0; s < one.stats.size(); ++s) {
      const auto &a = ranks[r].stats[s], &b = one.stats[s];
      EXPECT_EQ(a.tokens_trained, b.tokens_trained);
      EXPECT_EQ(a.samples_trained, b.samples_trained);
      EXPECT_EQ(a.micro_batches, b.micro_batches);
      // float64 sums in another order: rounding only.
      EXPECT_NEAR(a.loss, b.loss, 1e-12 * std::max(1.0, std::abs(b.loss)));
      EXPECT_NEAR(a.kl, b.kl, 1e-12);
      EXPECT_NEAR(a.entropy, b.entropy, 1e-12 * std::max(1.0, b.entropy));
      EXPECT_EQ(a.grad_norm, b.grad_norm) << "step " << s;  // from the same reduced gradient
      EXPECT_EQ(a.clip_frac, b.clip_frac);
    }
  }
}

}  // namespace

TEST(DataParallelSplit, BalancesTokensLargestFirst) {
  // 9, 7, 5, 4, 3 over 2 ranks: 9 -> 0, 7 -> 1, 5 -> 1 (7 < 9), 4 -> 0 (9 < 12), 3 -> 1 (12 < 13).
  EXPECT_EQ(assign_by_tokens({5, 9, 3, 7, 4}, 2), (std::vector<int>{1, 0, 1, 1, 0}));
  // Ties go to the lower index and the lower rank.
  EXPECT_EQ(assign_by_tokens({4, 4, 4}, 3), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(assign_by_tokens({}, 2), std::vector<int>{});
  EXPECT_EQ(assign_by_tokens({1, 2}, 1), (std::vector<int>{0, 0}));
}

TEST(ShardLayout, EveryElementOnceAlignedInsideItsParameter) {
  const std::vector<int64_t> numels{1000, 7, 300, 64, 5000};
  for (int world : {1, 2, 3, 5, 8}) {
    const auto l = make_shard_layout(numels, world);
    std::vector<std::vector<int>> seen(numels.size());
    for (size_t i = 0; i < numels.size(); ++i)
      seen[i].assign(numels[i], 0);
    int64_t total = 0;
    for (int r = 0; r < world; ++r) {
      int64_t sum = 0;
      for (const auto& s : l.ranks[r]) {
        EXPECT_EQ(s.begin % kShardAlign, 0) << "world " << world << " rank " << r;
        for (int64_t k = s.begin; k < s.begin + s.length; ++k)
          ++seen[s.param][k];
        sum += s.length;
      }
      EXPECT_EQ(sum, l.elements[r]);
      total += sum;
      // Balanced to within an alignment step of the even share.
      EXPECT_LE(l.elements[r], 6371 / world + 2 * kShardAlign) << "world " << world;
    }
    EXPECT_EQ(total, 6371);
    for (auto& v : seen)
      for (int c : v)
        ASSERT_EQ(c, 1) << "world " << world;
  }
}

TEST(DataParallel, TwoAndThreeRanksTakeTheOneRankUpdate) {
  const auto one = run({});
  for (int world : {2, 3}) {
    SCOPED_TRACE("world " + std::to_string(world));
    run_spec s;
    s.world = world;
    expect_same_run(run(s), one[0]);
  }
}

// The ranks' sum issued bucket by bucket from inside a rank's last backward must be the sum
// issued after it: the same buckets summing the same values, bit for bit, in float64 and in
// .grad mode. 2 KiB buckets make many of them (the tied embedding, final only at the very end
// of the backward, holds back the last). Catches a bucket issued before all its gradients are
// final, a gradient counted twice (by the hook and by autograd's own accumulation into .grad),
// a parameter the backward never reaches left out, and buckets issued in another order on one
// rank (Gloo pairs each rank's collectives by issue order: the sums would be of wrong parts).
TEST(DataParallel, SummingDuringTheLastBackwardTakesTheSameUpdate) {
  for (bool float64_sums : {true, false})
    for (int world : {2, 3}) {
      SCOPED_TRACE("world " + std::to_string(world) + (float64_sums ? ", float64" : ", .grad"));
      run_spec after;
      after.world = world, after.bucket_bytes = 2048, after.float64_sums = float64_sums;
      auto during = after;
      during.mark_last = true;
      const auto a = run(after), b = run(during);
      for (int r = 0; r < world; ++r) {
        ASSERT_TRUE(a[r].error.empty()) << a[r].error;
        ASSERT_TRUE(b[r].error.empty()) << b[r].error;
        EXPECT_EQ(differing(b[r].params, a[r].params), 0) << "rank " << r;
        for (size_t s = 0; s < a[r].stats.size(); ++s)
          EXPECT_EQ(b[r].stats[s].grad_norm, a[r].stats[s].grad_norm) << "step " << s;
      }
      if (float64_sums && world == 2) expect_same_run(b, run({}).front());
    }
}

// Buckets, offsets and the refusals of the reducer, in a group of one (the sum is the rank's
// own): a wrong offset or shape would hand one parameter another's values.
TEST(GradReducer, BucketsFollowTheBackwardAndRefuseASecondGradient) {
  dist_options o;
  o.timeout = std::chrono::milliseconds(20000);
  auto g = dist_group::connect(o);
  const std::vector<int64_t> numel{10, 20, 30, 5};
  std::vector<at::Tensor> params{at::zeros({10}), at::zeros({4, 5}), at::zeros({30}),
                                 at::zeros({5})};
  // float64 sums, at most 35 elements a bucket, from the last parameter back.
  grad_reducer red(*g, params, at::kDouble, 35 * 8);
  EXPECT_EQ(red.buckets(), (std::vector<std::vector<size_t>>{{3, 2}, {1, 0}}));
  auto value = [&](size_t i) { return at::full({numel[i]}, double(i + 1), at::kDouble); };
  for (int round = 0; round < 2; ++round) {  // the reducer resets for the next step
    EXPECT_FALSE(red.started());
    red.ready(1, value(1).view({4, 5}));
    EXPECT_TRUE(red.started());
    red.ready_rest(value);
    std::vector<at::Tensor> got(4);
    red.finish([&](size_t i, const at::Tensor& t) { got[i] = t.clone(); });
    for (size_t i = 0; i < 4; ++i)
      EXPECT_TRUE(at::equal(got[i], value(i).view(params[i].sizes()))) << "parameter " << i;
  }
  // A parameter final twice in one step (its bucket may have left with a partial sum), and a
  // sum of the wrong size, are errors at the latest when the step's sum is collected.
  red.ready(0, value(0));
  red.ready(0, value(0));
  EXPECT_THROW(red.ready_rest(value), std::logic_error);
  EXPECT_THROW(red.finish([](size_t, const at::Tensor&) {}), std::logic_error);
  red.ready(2, value(3));
  EXPECT_THROW(red.ready_rest(value), std::logic_error);
  EXPECT_THROW(red.finish([](size_t, const at::Tensor&) {}), std::logic_error);
  EXPECT_FALSE(red.started());
}

TEST(DataParallel, ShardedOptimizerTakesTheUnshardedUpdateWithItsStateSplit) {
  const auto one = run({});
  for (int world : {2, 3}) {
    SCOPED_TRACE("world " + std::to_string(world));
    run_spec s;
    s.world = world;
    s.shard = true;
    const auto ranks = run(s);
    expect_same_run(ranks, one[0]);
    int64_t sum = 0;
    for (const auto& r : ranks) {
      sum += r.state_bytes;
      // About 1/W of the moments each: the optimizer's share falls W-fold.
      EXPECT_LE(r.state_bytes, one[0].state_bytes / world + 2 * 8 * kShardAlign * 13);
      EXPECT_GT(r.state_bytes, 0);
    }
    EXPECT_EQ(sum, one[0].state_bytes);  // every moment in exactly one shard
  }
}

TEST(DataParallel, ShardedCheckpointResumesBitwiseWithTheSameOrAnotherRankCount) {
  run_spec full;
  full.world = 2, full.shard = true, full.steps = 4;
  const auto uninterrupted = run(full);
  run_spec first = full;
  first.steps = 2, first.save = true;
  const auto saved = run(first);
  ASSERT_TRUE(saved[0].error.empty()) << saved[0].error;
  ASSERT_TRUE(saved[1].error.empty()) << saved[1].error;
  struct resume_case {
    int world;
    bool shard;
    int from_rank;  // every rank gathers the whole state: any rank's bytes resume the run
  };
  for (auto c : {resume_case{2, true, 0}, {3, true, 1}, {1, false, 0}, {2, false, 1}}) {
    SCOPED_TRACE("resumed on " + std::to_string(c.world) + (c.shard ? " sharded" : " unsharded") +
                 " from rank " + std::to_string(c.from_rank) + "'s bytes");
    run_spec rest;
    rest.world = c.world, rest.shard = c.shard, rest.steps = 2, rest.first = 2;
    rest.resume = saved[c.from_rank].state;
    const auto resumed = run(rest);
    for (const auto& r : resumed) {
      ASSERT_TRUE(r.error.empty()) << r.error;
      EXPECT_EQ(differing(r.params, uninterrupted[0].params), 0);
      EXPECT_EQ(r.stats.back().grad_norm, uninterrupted[0].stats.back().grad_norm);
    }
  }
}

TEST(DataParallel, ARankThatNeverJoinsIsAnErrorNamingIt) {
  dist_options o;
  o.world = 3, o.timeout = std::chrono::milliseconds(1500);
  try {
    dist_group::connect(o);
    FAIL() << "rank 0 formed a group of 3 alone";
  } catch (const dist_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank(s) 1, 2 did not join"), std::string::npos) << what;
    EXPECT_NE(what.find("within 1500 ms"), std::string::npos) << what;
  }
}

TEST(DataParallel, ARankThatLeavesMidStepFailsTheOthersInsteadOfHanging) {
  std::promise<int> port;
  std::string error0;
  std::thread r0([&] {
    dist_options o;
    o.world = 2, o.timeout = std::chrono::milliseconds(20000);
    try {
      auto g = dist_group::connect(o, [&](int p) { port.set_value(p); });
      policy_trainer pt(model_for(0), settings());
      pt.join_data_parallel(*g, false);
      train(pt, 0, 2, 0, 1);
      error0 = "step finished without rank 1";
    } catch (const std::exception& e) {
      error0 = e.what();
    }
  });
  {
    dist_options o;
    o.rank = 1, o.world = 2, o.port = port.get_future().get();
    auto g = dist_group::connect(o);
    policy_trainer pt(model_for(1), settings());
    pt.join_data_parallel(*g, false);
  }  // rank 1's group closes before its step: as if its process died
  r0.join();
  EXPECT_NE(error0.find("data-parallel rank 0 of 2: allreduce failed"), std::string::npos)
      << error0;
}

TEST(SampleCodec, RoundTripsEveryFieldTheTrainerReadsAndRefusesDamage) {
  test::sample_draw d;
  d.groups = 2, d.group_size = 3, d.version_cycle = 3;
  const auto samples = test::random_samples(d, 5);
  const auto bytes = encode_samples(test::ptrs(samples));
  const auto back = decode_samples(bytes);
  ASSERT_EQ(back.size(), samples.size());
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].uid, samples[i].uid);
    EXPECT_EQ(back[i].group_id, samples[i].group_id);
    EXPECT_EQ(back[i].index, samples[i].index);
    EXPECT_EQ(back[i].prompt, samples[i].prompt);
    EXPECT_EQ(back[i].response, samples[i].response);
    EXPECT_EQ(back[i].logprobs, samples[i].logprobs);
    EXPECT_EQ(back[i].versions, samples[i].versions);
    EXPECT_EQ(back[i].advantage, samples[i].advantage);
  }
  EXPECT_THROW(decode_samples(bytes.substr(0, bytes.size() - 1)), std::runtime_error);
  EXPECT_THROW(decode_samples(bytes + "x"), std::runtime_error);
}

TEST(DataParallelConfig, DeviceListsAndRankCountsAreCheckedNamingTheKey) {
  auto lc = load_config_text("trainer:\n  devices: [cpu, cpu, cpu]\nrollout:\n  devices: [cpu]\n",
                             "dp.yaml", {});
  EXPECT_EQ(lc->cfg.trainer.devices, (std::vector<std::string>{"cpu", "cpu", "cpu"}));
  EXPECT_EQ(data_parallel_ranks(lc->cfg.trainer), 3);  // the length of trainer.devices
  EXPECT_EQ(lc->schema.value("trainer.devices"), "[cpu, cpu, cpu]");
  // The dump reads back as the same list (checkpoints and the ranks' config use it).
  auto again = load_config_text(lc->schema.dump_yaml(), "dump", {});
  EXPECT_EQ(again->cfg.trainer.devices, lc->cfg.trainer.devices);
  auto o = load_config_text("", "x", {"trainer.devices=[cpu,cuda:1]"});
  EXPECT_EQ(o->cfg.trainer.devices, (std::vector<std::string>{"cpu", "cuda:1"}));
  auto expect_error = [](const std::string& yaml, const std::vector<std::string>& over,
                         const std::string& part) {
    try {
      load_config_text(yaml, "dp.yaml", over);
      ADD_FAILURE() << "accepted; expected an error with: " << part;
    } catch (const config_error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error("trainer:\n  devices: [cpu, gpu:0]\n", {}, "dp.yaml:2: key 'trainer.devices'");
  expect_error("", {"trainer.devices=[cpu,cpu]", "trainer.data_parallel=3"},
               "key 'trainer.data_parallel': is 3 but trainer.devices names 2 devices");
  expect_error("", {"trainer.data_parallel=2", "trainer.remote_ranks=2"},
               "key 'trainer.remote_ranks': must be below");
  expect_error("trainer:\n  lr: [1, 2]\n", {}, "key 'trainer.lr': lists are not supported");
  expect_error("", {"trainer.data_parallel=2", "trainer.dist_listen=10.1.2.3:0"},
               "key 'trainer.dist_listen'");
  // A wildcard address is no address the other ranks can connect to, even where allowed.
  expect_error(
      "",
      {"trainer.data_parallel=2", "trainer.dist_listen=0.0.0.0:0", "cluster.allow_insecure=true"},
      "key 'trainer.dist_listen': '0.0.0.0:0' names no address");
  // Remote ranks get their place through the cluster listener.
  expect_error("", {"trainer.data_parallel=2", "trainer.remote_ranks=1", "cluster.listen=off"},
               "key 'trainer.remote_ranks': remote ranks join through the cluster listener");
}

// Rank 0 driven as the trainer actor drives it (every micro-batch to accumulate(), then step()),
// with a dp_leader routing micro-batches to rank 1, which replays them with follow_rank_zero:
// both ranks get work, both end on the one-rank weights, and a checkpoint (sharded: a
// collective) and a new learning rate reach rank 1 too.
TEST(DataParallel, RankZeroCommandsTheOtherRankThroughTheStore) {
  const auto one = run({});
  std::promise<int> port;
  auto port_f = port.get_future().share();
  std::vector<at::Tensor> params1;
  std::string error1;
  std::thread r1([&] {
    try {
      dist_options o;
      o.rank = 1, o.world = 2, o.port = port_f.get();
      o.timeout = std::chrono::milliseconds(20000);
      auto g = dist_group::connect(o);
      policy_trainer pt(model_for(1), settings());
      pt.join_data_parallel(*g, true);
      follower_options fo;
      fo.poll = std::chrono::milliseconds(50);
      follow_rank_zero(pt, *g, fo);
      params1 = params_of(pt);
    } catch (const std::exception& e) {
      error1 = e.what();
    }
  });
  dist_options o;
  o.world = 2, o.timeout = std::chrono::milliseconds(20000);
  auto g = dist_group::connect(o, [&](int p) { port.set_value(p); });
  dp_leader leader(*g);
  policy_trainer pt(model_for(0), settings());
  pt.join_data_parallel(*g, true);
  pt.set_commands(&leader);
  std::vector<int64_t> routed(2, 0);
  for (int s = 0; s < 3; ++s) {
    const auto samples = batch(s);
    pt.begin_batch();
    for (int grp = 0; grp < kGroups; ++grp) {
      std::vector<const scored_sample*> mb;
      for (const auto& x : samples)
        if (static_cast<int>(x.group_id) == grp) mb.push_back(&x);
      pt.accumulate(mb, grp == kGroups - 1);  // the last closes every rank's gradients
    }
    const auto u = pt.step();
    EXPECT_EQ(u.tokens_trained, one[0].stats[s].tokens_trained);  // both ranks' tokens counted
    EXPECT_EQ(u.grad_norm, one[0].stats[s].grad_norm);
    for (int r = 0; r < 2; ++r)
      routed[r] += leader.step_tokens()[r];
    if (s == 1) {
      const auto state = pt.save_state();  // rank 1 joins the gather
      EXPECT_FALSE(state.empty());
    }
  }
  EXPECT_GT(routed[0], 0);
  EXPECT_GT(routed[1], 0);  // rank 1 did train
  EXPECT_EQ(differing(params_of(pt), one[0].params), 0);
  leader.stop();
  r1.join();
  ASSERT_TRUE(error1.empty()) << error1;
  EXPECT_EQ(differing(params1, one[0].params), 0);
}
