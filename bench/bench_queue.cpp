// MessageQueue throughput: the real queue actor (spawn_message_queue) in a threaded actor system
// between a producer that asks for credits and puts scored groups (G samples of `prompt` +
// `response` tokens with log-probs and versions, as a rollouter sends them) and a consumer that
// pulls (version 0, min 1, max 256) until N groups arrived. Admission never throttles: fully_async
// with a window far above N. Beside it, in the same process and interleaved, a plain in-thread
// std::deque push/pop of the same groups, as the reference cost of moving them at all.
//   build/bench/bench_queue [--groups 200000] [--group-size 8] [--caf-threads 1] [--reps 3]
//                           [--quick] [--out FILE]

#include <caf/all.hpp>

#include <deque>

#include "actors/message_queue.hpp"
#include "bench/bench_util.hpp"
#include "bench/fake_controller.hpp"
#include "messages/type_ids.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/text/char_tokenizer.hpp"

using namespace asyncrl;

namespace {

constexpr int64_t kCredit = 64;  // groups asked per credit request
constexpr int64_t kPullMax = 256;

scored_group make_group(int G, int prompt, int response) {
  scored_group g;
  g.ground_truth = "1234";
  for (int k = 0; k < G; ++k) {
    scored_sample s;
    s.index = static_cast<uint32_t>(k);
    for (int i = 0; i < prompt; ++i)
      s.prompt.push_back(4 + i);
    for (int i = 0; i < response; ++i) {
      s.response.push_back(10 + (i * 7 + k) % 80);
      s.logprobs.push_back(-0.01f * static_cast<float>(i + 1));
      s.versions.push_back(0);
    }
    s.reward = k % 2;
    s.advantage = k % 2 ? 1.0 : -1.0;
    g.samples.push_back(std::move(s));
  }
  return g;
}

// Asks for credits and puts that many copies of `tmpl` until `n` groups are out.
void produce(caf::event_based_actor* self, queue_actor q, std::shared_ptr<const scored_group> tmpl,
             std::shared_ptr<int64_t> left) {
  if (*left <= 0) return;
  self->request(q, caf::infinite, credit_atom::value, int32_t{0}, std::min(kCredit, *left))
      .then(
          [=](int64_t n) {
            for (int64_t i = 0; i < n; ++i) {
              scored_group g = *tmpl;
              g.group_id = static_cast<uint64_t>(*left - i);
              self->send(q, put_atom::value, std::move(g));
            }
            *left -= n;
            produce(self, q, tmpl, left);
          },
          [](const caf::error& e) { std::cerr << "producer: " << to_string(e) << "\n"; });
}

// Pulls until `n` groups arrived, then answers the pending promise with the max queue depth.
void consume(caf::event_based_actor* self, queue_actor q, int64_t n, std::shared_ptr<int64_t> got,
             std::shared_ptr<int64_t> max_depth, caf::response_promise rp) {
  self->request(q, caf::infinite, pull_atom::value, int64_t{0}, int64_t{1}, kPullMax)
      .then(
          [=](delivery& d) mutable {
            *got += static_cast<int64_t>(d.groups.size());
            *max_depth =
                std::max(*max_depth, d.stats.depth + static_cast<int64_t>(d.groups.size()));
            if (*got >= n)
              rp.deliver(*max_depth);
            else
              consume(self, q, n, got, max_depth, rp);
          },
          [=](const caf::error& e) mutable { rp.deliver(e); });
}

struct actor_result {
  double seconds = 0;
  int64_t max_depth = 0;
};

// `detached`: the producer and the consumer get their own threads, as the rollouters and the
// trainer do in a run; otherwise all three share the scheduler.
actor_result run_actors(caf::actor_system& sys, const env_ptr& env, const scored_group& tmpl,
                        int64_t n, bool detached) {
  auto ctrl = bench::fake_controller(sys);
  auto q = spawn_message_queue(sys, queue_args{env, ctrl, {}, 0});
  auto shared = std::make_shared<const scored_group>(tmpl);
  auto producer_fn = [=](caf::event_based_actor* self) -> caf::behavior {
    return {[=](start_atom) { produce(self, q, shared, std::make_shared<int64_t>(n)); }};
  };
  auto consumer_fn = [=](caf::event_based_actor* self) -> caf::behavior {
    return {[=](start_atom) {
      auto rp = self->make_response_promise();
      consume(self, q, n, std::make_shared<int64_t>(0), std::make_shared<int64_t>(0), rp);
      return rp;
    }};
  };
  auto producer = detached ? sys.spawn<caf::detached>(producer_fn) : sys.spawn(producer_fn);
  auto consumer = detached ? sys.spawn<caf::detached>(consumer_fn) : sys.spawn(consumer_fn);
  caf::scoped_actor self{sys};
  actor_result r;
  double t0 = bench::now_s();
  self->send(producer, start_atom::value);
  self->request(consumer, caf::infinite, start_atom::value)
      .receive([&](int64_t depth) { r.max_depth = depth; },
               [&](caf::error& e) { std::cerr << "consumer: " << sys.render(e) << "\n"; });
  r.seconds = bench::now_s() - t0;
  self->request(q, caf::infinite, stop_atom::value, int64_t{0})
      .receive([](queue_stats&) {}, [](caf::error&) {});
  for (auto a : {producer, consumer})
    self->send_exit(a, caf::exit_reason::user_shutdown);
  self->send_exit(ctrl, caf::exit_reason::user_shutdown);
  return r;
}

// The same groups through a std::deque in one thread: copy in by credits, move out by pulls.
double run_deque(const scored_group& tmpl, int64_t n) {
  std::deque<scored_group> q;
  int64_t produced = 0, got = 0;
  double t0 = bench::now_s();
  while (got < n) {
    for (int64_t i = 0; i < kCredit && produced < n; ++i, ++produced) {
      scored_group g = tmpl;
      g.group_id = static_cast<uint64_t>(produced);
      q.push_back(std::move(g));
    }
    std::vector<scored_group> out;
    while (!q.empty() && static_cast<int64_t>(out.size()) < kPullMax) {
      out.push_back(std::move(q.front()));
      q.pop_front();
    }
    got += static_cast<int64_t>(out.size());
  }
  return bench::now_s() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = bench::flag(argc, argv, "--quick");
  const int64_t n = std::stoll(bench::arg(argc, argv, "--groups", quick ? "20000" : "200000"));
  const int G = std::stoi(bench::arg(argc, argv, "--group-size", "8"));
  const int prompt = 12, response = 32;
  const int reps = std::stoi(bench::arg(argc, argv, "--reps", quick ? "2" : "3"));
  // train_run uses one scheduler thread for the cooperative roles; the queue is one of them.
  const auto caf_threads = std::stoul(bench::arg(argc, argv, "--caf-threads", "1"));

  // A window of 1e6 * 1e3 groups between syncs (no sync ever happens): admission never binds.
  auto lc = load_config(
      "", {"async_training.mode=fully_async", "data.train_batch_size=1000000",
           "trainer.ppo_mini_batch_size=1000000", "async_training.trigger_parameter_sync_step=1000",
           "runtime.log_level=error"});
  auto tok = char_tokenizer::builtin();
  auto env = make_env(
      make_role_params(lc->cfg),
      model_config::from_init(lc->cfg.model.init, tok.vocab_size(), tok.bos_id(), tok.eos_id()),
      std::make_shared<char_tokenizer>(tok), /*detached=*/true);

  caf::actor_system_config cfg;
  register_message_types(cfg);
  cfg.set("scheduler.max-threads", caf_threads);
  caf::actor_system sys{cfg};
  auto tmpl = make_group(G, prompt, response);

  run_actors(sys, env, tmpl, n / 10, false);  // warm-up
  run_actors(sys, env, tmpl, n / 10, true);
  run_deque(tmpl, n / 10);
  std::vector<double> det_s, sch_s, deque_s;
  int64_t det_depth = 0, sch_depth = 0;
  for (int r = 0; r < reps; ++r) {
    auto a = run_actors(sys, env, tmpl, n, true);
    det_s.push_back(a.seconds);
    det_depth = std::max(det_depth, a.max_depth);
    auto b = run_actors(sys, env, tmpl, n, false);
    sch_s.push_back(b.seconds);
    sch_depth = std::max(sch_depth, b.max_depth);
    deque_s.push_back(run_deque(tmpl, n));
  }
  auto per_s = [&](const std::vector<double>& v) {
    return static_cast<double>(n) / bench::median(v);
  };
  const double det = per_s(det_s), sch = per_s(sch_s), dq = per_s(deque_s);
  nlohmann::ordered_json j{
      {"benchmark", "message_queue_throughput"},
      {"machine", bench::machine()},
      {"groups", n},
      {"group_size", G},
      {"prompt_tokens", prompt},
      {"response_tokens", response},
      {"credit_per_request", kCredit},
      {"pull_max", kPullMax},
      {"caf_threads", caf_threads},
      {"reps", reps},
      {"method",
       "median wall time from start to the consumer holding N groups; 'detached' = producer and "
       "consumer on their own threads as rollouters and trainer are in a run, 'scheduled' = all "
       "three actors on the CAF scheduler; deque = the same copies and moves in one thread"},
      {"queue_groups_per_s", det},
      {"queue_samples_per_s", det * G},
      {"queue_us_per_group", 1e6 / det},
      {"queue_scheduled_groups_per_s", sch},
      {"queue_scheduled_samples_per_s", sch * G},
      {"deque_groups_per_s", dq},
      {"deque_samples_per_s", dq * G},
      {"queue_to_deque_ratio", det / dq},
      {"queue_scheduled_to_deque_ratio", sch / dq},
      {"max_queue_depth", det_depth},
      {"max_queue_depth_scheduled", sch_depth},
      {"queue_runs_s", det_s},
      {"queue_scheduled_runs_s", sch_s},
      {"deque_runs_s", deque_s}};
  bench::emit(argc, argv, j);
  return 0;
}
