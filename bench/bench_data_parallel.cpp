// The data-parallel trainer's memory and collectives, one process per rank (forked before torch
// starts), Gloo on loopback, as `asyncrl train` runs them:
//   - train: W ranks, each holding its token-balanced share of a fixed batch, take --steps
//     optimizer steps, sharded (trainer.shard_optimizer) or not; each rank reports its AdamW
//     state bytes, its peak RSS and its median step time (the step includes the gradient
//     all-reduce; a sharded step also the weights' all-gather);
//   - overlap (--overlap): W ranks unsharded, with the ranks' gradient sum issued after the
//     backward (trainer.overlap_grad_reduce=false) and during each rank's last backward (true),
//     in --bucket-mb buckets; each rank reports the median wall time of a whole step, from a
//     barrier before its first micro-batch to the end of step();
//   - broadcast: rank 0's weights to every rank in 25 MB buckets, the collective that a weights
//     transport over c10d would use; float32 and bf16, median of --reps.
// Every configuration is its own set of processes, so peak RSS is per rank and per run.
//   build/bench/bench_data_parallel [--shape tiny|small|qwen2.5-0.5b] [--layers N]
//       [--worlds 1,2,3] [--steps 3] [--reps 5] [--broadcast-only] [--overlap]
//       [--bucket-mb 25] [--out FILE]

#include <ATen/Parallel.h>

#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench_util.hpp"
#include "runtime/common/rng.hpp"
#include "runtime/dist/dist_group.hpp"
#include "runtime/model/model.hpp"
#include "runtime/train/dp_split.hpp"
#include "runtime/train/policy_trainer.hpp"

using namespace asyncrl;
using json = nlohmann::ordered_json;

namespace {

model_config shape(const std::string& name, int64_t layers) {
  model_config c;
  c.model_type = model_arch::qwen2;
  c.max_position_embeddings = 512;
  c.tie_word_embeddings = true;
  c.eos_token_id = 2;
  if (name == "qwen2.5-0.5b") {  // the body of Qwen2.5-0.5B with a 100-token vocabulary
    c.hidden_size = 896, c.intermediate_size = 4864, c.num_hidden_layers = 24;
    c.num_attention_heads = 14, c.num_key_value_heads = 2, c.head_dim = 64, c.vocab_size = 100;
  } else if (name == "small") {
    c.hidden_size = 256, c.intermediate_size = 1024, c.num_hidden_layers = 4;
    c.num_attention_heads = 8, c.num_key_value_heads = 2, c.head_dim = 32, c.vocab_size = 1000;
  } else if (name == "tiny") {
    c.hidden_size = 64, c.intermediate_size = 128, c.num_hidden_layers = 2;
    c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 16, c.vocab_size = 64;
  } else {
    throw std::invalid_argument("--shape must be tiny, small or qwen2.5-0.5b, not " + name);
  }
  if (layers > 0) c.num_hidden_layers = layers;
  return c;
}

// 8 groups x 4 responses; prompts of 16 tokens, responses of 24..48.
std::vector<scored_sample> batch(int64_t vocab) {
  rng_stream rng(7, 1, 1);
  uint64_t c = 0;
  auto draw = [&](int lo, int hi) { return lo + static_cast<int>(rng.bits(c++) % (hi - lo + 1)); };
  std::vector<scored_sample> out;
  for (int g = 0; g < 8; ++g) {
    std::vector<int32_t> prompt(16);
    for (auto& t : prompt)
      t = draw(3, static_cast<int>(vocab) - 1);
    for (int k = 0; k < 4; ++k) {
      scored_sample s;
      s.group_id = g, s.index = k, s.uid = g * 4 + k, s.prompt = prompt;
      for (int j = 0, n = draw(24, 48); j < n; ++j) {
        s.response.push_back(draw(3, static_cast<int>(vocab) - 1));
        s.logprobs.push_back(-1.f);
        s.versions.push_back(0);
      }
      s.advantage = (k % 2 ? 1.0 : -1.0);
      out.push_back(std::move(s));
    }
  }
  return out;
}

int64_t peak_rss_bytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

struct job {
  std::string mode;  // train | broadcast
  model_config cfg;
  int world = 1, rank = 0, port = 0, steps = 3, reps = 5;
  bool shard = false;
  bool overlap = false;
  double bucket_mb = 25;
};

json run_rank(const job& j) {
  at::set_num_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / j.world));
  std::unique_ptr<dist_group> g;
  if (j.world > 1) {
    dist_options o;
    o.rank = j.rank, o.world = j.world, o.port = j.port;
    o.timeout = std::chrono::milliseconds(600000);
    g = dist_group::connect(o);
  }
  json r = {{"rank", j.rank}};
  auto model = init_causal_lm(j.cfg, 0.02, 1, torch::kCPU);
  if (j.mode == "broadcast") {
    for (auto dtype : {at::kFloat, at::kBFloat16}) {
      std::vector<at::Tensor> ws;
      int64_t bytes = 0;
      for (auto& p : model->parameters()) {
        auto w = p.detach().to(dtype).contiguous();
        // Gloo in libtorch 1.13 reduces no bf16; a broadcast only moves bytes, so as bytes.
        ws.push_back(dtype == at::kBFloat16 ? w.reshape({-1}).view(at::kByte) : w);
        bytes += ws.back().nbytes();
      }
      std::vector<double> ms;
      for (int i = 0; i < j.reps; ++i) {
        g->barrier();
        const double t0 = bench::now_s();
        // Buckets as the gradient all-reduce makes them: flat copies of 25 MB.
        std::vector<at::Tensor> bucket, flats;
        int64_t in_bucket = 0;
        auto flush = [&] {
          if (bucket.empty()) return;
          std::vector<at::Tensor> parts;
          for (auto& t : bucket)
            parts.push_back(t.reshape({-1}));
          flats.push_back(at::cat(parts));
          bucket.clear();
          in_bucket = 0;
        };
        for (auto& w : ws) {
          if (in_bucket + static_cast<int64_t>(w.nbytes()) > (25 << 20)) flush();
          bucket.push_back(w);
          in_bucket += w.nbytes();
        }
        flush();
        g->broadcast(flats, 0);
        ms.push_back((bench::now_s() - t0) * 1e3);
      }
      r[dtype == at::kFloat ? "float32" : "bf16"] = {{"bytes", bytes},
                                                     {"broadcast_ms_median", bench::median(ms)}};
    }
    r["peak_rss_bytes"] = peak_rss_bytes();
    return r;
  }
  for (auto& p : model->parameters())
    p.set_requires_grad(true);
  policy_trainer_params tp;
  tp.lr = 1e-5;
  tp.compute_ref = false;
  tp.overlap_grad_reduce = j.overlap;
  tp.grad_bucket_bytes = static_cast<int64_t>(j.bucket_mb * (1 << 20));
  policy_trainer pt(model, tp);
  if (g) pt.join_data_parallel(*g, j.shard);
  const auto samples = batch(j.cfg.vocab_size);
  std::vector<int64_t> tokens(8, 0);
  for (const auto& s : samples)
    tokens[s.group_id] += static_cast<int64_t>(s.response.size());
  const auto owner = assign_by_tokens(tokens, j.world);
  std::vector<double> step_ms, wall_ms;
  int64_t mine = 0;
  int groups = 0;
  for (int grp = 0; grp < 8; ++grp)
    groups += owner[grp] == j.rank;
  for (int s = 0; s < j.steps; ++s) {
    pt.begin_batch();
    if (g) g->barrier();
    const double t_begin = bench::now_s();
    mine = 0;
    int left = groups;
    for (int grp = 0; grp < 8; ++grp) {
      if (owner[grp] != j.rank) continue;
      std::vector<const scored_sample*> mb;
      for (const auto& x : samples)
        if (static_cast<int>(x.group_id) == grp) mb.push_back(&x);
      pt.accumulate(mb, --left == 0);  // the rank's last: sums during its backward if asked
      mine += tokens[grp];
    }
    const double t0 = bench::now_s();
    pt.step();
    step_ms.push_back((bench::now_s() - t0) * 1e3);
    wall_ms.push_back((bench::now_s() - t_begin) * 1e3);
  }
  r["tokens_per_step"] = mine;
  r["step_wall_ms_median"] = bench::median(wall_ms);
  r["optimizer_state_bytes"] = pt.optimizer_state_bytes();
  r["peak_rss_bytes"] = peak_rss_bytes();
  r["optimizer_step_ms_median"] = bench::median(step_ms);
  return r;
}

// Forks one process per rank (before this process touches torch), collects their JSON.
json run_job(job j) {
  j.port = j.world > 1 ? free_port() : 0;
  std::vector<std::pair<pid_t, int>> kids;
  for (int r = 0; r < j.world; ++r) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe");
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      job mine = j;
      mine.rank = r;
      std::string out;
      try {
        out = run_rank(mine).dump();
      } catch (const std::exception& e) {
        out = json{{"rank", r}, {"error", e.what()}}.dump();
      }
      (void)!write(fds[1], out.data(), out.size());
      close(fds[1]);
      _exit(0);
    }
    close(fds[1]);
    kids.emplace_back(pid, fds[0]);
  }
  json ranks = json::array();
  for (auto& [pid, fd] : kids) {
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;)
      text.append(buf, n);
    close(fd);
    waitpid(pid, nullptr, 0);
    ranks.push_back(text.empty() ? json{{"error", "no output"}} : json::parse(text));
  }
  return {{"mode", j.mode},       {"world", j.world},         {"shard", j.shard},
          {"overlap", j.overlap}, {"bucket_mb", j.bucket_mb}, {"ranks", ranks}};
}

}  // namespace

int main(int argc, char** argv) {
  const auto name = bench::arg(argc, argv, "--shape", "small");
  const auto cfg = shape(name, std::stoll(bench::arg(argc, argv, "--layers", "0")));
  json out = {{"bench", "data_parallel"},
              {"machine", bench::machine()},
              {"libtorch", ASYNCRL_LIBTORCH_VERSION},
              {"shape", name},
              {"layers", cfg.num_hidden_layers},
              {"parameters", cfg.num_parameters()}};
  json runs = json::array();
  const int steps = std::stoi(bench::arg(argc, argv, "--steps", "3"));
  const int reps = std::stoi(bench::arg(argc, argv, "--reps", "5"));
  const double bucket_mb = std::stod(bench::arg(argc, argv, "--bucket-mb", "25"));
  if (bench::flag(argc, argv, "--overlap")) {
    // Only the comparison: after, during, after, during (alternating against drift).
    for (const auto& w : bench::split_list(bench::arg(argc, argv, "--worlds", "2")))
      for (int k = 0; k < 4; ++k)
        runs.push_back(
            run_job({"train", cfg, std::stoi(w), 0, 0, steps, reps, false, k % 2 == 1, bucket_mb}));
    out["runs"] = runs;
    bench::emit(argc, argv, out);
    return 0;
  }
  for (const auto& w : bench::split_list(bench::arg(argc, argv, "--worlds", "1,2"))) {
    const int world = std::stoi(w);
    if (!bench::flag(argc, argv, "--broadcast-only"))
      for (bool shard : {false, true}) {
        if (shard && world == 1) continue;
        runs.push_back(run_job({"train", cfg, world, 0, 0, steps, reps, shard, true, bucket_mb}));
      }
    if (world > 1)
      runs.push_back(run_job({"broadcast", cfg, world, 0, 0, steps, reps, false, true, bucket_mb}));
  }
  out["runs"] = runs;
  bench::emit(argc, argv, out);
  return 0;
}
