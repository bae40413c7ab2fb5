// Weight-sync time against model size. For each size (4 layers, hidden 128..1024) one full
// publish through the real Synchronizer (spawn_synchronizer) to R detached fake rollouters that
// answer pause/load/resume like the real one and load with load_snapshot(own model, snap,
// alias=true), timed from before the trainer-side snapshot_weights copy until the sync_report
// arrives. Beside it, interleaved: a memcpy of the same bytes into fresh pages (mmap'd for each
// copy, so page faults are included, as they are for the snapshot's new buffer), a memcpy into
// a buffer already touched (warm: the bandwidth ceiling), and the cross-process path
// (pack_weights + unpack_weights, msgpack).
// The fresh buffer is mmap'd, not malloc'd: glibc's dynamic mmap threshold grows after a large
// free (up to 32 MB), so a malloc'd 13 MB buffer came back from the heap with its pages still
// mapped, and the "fresh" memcpy ran at warm speed at that size only (ratio 0.18 there, 0.7-0.9
// at 3, 51 and 202 MB).
//   build/bench/bench_weight_sync [--sizes 128,256,512,1024] [--rollouters 2] [--reps 5]
//                                 [--quick] [--out FILE]

#include <ATen/Parallel.h>
#include <caf/all.hpp>

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "actors/synchronizer.hpp"
#include "bench/bench_util.hpp"
#include "bench/fake_controller.hpp"
#include "messages/type_ids.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/model/model.hpp"
#include "runtime/model/weight_sync.hpp"
#include "runtime/text/char_tokenizer.hpp"

using namespace asyncrl;

namespace {

queue_actor fake_queue(caf::actor_system& sys) {
  return sys.spawn([](queue_actor::pointer) -> queue_actor::behavior_type {
    return {
        [](credit_atom, int32_t, int64_t) -> int64_t { return 0; },
        [](abandon_atom, int32_t, int64_t) {},
        [](put_atom, scored_group&) {},
        [](pull_atom, int64_t, int64_t, int64_t) -> delivery { return {}; },
        [](refill_atom, int64_t, int64_t) {},
        [](started_atom, int32_t, uint64_t, int64_t) {},
        [](synced_atom, int64_t) {},
        [](lost_atom, int32_t, int64_t, caf::actor_addr&) {},
        [](snapshot_atom) -> delivery { return {}; },
        [](members_atom, int32_t) {},
        [](set_atom, admission_params&) {},
        [](hold_atom, bool) {},
        [](stats_atom) -> queue_stats { return {}; },
        [](stop_atom, int64_t) -> queue_stats { return {}; },
    };
  });
}

struct fake_rollouter_state {
  CausalLM model{nullptr};
  weight_snapshot weights;  // aliased by the model's parameters: kept alive here
};

// Answers pause/load/resume; a load points its own model's parameters at the snapshot.
rollouter_actor fake_rollouter(caf::actor_system& sys, const model_config& cfg) {
  auto fn = [cfg](rollouter_actor::stateful_pointer<fake_rollouter_state> self)
      -> rollouter_actor::behavior_type {
    self->state.model = init_causal_lm(cfg, 0.02, 7, torch::kCPU);
    return {
        [](start_atom) {},
        [](gen_atom) {},
        [](pause_atom, int64_t) -> int64_t { return 0; },
        [self](load_atom, weight_snapshot& w) -> caf::result<int64_t> {
          try {
            load_snapshot(*self->state.model, w, /*alias=*/true);
          } catch (const std::exception& e) {
            return caf::make_error(caf::sec::invalid_argument, e.what());
          }
          self->state.weights = w;
          return w.version;
        },
        [](resume_atom, int64_t) {},
        [](apply_atom) {},
        [](set_atom, double) {},
        [](delay_atom, int64_t) {},
        [self](stop_atom) -> rollout_counts {
          self->quit();
          return {};
        },
    };
  };
  return sys.spawn<caf::detached>(fn);
}

std::vector<int64_t> parse_sizes(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream in(s);
  for (std::string x; std::getline(in, x, ',');)
    out.push_back(std::stoll(x));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = bench::flag(argc, argv, "--quick");
  auto sizes =
      parse_sizes(bench::arg(argc, argv, "--sizes", quick ? "128,256,512" : "128,256,512,1024"));
  const int R = std::stoi(bench::arg(argc, argv, "--rollouters", "2"));
  const int reps = std::stoi(bench::arg(argc, argv, "--reps", quick ? "3" : "5"));
  const int threads = static_cast<int>(std::thread::hardware_concurrency());
  at::set_num_threads(threads);  // the trainer's snapshot copy may use every core

  auto lc = load_config("", {"runtime.log_level=error"});
  auto tok = char_tokenizer::builtin();
  caf::actor_system_config sys_cfg;
  register_message_types(sys_cfg);
  sys_cfg.set("scheduler.max-threads", size_t{1});  // as train_run: one thread, detached compute
  caf::actor_system sys{sys_cfg};
  caf::scoped_actor self{sys};

  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  double min_ratio = 1e9;
  for (auto hidden : sizes) {
    auto init = lc->cfg.model.init;
    init.hidden_size = hidden;
    init.intermediate_size = 3 * hidden;
    init.num_hidden_layers = 4;
    auto mcfg = model_config::from_init(init, tok.vocab_size(), tok.bos_id(), tok.eos_id());
    auto trainer = init_causal_lm(mcfg, 0.02, 1, torch::kCPU);
    auto env = make_env(make_role_params(lc->cfg), mcfg, std::make_shared<char_tokenizer>(tok),
                        /*detached=*/true);
    std::vector<rollouter_actor> rs;
    for (int i = 0; i < R; ++i)
      rs.push_back(fake_rollouter(sys, mcfg));
    auto ctrl = bench::fake_controller(sys);
    auto q = fake_queue(sys);
    auto sync = spawn_synchronizer(sys, synchronizer_args{env, {}, {}, rs, q, ctrl});

    int64_t version = 0;
    int64_t bytes = 0;
    bool ok = true;
    auto publish = [&] {
      double t0 = bench::now_s();
      auto snap = snapshot_weights(*trainer, ++version);
      bytes = snap.blob->bytes();
      self->request(sync, caf::infinite, publish_atom::value, std::move(snap))
          .receive([&](sync_report& r) { ok = ok && r.ok; },
                   [&](caf::error& e) {
                     ok = false;
                     std::cerr << "publish: " << sys.render(e) << "\n";
                   });
      return bench::now_s() - t0;
    };
    publish();  // warm-up: first-touch of the rollouters' path
    std::vector<double> sync_s, memcpy_s, warm_s, pack_s, unpack_s;
    auto src = snapshot_weights(*trainer, 0);
    const auto n = static_cast<size_t>(bytes);
    std::vector<char> warm(n, 1);  // touched once: its pages stay mapped
    for (int r = 0; r < reps; ++r) {
      sync_s.push_back(publish());
      double t0 = bench::now_s();
      void* dst = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (dst == MAP_FAILED) {
        std::cerr << "mmap failed\n";
        return 1;
      }
      std::memcpy(dst, src.blob->data.data(), n);  // fresh pages: page faults included
      memcpy_s.push_back(bench::now_s() - t0);
      volatile float sink = static_cast<float*>(dst)[bytes / 8];
      (void)sink;
      munmap(dst, n);
      t0 = bench::now_s();
      std::memcpy(warm.data(), src.blob->data.data(), n);
      warm_s.push_back(bench::now_s() - t0);
      sink = reinterpret_cast<float*>(warm.data())[bytes / 8];
      t0 = bench::now_s();
      auto packed = pack_weights(src);
      double t1 = bench::now_s();
      auto back = unpack_weights(packed.data(), packed.size());
      unpack_s.push_back(bench::now_s() - t1);
      pack_s.push_back(t1 - t0);
      ok = ok && back.blob->data.size() == src.blob->data.size();
    }
    for (auto& r : rs)
      self->request(r, caf::infinite, stop_atom::value)
          .receive([](rollout_counts&) {}, [](caf::error&) {});
    self->request(sync, caf::infinite, stop_atom::value)
        .receive([](int64_t, int64_t) {}, [](caf::error&) {});
    self->send_exit(ctrl, caf::exit_reason::user_shutdown);
    self->send_exit(q, caf::exit_reason::user_shutdown);

    const double gb = static_cast<double>(bytes) / 1e9;
    const double s = bench::median(sync_s), m = bench::median(memcpy_s);
    const double pk = bench::median(pack_s), up = bench::median(unpack_s);
    const double wm = bench::median(warm_s);
    min_ratio = std::min(min_ratio, m / s);
    rows.push_back({{"hidden_size", hidden},
                    {"params", mcfg.num_parameters()},
                    {"bytes", bytes},
                    {"ok", ok},
                    {"sync_ms", s * 1e3},
                    {"sync_GBps", gb / s},
                    {"memcpy_ms", m * 1e3},
                    {"memcpy_GBps", gb / m},
                    {"ratio_to_memcpy", m / s},
                    {"memcpy_warm_ms", wm * 1e3},
                    {"memcpy_warm_GBps", gb / wm},
                    {"ratio_to_warm_memcpy", wm / s},
                    {"msgpack_pack_ms", pk * 1e3},
                    {"msgpack_unpack_ms", up * 1e3},
                    {"msgpack_GBps", gb / (pk + up)},
                    {"sync_runs_ms", [&] {
                       std::vector<double> v;
                       for (auto x : sync_s)
                         v.push_back(x * 1e3);
                       return v;
                     }()}});
  }
  nlohmann::ordered_json j{
      {"benchmark", "weight_sync_vs_model_size"},
      {"machine", bench::machine()},
      {"rollouters", R},
      {"layers", 4},
      {"torch_threads", threads},
      {"reps", reps},
      {"method",
       "sync = median wall time from before snapshot_weights (trainer copy) until the "
       "synchronizer's sync_report (pause -> load(alias) -> resume on every rollouter); "
       "ratio_to_memcpy = memcpy_ms / sync_ms with memcpy into fresh mmap'd pages (the "
       "snapshot also writes a new buffer); memcpy_warm = into pages already mapped; "
       "msgpack = pack_weights + unpack_weights of the same snapshot"},
      {"min_ratio_to_memcpy", min_ratio},
      {"sizes", rows}};
  bench::emit(argc, argv, j);
  return 0;
}
