// asyncrl's trainer step and generation on one device, at a stated model shape, in float32 and
// bf16: tokens/s, model TFLOP/s, MFU against the device's measured bf16 matmul peak, and peak
// memory. bench/device_compare.py runs it next to plain PyTorch and HF generate() and an end-to-
// end fully async run, and prints the ratios.
//   build/bench/bench_device_throughput [--device cuda|cpu]
//       [--shape qwen2.5-0.5b|qwen2.5-1.5b|ops-proxy|demo|small] [--vocab V]
//       [--batch B] [--prompt P] [--new-tokens N] [--micro-batch M] [--micro-batch-tokens T]
//       [--steps S] [--reps R] [--precisions float32,bf16] [--matmul 4096,8192,16384]
//       [--cuda-graphs 1] [--objectives policy_only,rl] [--skip-generation]
//       [--activation-checkpointing 0] [--batch-invariant 0] [--fused-decode 1]
//       [--op-histogram] [--out FILE]
// Defaults: on CUDA (when present) the Qwen2.5-0.5B shape (hidden 896, 24 layers, 14/2 heads,
// MLP 4864, tied) with its real vocabulary, batch 128 x (16 prompt + 48 new) tokens; on the CPU
// a small shape (hidden 64, 2 layers) at batch 8 x (8 + 8), so that CI runs it in seconds.
// Vocabulary: the qwen2.5 shapes default to Qwen2.5's 151,936 (the logits and the embedding are
// a real share of the work); small, demo and ops-proxy keep the char tokenizer's 100. --vocab
// overrides either (--vocab 100 gives the char-vocabulary rows of earlier tables).
// --matmul takes a list of sizes: the peak is the best of them (bf16 and float32 each), and
// every size's figures are kept under matmul_peak_tflops.sweep.
//
// Trainer rows, per precision:
//   rl           GRPO with the old policy's log-probs recomputed and the reference forward for
//                the kl metric (the library's default loss, algorithm.loss=grpo; 3 forwards,
//                1 backward: 10 N FLOPs per token for N parameters). configs/demo.yaml's
//                decoupled loss with loglinear prox runs no old-policy forward: 8 N per token,
//                which is what the end-to-end run of bench/device_compare.py does;
//   policy_only  only the policy's forward and backward (use_rollout_logprobs, no reference:
//                6 N FLOPs per token), the same work as a plain PyTorch training step.
// Each row states its count as flops_per_token_per_parameter.
// Micro-batches: by --micro-batch-tokens packed tokens when > 0 (trainer.micro_batch_tokens;
// default 8192 on CUDA, the whole batch of the default shape in one forward), else by
// --micro-batch responses. Every row also counts the ATen operators dispatched per token
// (a RecordFunction callback): the CPU proxy of kernel launches. The shape `ops-proxy` has the
// 0.5B shape's 24 layers and heads at tiny widths, so the CPU counts the operators of the
// benchmark's shape in seconds (operator counts do not depend on the widths).
// Tokens are every position through the forward: batch * (prompt + new), as a plain LM step
// counts them. FLOPs leave attention scores out (small at these lengths), as the usual 6 N does,
// and do not count the recomputation of --activation-checkpointing 1.
// --batch-invariant 1: both sides with rollout.batch_invariant (the batch-invariant CPU kernels;
// the trainer's forward runs twice, invariant for the values and default for the gradient), to
// measure what the mode costs against a run without it.
// --fused-decode 0: generation decodes by the plain ATen composition instead of the fused
// kernels (rollout.fused_decode=false), the "before" of the kernel and operator counts.

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/cuda.h>

#include "bench/bench_util.hpp"
#include "runtime/common/rng.hpp"
#include "runtime/generation/generator.hpp"
#include "runtime/model/device_memory.hpp"
#include "runtime/model/model.hpp"
#include "runtime/model/weight_sync.hpp"
#include "runtime/train/micro_batching.hpp"
#include "runtime/train/policy_trainer.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

using namespace asyncrl;

namespace {

struct options {
  std::string device;
  std::string shape;
  int64_t vocab = 100, batch = 0, prompt = 0, new_tokens = 0, micro = 0, group = 8;
  int64_t micro_tokens = 0;
  bool cuda_graphs = true;
  bool checkpointing = false;               // trainer.activation_checkpointing
  bool batch_invariant = false;             // rollout.batch_invariant
  bool fused_decode = kFusedDecodeDefault;  // rollout.fused_decode
  int steps = 3, reps = 2;
  std::vector<int> matmul;  // sizes of the peak sweep
  std::vector<std::string> precisions;
};

model_config shape_config(const options& o) {
  model_config c;
  c.model_type = model_arch::qwen2;
  c.vocab_size = o.vocab;
  c.tie_word_embeddings = true;
  c.attention_bias = true;
  c.rope_theta = 10000.0;
  c.max_position_embeddings = std::max<int64_t>(128, o.prompt + o.new_tokens);
  c.eos_token_id = -1;
  if (o.shape == "qwen2.5-0.5b") {
    c.hidden_size = 896, c.intermediate_size = 4864, c.num_hidden_layers = 24;
    c.num_attention_heads = 14, c.num_key_value_heads = 2, c.head_dim = 64;
  } else if (o.shape == "qwen2.5-1.5b") {
    c.hidden_size = 1536, c.intermediate_size = 8960, c.num_hidden_layers = 28;
    c.num_attention_heads = 12, c.num_key_value_heads = 2, c.head_dim = 128;
  } else if (o.shape == "ops-proxy") {
    c.hidden_size = 56, c.intermediate_size = 64, c.num_hidden_layers = 24;
    c.num_attention_heads = 14, c.num_key_value_heads = 2, c.head_dim = 4;
  } else if (o.shape == "demo") {  // configs/demo.yaml's model (vocab 100: the char tokenizer)
    c.hidden_size = 128, c.intermediate_size = 384, c.num_hidden_layers = 4;
    c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 32;
  } else if (o.shape == "small") {
    c.hidden_size = 64, c.intermediate_size = 192, c.num_hidden_layers = 2;
    c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 16;
  } else {
    throw std::invalid_argument(
        "--shape must be qwen2.5-0.5b, qwen2.5-1.5b, ops-proxy, demo or small, not " + o.shape);
  }
  c.validate("--shape " + o.shape);
  return c;
}

// ATen operators dispatched (top-level and nested) while counting is on.
std::atomic<int64_t> g_ops{0};
std::atomic<bool> g_counting{false};
// --op-histogram: each operator's count, to find which one a change multiplied (stderr).
bool g_histogram = false;
std::mutex g_histogram_mu;
std::map<std::string, int64_t> g_histogram_counts;

void install_op_counter() {
  at::addGlobalCallback(at::RecordFunctionCallback([](const at::RecordFunction& fn)
                                                       -> std::unique_ptr<at::ObserverContext> {
                          if (!g_counting.load(std::memory_order_relaxed)) return nullptr;
                          g_ops.fetch_add(1, std::memory_order_relaxed);
                          if (g_histogram) {
                            std::lock_guard<std::mutex> lock(g_histogram_mu);
                            ++g_histogram_counts[fn.name()];
                          }
                          return nullptr;
                        }).scopes({at::RecordScope::FUNCTION}));
}

void print_histogram(const std::string& row) {
  if (!g_histogram) return;
  std::vector<std::pair<int64_t, std::string>> v;
  for (const auto& [name, n] : g_histogram_counts)
    v.emplace_back(n, name);
  std::sort(v.rbegin(), v.rend());
  std::cerr << "operators of " << row << ":\n";
  for (const auto& [n, name] : v)
    std::cerr << "  " << n << " " << name << "\n";
  g_histogram_counts.clear();
}

// Runs `f` and returns the operators it dispatched.
template <class F>
int64_t count_ops(F&& f) {
  g_ops = 0;
  g_counting = true;
  f();
  g_counting = false;
  return g_ops.load();
}

// Whether libtorch's CPU bf16 matmuls go to oneDNN: it asks for AVX512 BW, VL and DQ (as
// ATen's mkldnn_bf16_device_check). Without them a small bf16 bmm loops over its batch in
// select/mm calls, and the CPU dispatches about 1.4x the operators per token: the kept
// counts are per ISA class.
bool cpu_bf16_gemm_onednn() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

int device_index(const torch::Device& d) {
  return d.is_cuda() ? (d.has_index() ? d.index() : 0) : -1;
}

// TFLOP/s of an (n x n) @ (n x n) matmul in `dtype` on the device. The best over the --matmul
// sizes is what MFU is measured against (the measured peak, not the data sheet's): one size may
// not reach it (n = 1024 leaves an H200 far below its peak).
double matmul_tflops(const torch::Device& dev, at::ScalarType dtype, int n) {
  auto opts = torch::TensorOptions().dtype(dtype).device(dev);
  auto a = torch::randn({n, n}, opts), b = torch::randn({n, n}, opts);
  for (int i = 0; i < 2; ++i)
    (void)torch::matmul(a, b);
  cuda_synchronize();
  const int reps = dev.is_cuda() ? 10 : 2;
  double t0 = bench::now_s();
  for (int i = 0; i < reps; ++i)
    (void)torch::matmul(a, b);
  cuda_synchronize();
  return reps * 2.0 * n * double(n) * n / (bench::now_s() - t0) / 1e12;
}

// `batch` samples in groups of `group` sharing a prompt: random ids, the responses' rollout
// log-probs at -log V (ratios near 1 for a fresh model), alternating advantages.
std::vector<scored_sample> synthetic_samples(const options& o) {
  rng_stream rng(7, 1, 1);
  uint64_t c = 0;
  auto tok = [&] { return static_cast<int32_t>(3 + rng.bits(c++) % (o.vocab - 3)); };
  std::vector<scored_sample> out;
  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < o.batch; ++i) {
    if (i % o.group == 0) {
      prompt.clear();
      for (int64_t t = 0; t < o.prompt; ++t)
        prompt.push_back(tok());
    }
    scored_sample s;
    s.uid = static_cast<uint64_t>(i);
    s.group_id = static_cast<uint64_t>(i / o.group);
    s.index = static_cast<uint32_t>(i % o.group);
    s.prompt = prompt;
    for (int64_t t = 0; t < o.new_tokens; ++t) {
      s.response.push_back(tok());
      s.logprobs.push_back(-static_cast<float>(std::log(double(o.vocab))));
      s.versions.push_back(0);
    }
    s.advantage = i % 2 ? 1.0 : -1.0;
    out.push_back(std::move(s));
  }
  return out;
}

nlohmann::ordered_json memory_json(const torch::Device& dev) {
  auto m = cuda_memory(device_index(dev));
  auto j = nlohmann::ordered_json::object();
  if (m.peak_allocated >= 0) {
    j["cuda_peak_allocated_bytes"] = m.peak_allocated;
    j["cuda_peak_reserved_bytes"] = m.peak_reserved;
  }
  return j;
}

nlohmann::ordered_json bench_trainer(const options& o, const model_config& cfg,
                                     const torch::Device& dev, train_precision precision,
                                     bool policy_only, double peak_tflops) {
  reset_cuda_peaks(device_index(dev));
  auto samples = synthetic_samples(o);
  policy_trainer_params p;
  p.precision = precision;
  p.lr = 1e-5;
  p.loss = loss_kind::grpo;
  p.use_rollout_logprobs = policy_only;
  p.compute_ref = !policy_only;
  p.activation_checkpointing = o.checkpointing;
  p.batch_invariant = o.batch_invariant;
  policy_trainer t(init_causal_lm(cfg, 0.02, 1, dev), p);
  std::vector<const scored_sample*> all;
  for (auto& x : samples)
    all.push_back(&x);
  std::vector<std::vector<const scored_sample*>> micro;
  if (o.micro_tokens > 0) {
    micro = split_by_tokens(all, o.micro_tokens, p.shared_prompt_attention);
  } else {
    for (int64_t i = 0; i < o.batch; i += o.micro)
      micro.emplace_back(all.begin() + i, all.begin() + std::min(o.batch, i + o.micro));
  }
  auto one_step = [&] {
    t.begin_batch();
    for (const auto& mb : micro)
      t.accumulate(mb);
    t.step();
    cuda_synchronize();
  };
  std::vector<double> step_s;
  for (int s = 0; s < o.steps + 1; ++s) {  // the first step warms up (allocator, kernels)
    double t0 = bench::now_s();
    one_step();
    if (s > 0) step_s.push_back(bench::now_s() - t0);
  }
  const int64_t ops = count_ops(one_step);
  print_histogram(std::string("trainer ") +
                  (precision == train_precision::bf16 ? "bf16" : "float32") +
                  (policy_only ? " policy_only" : " rl"));
  const double s = bench::median(step_s);
  const double tokens = double(o.batch * (o.prompt + o.new_tokens));
  const double per_parameter = policy_only ? 6.0 : 10.0;  // see the header: rl is 3 fwd + 1 bwd
  const double flops_per_token = per_parameter * double(cfg.num_parameters());
  const double tflops = tokens * flops_per_token / s / 1e12;
  nlohmann::ordered_json j{{"precision", precision == train_precision::bf16 ? "bf16" : "float32"},
                           {"objective", policy_only ? "policy_only" : "rl"},
                           {"step_s", s},
                           {"step_s_runs", step_s},
                           {"tokens_per_s", tokens / s},
                           {"response_tokens_per_s", double(o.batch * o.new_tokens) / s},
                           {"model_tflops", tflops},
                           {"flops_per_token_per_parameter", per_parameter},
                           {"mfu_vs_bf16_peak", peak_tflops > 0 ? tflops / peak_tflops : 0.0},
                           {"activation_checkpointing", o.checkpointing},
                           {"micro_batches", static_cast<int64_t>(micro.size())},
                           {"aten_ops_per_step", ops},
                           {"aten_ops_per_token", double(ops) / tokens}};
  j.update(memory_json(dev));
  return j;
}

nlohmann::ordered_json bench_generation(const options& o, const model_config& cfg,
                                        const torch::Device& dev, bool bf16, double peak_tflops) {
  reset_cuda_peaks(device_index(dev));
  auto master = init_causal_lm(cfg, 0.02, 1, dev);
  CausalLM model(cfg);
  model->to(dev);
  if (bf16) cast_parameters(*model, torch::kBFloat16);
  load_snapshot(*model, snapshot_weights(*master, 0), /*alias=*/false);
  model->eval();
  model->batch_invariant = o.batch_invariant;
  model->fused_decode = o.fused_decode;
  master = CausalLM(nullptr);
  auto samples = synthetic_samples(o);  // their prompts
  generator_stats last_stats;
  // One generator for every run, as a rollouter keeps one: its CUDA graphs are captured in
  // the warm-up run.
  auto make_generator = [&](bool graphs) {
    generator_options go;
    go.max_slots = o.batch;
    go.max_seq_len = o.prompt + o.new_tokens;
    go.prefill_batch = o.batch;
    go.seed = 3;
    go.eos_id = -1;  // fixed lengths: every request generates exactly new_tokens
    go.cuda_graphs = graphs;
    return std::make_unique<generator>(model.ptr(), go);
  };
  auto gen = make_generator(o.cuda_graphs);
  std::vector<gen_result> last;
  auto run_on = [&](generator& g) {
    for (auto& s : samples) {
      gen_request r;
      r.id = s.uid;
      r.prompt_id = s.group_id;
      r.sample_index = s.index;
      r.prompt = s.prompt;
      r.max_new_tokens = static_cast<int32_t>(o.new_tokens);
      g.submit(r);
    }
    double t0 = bench::now_s();
    last = g.run_all();
    cuda_synchronize();
    return bench::now_s() - t0;
  };
  auto run = [&] { return run_on(*gen); };
  run();  // warm-up
  std::vector<double> secs;
  for (int r = 0; r < o.reps; ++r)
    secs.push_back(run());
  last_stats = gen->stats();
  const std::string graph_error = gen->graph_error();
  // The graphs' tokens against eager decoding's (the CPU path), same weights and streams.
  nlohmann::ordered_json check;
  if (dev.is_cuda() && o.cuda_graphs) {
    auto graph_results = last;
    auto eager = make_generator(false);
    run_on(*eager);
    std::map<uint64_t, const gen_result*> by_id;
    for (auto& r : last)
      by_id[r.request.id] = &r;
    int64_t same = 0;
    double worst = 0;
    for (auto& r : graph_results) {
      const auto* e = by_id.at(r.request.id);
      same += r.request.tokens == e->request.tokens ? 1 : 0;
      // Up to the first token that differs: after it the two compare different tokens' log-probs.
      const size_t n = std::min(r.request.logprobs.size(), e->request.logprobs.size());
      for (size_t i = 0; i < n && i < r.request.tokens.size() && i < e->request.tokens.size() &&
                         r.request.tokens[i] == e->request.tokens[i];
           ++i)
        worst = std::max(worst, double(std::abs(r.request.logprobs[i] - e->request.logprobs[i])));
    }
    check = {{"responses", graph_results.size()},
             {"same_tokens", same},
             {"max_logprob_diff_same_prefix", worst}};
  }
  const int64_t ops = count_ops(run);
  print_histogram(std::string("generation ") + (bf16 ? "bf16" : "float32"));
  const double s = bench::median(secs);
  const double tokens = double(o.batch * o.new_tokens);
  // Decode FLOPs: 2 N per generated token (prefill and attention left out).
  const double tflops = tokens * 2.0 * double(cfg.num_parameters()) / s / 1e12;
  nlohmann::ordered_json j{{"dtype", bf16 ? "bf16" : "float32"},
                           {"s", s},
                           {"s_runs", secs},
                           {"tokens_per_s", tokens / s},
                           {"model_tflops", tflops},
                           {"mfu_vs_bf16_peak", peak_tflops > 0 ? tflops / peak_tflops : 0.0},
                           {"decode_steps_all_runs", last_stats.decode_steps},
                           {"chunks_all_runs", last_stats.chunks},
                           {"graph_replays_all_runs", last_stats.graph_replays},
                           {"graphs_captured", last_stats.graphs_captured},
                           {"graph_error", graph_error},
                           {"runs", o.reps + 1},
                           {"graph_vs_eager", check},
                           {"aten_ops_per_run", ops},
                           {"aten_ops_per_token", double(ops) / tokens}};
  j.update(memory_json(dev));
  // In-process weight sync of this model: a float32 master's snapshot in the rollout dtype
  // (the trainer's publish) loaded into the rollout model (the rollouter's), as one version.
  // Both places: the trainer publishes a device snapshot on a GPU (weight_sync_s); the host
  // one is what a checkpoint or a node costs on top (weight_sync_host_s).
  {
    auto trainer_model = init_causal_lm(cfg, 0.02, 2, dev);
    auto time_sync = [&](snapshot_place place) {
      std::vector<double> sync_s;
      for (int r = 0; r < 3; ++r) {
        cuda_synchronize();
        double t0 = bench::now_s();
        auto snap = snapshot_weights(*trainer_model, r + 1,
                                     bf16 ? weight_dtype::bf16 : weight_dtype::float32, place);
        load_snapshot(*model, snap, /*alias=*/false);
        cuda_synchronize();
        sync_s.push_back(bench::now_s() - t0);
      }
      return bench::median(sync_s);
    };
    j["weight_sync_s"] =
        time_sync(on_accelerator(*trainer_model) ? snapshot_place::device : snapshot_place::host);
    j["weight_sync_host_s"] = time_sync(snapshot_place::host);
  }
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  const bool cuda = torch::cuda::is_available();
  o.device = bench::arg(argc, argv, "--device", cuda ? "cuda" : "cpu");
  const torch::Device dev(o.device);
  const bool big = dev.is_cuda();
  o.shape = bench::arg(argc, argv, "--shape", big ? "qwen2.5-0.5b" : "small");
  const bool with_generation = !bench::flag(argc, argv, "--skip-generation");
  const auto objectives =
      bench::split_list(bench::arg(argc, argv, "--objectives", "policy_only,rl"));
  // The qwen2.5 shapes have their model's real vocabulary; the CPU shapes the char tokenizer's.
  const bool real_vocab = o.shape.rfind("qwen2.5-", 0) == 0;
  o.vocab = std::stoll(bench::arg(argc, argv, "--vocab", real_vocab ? "151936" : "100"));
  o.batch = std::stoll(bench::arg(argc, argv, "--batch", big ? "128" : "8"));
  o.prompt = std::stoll(bench::arg(argc, argv, "--prompt", big ? "16" : "8"));
  o.new_tokens = std::stoll(bench::arg(argc, argv, "--new-tokens", big ? "48" : "8"));
  o.micro = std::stoll(bench::arg(argc, argv, "--micro-batch", "32"));
  o.micro_tokens = std::stoll(bench::arg(argc, argv, "--micro-batch-tokens", big ? "8192" : "0"));
  o.cuda_graphs = bench::arg(argc, argv, "--cuda-graphs", "1") != "0";
  o.checkpointing = bench::arg(argc, argv, "--activation-checkpointing", "0") != "0";
  o.batch_invariant = bench::arg(argc, argv, "--batch-invariant", "0") != "0";
  o.fused_decode = bench::arg(argc, argv, "--fused-decode", kFusedDecodeDefault ? "1" : "0") != "0";
  o.steps = std::stoi(bench::arg(argc, argv, "--steps", "3"));
  o.reps = std::stoi(bench::arg(argc, argv, "--reps", "2"));
  for (const auto& n :
       bench::split_list(bench::arg(argc, argv, "--matmul", big ? "4096,8192,16384" : "512")))
    o.matmul.push_back(std::stoi(n));
  if (o.matmul.empty()) {
    std::cerr << "bench_device_throughput: --matmul needs at least one size\n";
    return 2;
  }
  o.precisions = bench::split_list(bench::arg(argc, argv, "--precisions", "float32,bf16"));
  const int threads = std::stoi(
      bench::arg(argc, argv, "--threads", std::to_string(std::thread::hardware_concurrency())));
  at::set_num_threads(threads);
  if (dev.is_cuda() && !cuda) {
    std::cerr << "bench_device_throughput: --device " << o.device << " but no CUDA device\n";
    return 2;
  }
  const auto cfg = shape_config(o);
  g_histogram = bench::flag(argc, argv, "--op-histogram");
  install_op_counter();

  // The peak sweep: "bf16", "float32" are the best over the sizes, "n" the size of the bf16 best.
  nlohmann::ordered_json peak{{"bf16", 0.0}, {"float32", 0.0}, {"n", 0}},
      sweep = nlohmann::ordered_json::array();
  for (int n : o.matmul) {
    const double b = matmul_tflops(dev, at::kBFloat16, n), f = matmul_tflops(dev, at::kFloat, n);
    sweep.push_back({{"n", n}, {"bf16", b}, {"float32", f}});
    if (b > peak["bf16"].get<double>()) {
      peak["bf16"] = b;
      peak["n"] = n;
    }
    peak["float32"] = std::max(peak["float32"].get<double>(), f);
  }
  peak["sweep"] = sweep;
  const double bf16_peak = peak["bf16"].get<double>();
  nlohmann::ordered_json trainer = nlohmann::ordered_json::array(),
                         gen = nlohmann::ordered_json::array();
  for (const auto& p : o.precisions) {
    const bool bf16 = p == "bf16";
    if (!bf16 && p != "float32") {
      std::cerr << "bench_device_throughput: --precisions takes float32 and bf16, not " << p
                << "\n";
      return 2;
    }
    const auto tp = bf16 ? train_precision::bf16 : train_precision::float32;
    for (const auto& obj : objectives)
      trainer.push_back(bench_trainer(o, cfg, dev, tp, obj == "policy_only", bf16_peak));
    if (with_generation) gen.push_back(bench_generation(o, cfg, dev, bf16, bf16_peak));
  }
  nlohmann::ordered_json j{{"benchmark", "device_throughput"},
                           {"machine", bench::machine()},
                           {"device", o.device},
                           {"libtorch", ASYNCRL_LIBTORCH_VERSION},
                           {"cpu_bf16_gemm_onednn", cpu_bf16_gemm_onednn()},
                           {"threads", threads},
                           {"shape",
                            {{"name", o.shape},
                             {"hidden_size", cfg.hidden_size},
                             {"num_hidden_layers", cfg.num_hidden_layers},
                             {"num_attention_heads", cfg.num_attention_heads},
                             {"num_key_value_heads", cfg.num_key_value_heads},
                             {"intermediate_size", cfg.intermediate_size},
                             {"vocab_size", cfg.vocab_size},
                             {"tie_word_embeddings", cfg.tie_word_embeddings},
                             {"parameters", cfg.num_parameters()}}},
                           {"batch", o.batch},
                           {"prompt_tokens", o.prompt},
                           {"new_tokens", o.new_tokens},
                           {"micro_batch", o.micro},
                           {"micro_batch_tokens", o.micro_tokens},
                           {"cuda_graphs", o.cuda_graphs},
                           {"activation_checkpointing", o.checkpointing},
                           {"batch_invariant", o.batch_invariant},
                           {"fused_decode", o.fused_decode},
                           {"matmul_peak_tflops", peak},
                           {"trainer", trainer},
                           {"generation", gen},
                           {"host_peak_rss_bytes", host_peak_rss_bytes()}};
  bench::emit(argc, argv, j);
  return 0;
}
