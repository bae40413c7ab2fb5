// dist_group used by several groups of one process at once: the train process holds the
// data-parallel group and a weights link per worker, and the unit tests run ranks on threads.
#include "runtime/dist/dist_group.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

namespace asyncrl {
namespace {

// Forms `pairs` groups of two at once, each rank on its own thread; once every rank of every
// group has joined, all of them run fn(group) together.
template <class F>
std::vector<std::string> with_pairs(int pairs, F fn) {
  std::vector<std::promise<int>> ports(pairs);
  std::vector<std::shared_future<int>> port_of;
  for (auto& p : ports)
    port_of.push_back(p.get_future().share());
  std::vector<std::string> errors(2 * pairs);
  std::mutex m;
  std::condition_variable all_joined;
  int joined = 0;
  std::vector<std::thread> threads;
  for (int i = 0; i < 2 * pairs; ++i)
    threads.emplace_back([&, i] {
      const int pair = i / 2, r = i % 2;
      std::unique_ptr<dist_group> g;
      bool told = false;  // rank 0 gave its port: a rank 0 that fails before must still answer
      try {
        dist_options o;
        o.rank = r, o.world = 2, o.name = "pair " + std::to_string(pair);
        o.timeout = std::chrono::milliseconds(20000);
        if (r == 0) {
          g = dist_group::connect(o, [&](int p) { ports[pair].set_value(p), told = true; });
        } else {
          o.port = port_of[pair].get();
          g = dist_group::connect(o);
        }
      } catch (const std::exception& e) {
        if (r == 0 && !told) ports[pair].set_value(-1);  // rank 1 fails instead of waiting
        errors[i] = e.what();
      }
      {
        std::unique_lock<std::mutex> lock(m);
        if (++joined == 2 * pairs) all_joined.notify_all();
        all_joined.wait(lock, [&] { return joined == 2 * pairs; });
      }
      if (!g) return;
      try {
        fn(*g, pair);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (auto& t : threads)
    t.join();
  return errors;
}

// libtorch 2.x notes the first collective of every Gloo group in a table shared by the whole
// process, written without a lock (pytorch/pytorch#179313): two groups issuing their first
// collectives at the same moment corrupted it (a segfault in std::map's rebalance; CI's unit run
// under libtorch 2.11 crashed in the data-parallel tests, whose ranks are threads of one
// process). In the train process the data-parallel group and the weights links do the same.
// Here 4 groups of two (8 Gloo group objects, one per rank thread) issue their first
// collectives together, 10 times over. Without dist_group's issue lock, 10 of 16 runs of this
// binary under libtorch 2.11 on the 2-core machine crashed (9) or spun forever in the corrupted
// table (1); with it, none of 22. So it catches a lost lock most of the time, not always. It
// cannot fail under libtorch 1.13, whose Gloo has no such table. The sums are checked, and a
// lock held across the waits (two ranks of one process deadlocked) would run into the 20 s timeout
// and fail. It takes about 10 s here: c10d looks up each peer's name, and this machine's resolver
// sometimes answers only after its 5 s timeout.
TEST(DistGroup, GroupsOfOneProcessIssueTheirFirstCollectivesAtOnce) {
  for (int round = 0; round < 10; ++round) {
    const auto errors = with_pairs(4, [&](dist_group& g, int pair) {
      std::vector<at::Tensor> t{at::full({4}, 10.0 * (g.rank() + 1) + pair, at::kFloat)};
      g.allreduce(t, reduce_kind::sum);
      if (t[0][3].item<float>() != 30.0f + 2 * pair) throw std::runtime_error("wrong sum");
      std::vector<at::Tensor> b{at::full({2}, static_cast<float>(g.rank()), at::kFloat)};
      g.broadcast(b, 1);
      if (b[0][0].item<float>() != 1.0f) throw std::runtime_error("wrong broadcast");
    });
    for (size_t i = 0; i < errors.size(); ++i)
      EXPECT_TRUE(errors[i].empty())
          << "round " << round << ", pair " << i / 2 << " rank " << i % 2 << ": " << errors[i];
  }
}

}  // namespace
}  // namespace asyncrl
