// Actor messaging overhead as a share of step time.
// 1. Cost per message: two actors bounce a message N times (ping-pong, so every message waits
//    for the one before: latency, not throughput). Payloads: an int, and a scored group of
//    the demo's size (G=8, 12 prompt + 33 response tokens, moved as the rollouter sends it).
//    Scheduled on a 1-thread CAF scheduler (as `asyncrl train` runs the light actors) and
//    detached (each actor on its own thread, as rollouters and trainer run).
// 2. Messages per step: whole runs of every mode under CAF's test coordinator, which resumes
//    one message per job, so the count of resumed jobs is the count of messages, all of them
//    (decode-chunk self-messages, credits, pulls, progress, syncs).
// 3. share = messages per step x the dearest CPU time per message / step time, where step time is
//    the coordinated run's single-threaded wall time per step divided by the cores (a lower
//    bound of a real step: the share is an upper bound). Beside it, the share if every message
//    cost what a scheduled one does (most are: decode-chunk self-messages, the light actors).
//   build/bench/bench_actor_overhead [--round-trips 100000] [--steps 4] [--quick] [--out FILE]

#include <caf/all.hpp>

#include <ctime>
#include <memory>

#include "bench/bench_util.hpp"
#include "messages/type_ids.hpp"
#include "tests/actor_harness.hpp"

using namespace asyncrl;

namespace {

scored_group demo_group() {
  scored_group g;
  g.ground_truth = "123";
  for (uint32_t k = 0; k < 8; ++k) {
    scored_sample s;
    s.index = k;
    s.prompt.assign(12, 5);
    s.response.assign(33, 9);
    s.logprobs.assign(33, -0.5f);
    s.versions.assign(33, 0);
    g.samples.push_back(std::move(s));
  }
  return g;
}

// Answers every message by sending it back to its sender.
caf::behavior echo(caf::event_based_actor* self) {
  return {
      [=](int32_t x) { self->send(caf::actor_cast<caf::actor>(self->current_sender()), x); },
      [=](scored_group& g) {
        self->send(caf::actor_cast<caf::actor>(self->current_sender()), std::move(g));
      },
  };
}

// Bounces `n` messages off `peer`, then answers the promise. `group`: a scored group payload.
caf::behavior pinger(caf::event_based_actor* self, caf::actor peer, int64_t n, bool group) {
  auto left = std::make_shared<int64_t>(n);
  auto rp = std::make_shared<caf::response_promise>();
  auto next = [=](auto&& payload) {
    if (--*left > 0)
      self->send(peer, std::forward<decltype(payload)>(payload));
    else
      rp->deliver(int32_t{0});
  };
  return {
      [=](start_atom) {
        *rp = self->make_response_promise();
        if (group)
          self->send(peer, demo_group());
        else
          self->send(peer, int32_t{1});
      },
      [=](int32_t x) { next(x); },
      [=](scored_group& g) { next(std::move(g)); },
  };
}

double cpu_now_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

struct msg_cost {
  double latency_ns = 0;  // wall time per one-way message: includes waking a sleeping thread
  double cpu_ns = 0;      // CPU time (all threads) per message: what messaging takes from work
};

// Per one-way message, medians over reps of (time / (2 x round trips)).
msg_cost cost_per_message(bool detached, bool group, int64_t round_trips, int reps) {
  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", 1);
  register_message_types(cfg);
  caf::actor_system sys{cfg};
  std::vector<double> wall, cpu;
  for (int r = 0; r < reps; ++r) {
    auto peer = detached ? sys.spawn<caf::detached>(echo) : sys.spawn(echo);
    auto ping = detached ? sys.spawn<caf::detached>(pinger, peer, round_trips, group)
                         : sys.spawn(pinger, peer, round_trips, group);
    caf::scoped_actor self{sys};
    const double n = 2.0 * static_cast<double>(round_trips);
    double t0 = bench::now_s(), c0 = cpu_now_s();
    self->request(ping, caf::infinite, start_atom::value)
        .receive([](int32_t) {}, [](caf::error& e) { std::cerr << to_string(e) << "\n"; });
    wall.push_back((bench::now_s() - t0) * 1e9 / n);
    cpu.push_back((cpu_now_s() - c0) * 1e9 / n);
    self->send_exit(ping, caf::exit_reason::user_shutdown);
    self->send_exit(peer, caf::exit_reason::user_shutdown);
  }
  return {bench::median(wall), bench::median(cpu)};
}

// The e2e balanced workload's shape (bench/e2e.py) on the demo-sized model, with forced
// lengths so that every mode generates the same tokens.
std::vector<std::string> run_overrides(const std::string& mode, int64_t steps) {
  std::vector<std::string> o{"model.init.hidden_size=128",
                             "model.init.intermediate_size=384",
                             "model.init.num_hidden_layers=4",
                             "model.init.num_attention_heads=4",
                             "model.init.num_key_value_heads=2",
                             "model.init.max_position_embeddings=128",
                             "data.arith.max_digits=3",
                             "data.train_size=2000",
                             "data.train_batch_size=16",
                             "rollout.n=8",
                             "rollout.max_new_tokens=48",
                             "rollout.max_batch=24",
                             "rollout.chunk_tokens=4",
                             "workload.lengths=fixed",
                             "workload.median=33",
                             "trainer.micro_batch_size=32",
                             "trainer.ppo_mini_batch_size=16",
                             "trainer.group_aligned_micro_batches=false",
                             "trainer.compute_ref=false",
                             "algorithm.use_rollout_logprobs=true",
                             "trainer.total_steps=" + std::to_string(steps)};
  if (mode == "sync" || mode == "periodic") {
    o.push_back("async_training.mode=" + mode);
  } else {
    o.push_back("async_training.mode=fully_async");
    o.push_back("async_training.staleness_threshold=0.5");
    o.push_back(std::string("async_training.partial_rollout=") +
                (mode == "fully_async_partial" ? "true" : "false"));
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = bench::flag(argc, argv, "--quick");
  const int64_t round_trips =
      std::stoll(bench::arg(argc, argv, "--round-trips", quick ? "20000" : "100000"));
  const int64_t steps = std::stoll(bench::arg(argc, argv, "--steps", quick ? "3" : "4"));
  const int reps = quick ? 3 : 5;
  const double cores = std::max(1u, std::thread::hardware_concurrency());

  nlohmann::ordered_json cost;
  double dearest = 0;  // CPU ns per message, the dearest kind
  double cheapest = 1e300;
  for (bool detached : {false, true})
    for (bool group : {false, true}) {
      auto c = cost_per_message(detached, group, round_trips, reps);
      dearest = std::max(dearest, c.cpu_ns);
      cheapest = std::min(cheapest, c.cpu_ns);
      std::string key =
          std::string(detached ? "detached" : "scheduled") + (group ? "_group" : "_int");
      cost[key] = {{"latency_ns", c.latency_ns}, {"cpu_ns", c.cpu_ns}};
    }

  nlohmann::ordered_json modes = nlohmann::json::array();
  double worst_share = 0;
  for (std::string mode : {"sync", "periodic", "fully_async_stale", "fully_async_partial"}) {
    auto lc = test::tiny_run_config(run_overrides(mode, steps));
    double t0 = bench::now_s();
    auto out = test::run_coordinated(lc->cfg);
    double wall = bench::now_s() - t0;
    double per_step = static_cast<double>(out.messages) / static_cast<double>(steps);
    double step_s = wall / static_cast<double>(steps) / cores;
    double share = per_step * dearest * 1e-9 / step_s;
    worst_share = std::max(worst_share, share);
    modes.push_back({{"mode", mode},
                     {"finished", out.finished && out.result.ok},
                     {"messages", out.messages},
                     {"messages_per_step", per_step},
                     {"step_time_lower_bound_s", step_s},
                     {"overhead_share", share},
                     {"overhead_share_at_cheapest", per_step * cheapest * 1e-9 / step_s}});
  }

  nlohmann::ordered_json j{
      {"benchmark", "actor_overhead"},
      {"machine", bench::machine()},
      {"round_trips", round_trips},
      {"reps", reps},
      {"steps", steps},
      {"method",
       "per one-way message from ping-pong (median of reps): latency (wall) and CPU time of all "
       "threads; messages per step counted under the test coordinator (every message of every "
       "actor); share = messages/step x the dearest CPU ns/message / (single-threaded step time "
       "/ cores)"},
      {"cost_per_message", cost},
      {"dearest_cpu_ns", dearest},
      {"modes", modes},
      {"max_overhead_share", worst_share},
      {"target_share", 0.01},
      {"met", worst_share < 0.01}};
  bench::emit(argc, argv, j);
  return 0;
}
