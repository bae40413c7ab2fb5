// Contention between the trainer and a rollouter on one machine, with and without
// runtime.affinity=roles. For the demo model (configs/demo.yaml's architecture and batch: 16
// prompts x 8 responses, 12 prompt tokens, 33 response tokens), one trainer step (4
// micro-batches of 32 + optimizer) and one generation batch (128 sequences, prefill + decode)
// are each timed alone on their own thread, then both at once on two threads started together.
// contention factor = time together / time alone, per role (1.0 = no interference). Modes:
//   none:  today's default, 1 torch thread per role, threads unpinned;
//   roles: the same, each thread pinned to its own CPUs by split_cores (as the run does).
// Repetitions interleave the modes (alternating their order) so drift hits both alike.
//   build/bench/bench_contention [--reps 7] [--role-threads 1] [--quick] [--out FILE]

#include <ATen/Parallel.h>

#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "bench/bench_samples.hpp"
#include "bench/bench_util.hpp"
#include "runtime/common/cpu_affinity.hpp"
#include "runtime/common/rng.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/generation/generator.hpp"
#include "runtime/model/model.hpp"
#include "runtime/model/weight_sync.hpp"
#include "runtime/text/char_tokenizer.hpp"
#include "runtime/train/policy_trainer.hpp"

using namespace asyncrl;

namespace {

constexpr int kPrompts = 16, kGroup = 8, kPrompt = 12, kResponse = 33, kMicro = 32;

// Releases two threads together (C++17 has no std::barrier).
class start_gate {
 public:
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(m_);
    if (++arrived_ == 2) {
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return arrived_ == 2; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int arrived_ = 0;
};

struct workload {
  std::unique_ptr<policy_trainer> trainer;
  std::vector<scored_sample> data;
  CausalLM gen_model{nullptr};

  // One demo trainer step: 4 micro-batches of 32 responses, then the optimizer.
  void train_step() {
    trainer->begin_batch();
    std::vector<const scored_sample*> mb;
    for (auto& s : data) {
      mb.push_back(&s);
      if (static_cast<int>(mb.size()) == kMicro) {
        trainer->accumulate(mb);
        mb.clear();
      }
    }
    trainer->step();
  }

  // One demo generation batch: 16 prompts x 8 samples, 33 new tokens each.
  void generate() {
    generator_options o;
    o.max_slots = kPrompts * kGroup;
    o.max_seq_len = kPrompt + kResponse + 1;
    o.eos_id = 2;
    generator g(gen_model.ptr(), o);
    for (int i = 0; i < kPrompts * kGroup; ++i) {
      gen_request q;
      q.id = static_cast<uint64_t>(i);
      q.prompt_id = static_cast<uint64_t>(i / kGroup);
      q.sample_index = static_cast<uint32_t>(i % kGroup);
      for (int t = 0; t < kPrompt; ++t)
        q.prompt.push_back(4 + (i / kGroup * 7 + t) % 90);
      q.max_new_tokens = kResponse;
      q.ignore_eos = true;
      g.submit(q);
    }
    g.run_all();
  }
};

// Runs `work` on a fresh thread set up as a role's: pinned to `cpus` (empty: not pinned), with
// `threads` torch threads. Returns the thread's wall seconds; `start` lines up two roles.
double on_role_thread(const std::vector<int>& cpus, int threads, const std::function<void()>& work,
                      start_gate* start) {
  double s = 0;
  std::thread t([&] {
    pin_this_thread(cpus);
    set_torch_threads(threads);
    if (start) start->arrive_and_wait();
    const double t0 = bench::now_s();
    work();
    s = bench::now_s() - t0;
  });
  t.join();
  return s;
}

struct sample {
  double train_alone = 0, gen_alone = 0, train_both = 0, gen_both = 0;
};

sample measure(workload& w, const std::vector<int>& train_cpus, const std::vector<int>& gen_cpus,
               int threads) {
  sample s;
  auto train = [&] { w.train_step(); };
  auto gen = [&] { w.generate(); };
  s.train_alone = on_role_thread(train_cpus, threads, train, nullptr);
  s.gen_alone = on_role_thread(gen_cpus, threads, gen, nullptr);
  start_gate start;
  std::optional<std::thread> other;
  double gen_s = 0;
  other.emplace([&] { gen_s = on_role_thread(gen_cpus, threads, gen, &start); });
  s.train_both = on_role_thread(train_cpus, threads, train, &start);
  other->join();
  s.gen_both = gen_s;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = bench::flag(argc, argv, "--quick");
  const int reps = std::stoi(bench::arg(argc, argv, "--reps", quick ? "3" : "7"));
  const int threads = std::stoi(bench::arg(argc, argv, "--role-threads", "1"));
  run_config rc;  // the demo architecture (model.init defaults = configs/demo.yaml's)
  auto tok = char_tokenizer::builtin();
  auto cfg = model_config::from_init(rc.model.init, tok.vocab_size(), tok.bos_id(), tok.eos_id());
  policy_trainer_params tp;  // as the e2e benchmark runs it: no extra forward passes
  tp.use_rollout_logprobs = true;
  tp.compute_ref = false;
  workload w;
  w.trainer = std::make_unique<policy_trainer>(init_causal_lm(cfg, 0.02, 1, torch::kCPU), tp);
  w.data = bench::random_samples(kPrompts * kGroup, kGroup, kPrompt, kResponse);
  w.gen_model = init_causal_lm(cfg, 0.02, 2, torch::kCPU);
  w.gen_model->eval();

  const auto allowed = allowed_cpus();
  std::optional<core_split> split;
  std::string roles_skipped;
  try {
    split = split_cores(allowed, threads, threads, 1);
  } catch (const std::exception& e) {
    roles_skipped = e.what();
  }
  // Warm-up: allocator, OpenMP pools, first-touch of the models' buffers.
  measure(w, {}, {}, threads);

  std::map<std::string, std::vector<sample>> runs;
  for (int r = 0; r < reps; ++r) {
    std::vector<std::string> order{"none", "roles"};
    if (r % 2) std::swap(order[0], order[1]);
    for (auto& mode : order) {
      if (mode == "roles" && !split) continue;
      runs[mode].push_back(mode == "none"
                               ? measure(w, {}, {}, threads)
                               : measure(w, split->trainer, split->rollouters[0], threads));
    }
  }
  auto env_or = [](const char* k) {
    const char* v = std::getenv(k);
    return std::string(v ? v : "(unset)");
  };
  nlohmann::ordered_json modes = nlohmann::ordered_json::object();
  for (auto& [mode, v] : runs) {
    std::vector<double> ta, ga, tb, gb, ft, fg;
    for (auto& s : v) {
      ta.push_back(s.train_alone * 1e3);
      ga.push_back(s.gen_alone * 1e3);
      tb.push_back(s.train_both * 1e3);
      gb.push_back(s.gen_both * 1e3);
      ft.push_back(s.train_both / s.train_alone);
      fg.push_back(s.gen_both / s.gen_alone);
    }
    const double f_t = bench::median(ft), f_g = bench::median(fg);
    modes[mode] = {{"train_alone_ms", bench::median(ta)},
                   {"gen_alone_ms", bench::median(ga)},
                   {"train_both_ms", bench::median(tb)},
                   {"gen_both_ms", bench::median(gb)},
                   {"contention_train", f_t},
                   {"contention_gen", f_g},
                   {"contention", 0.5 * (f_t + f_g)},
                   {"contention_train_runs", ft},
                   {"contention_gen_runs", fg}};
  }
  nlohmann::ordered_json j{
      {"benchmark", "contention"},
      {"machine", bench::machine()},
      {"allowed_cpus", cpu_list_string(allowed)},
      {"model_parameters", cfg.num_parameters()},
      {"role_threads", threads},
      {"reps", reps},
      {"OMP_WAIT_POLICY", env_or("OMP_WAIT_POLICY")},
      {"GOMP_SPINCOUNT", env_or("GOMP_SPINCOUNT")},
      {"roles_split",
       split ? nlohmann::ordered_json{{"trainer", cpu_list_string(split->trainer)},
                                      {"rollouter", cpu_list_string(split->rollouters[0])}}
             : nlohmann::ordered_json(roles_skipped)},
      {"method",
       "per repetition and mode: a demo trainer step (128 responses of 33 tokens, 4 "
       "micro-batches of 32, optimizer) alone on its thread, a demo generation batch (128 "
       "sequences, 12 + 33 tokens) alone on its thread, then both on two threads released "
       "together; contention_X = median over repetitions of (time together / time alone); "
       "contention = mean of the two. none: threads unpinned; roles: pinned by split_cores "
       "(runtime.affinity=roles). Modes interleaved, order alternating."},
      {"modes", modes}};
  if (runs.count("none") && runs.count("roles"))
    j["roles_over_none"] =
        modes["roles"]["contention"].get<double>() / modes["none"]["contention"].get<double>();
  bench::emit(argc, argv, j);
  return 0;
}
