// asyncrl's trainer step and generation on one device, at a stated model shape, in float32 and
// bf16: tokens/s, model TFLOP/s, MFU against the device's measured bf16 matmul peak, and peak
// memory. bench/device_compare.py runs it next to plain PyTorch and HF generate() and an end-to-
// end fully async run, and prints the ratios.
//   build/bench/bench_device_throughput [--device cuda|cpu] [--shape qwen2.5-0.5b|small]
//       [--batch B] [--prompt P] [--new-tokens N] [--micro-batch M] [--steps S] [--reps R]
//       [--precisions float32,bf16] [--matmul 8192] [--out FILE]
// Defaults: on CUDA (when present) the Qwen2.5-0.5B body (hidden 896, 24 layers, 14/2 heads,
// MLP 4864, vocab 100, tied), batch 128 x (16 prompt + 48 new) tokens; on the CPU a small shape
// (hidden 64, 2 layers) at batch 8 x (8 + 8), so that CI runs it in seconds.
//
// Trainer rows, per precision:
//   rl           the step of a run with the default objective: GRPO with the old policy's
//                log-probs recomputed and the reference forward for the kl metric (3 forwards,
//                1 backward: 10 N FLOPs per token for N parameters);
//   policy_only  only the policy's forward and backward (use_rollout_logprobs, no reference:
//                6 N FLOPs per token), the same work as a plain PyTorch training step.
// Tokens are every position through the forward: batch * (prompt + new), as a plain LM step
// counts them. FLOPs leave attention scores out (small at these lengths), as the usual 6 N does.

#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include "bench/bench_util.hpp"
#include "runtime/common/rng.hpp"
#include "runtime/generation/generator.hpp"
#include "runtime/model/device_memory.hpp"
#include "runtime/model/model.hpp"
#include "runtime/model/weight_sync.hpp"
#include "runtime/train/policy_trainer.hpp"

using namespace asyncrl;

namespace {

struct options {
  std::string device;
  std::string shape;
  int64_t vocab = 100, batch = 0, prompt = 0, new_tokens = 0, micro = 0, group = 8;
  int steps = 3, reps = 2, matmul = 0;
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
  } else if (o.shape == "small") {
    c.hidden_size = 64, c.intermediate_size = 192, c.num_hidden_layers = 2;
    c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 16;
  } else {
    throw std::invalid_argument("--shape must be qwen2.5-0.5b or small, not " + o.shape);
  }
  c.validate("--shape " + o.shape);
  return c;
}

int device_index(const torch::Device& d) {
  return d.is_cuda() ? (d.has_index() ? d.index() : 0) : -1;
}

// Peak TFLOP/s of an (n x n) @ (n x n) matmul in `dtype` on the device: what MFU is measured
// against (the measured peak, not the data sheet's).
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
  policy_trainer t(init_causal_lm(cfg, 0.02, 1, dev), p);
  std::vector<double> step_s;
  for (int s = 0; s < o.steps + 1; ++s) {  // the first step warms up (allocator, kernels)
    double t0 = bench::now_s();
    t.begin_batch();
    for (int64_t i = 0; i < o.batch; i += o.micro) {
      std::vector<const scored_sample*> mb;
      for (int64_t j = i; j < std::min(o.batch, i + o.micro); ++j)
        mb.push_back(&samples[j]);
      t.accumulate(mb);
    }
    t.step();
    cuda_synchronize();
    if (s > 0) step_s.push_back(bench::now_s() - t0);
  }
  const double s = bench::median(step_s);
  const double tokens = double(o.batch * (o.prompt + o.new_tokens));
  const double flops_per_token = (policy_only ? 6.0 : 10.0) * double(cfg.num_parameters());
  const double tflops = tokens * flops_per_token / s / 1e12;
  nlohmann::ordered_json j{{"precision", precision == train_precision::bf16 ? "bf16" : "float32"},
                           {"objective", policy_only ? "policy_only" : "rl"},
                           {"step_s", s},
                           {"step_s_runs", step_s},
                           {"tokens_per_s", tokens / s},
                           {"response_tokens_per_s", double(o.batch * o.new_tokens) / s},
                           {"model_tflops", tflops},
                           {"mfu_vs_bf16_peak", peak_tflops > 0 ? tflops / peak_tflops : 0.0}};
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
  master = CausalLM(nullptr);
  auto samples = synthetic_samples(o);  // their prompts
  auto run = [&] {
    generator_options go;
    go.max_slots = o.batch;
    go.max_seq_len = o.prompt + o.new_tokens;
    go.prefill_batch = o.batch;
    go.seed = 3;
    go.eos_id = -1;  // fixed lengths: every request generates exactly new_tokens
    generator g(model.ptr(), go);
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
    g.run_all();
    cuda_synchronize();
    return bench::now_s() - t0;
  };
  run();  // warm-up
  std::vector<double> secs;
  for (int r = 0; r < o.reps; ++r)
    secs.push_back(run());
  const double s = bench::median(secs);
  const double tokens = double(o.batch * o.new_tokens);
  // Decode FLOPs: 2 N per generated token (prefill and attention left out).
  const double tflops = tokens * 2.0 * double(cfg.num_parameters()) / s / 1e12;
  nlohmann::ordered_json j{{"dtype", bf16 ? "bf16" : "float32"},
                           {"s", s},
                           {"s_runs", secs},
                           {"tokens_per_s", tokens / s},
                           {"model_tflops", tflops},
                           {"mfu_vs_bf16_peak", peak_tflops > 0 ? tflops / peak_tflops : 0.0}};
  j.update(memory_json(dev));
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
  o.vocab = std::stoll(bench::arg(argc, argv, "--vocab", "100"));
  o.batch = std::stoll(bench::arg(argc, argv, "--batch", big ? "128" : "8"));
  o.prompt = std::stoll(bench::arg(argc, argv, "--prompt", big ? "16" : "8"));
  o.new_tokens = std::stoll(bench::arg(argc, argv, "--new-tokens", big ? "48" : "8"));
  o.micro = std::stoll(bench::arg(argc, argv, "--micro-batch", "32"));
  o.steps = std::stoi(bench::arg(argc, argv, "--steps", "3"));
  o.reps = std::stoi(bench::arg(argc, argv, "--reps", "2"));
  o.matmul = std::stoi(bench::arg(argc, argv, "--matmul", big ? "8192" : "512"));
  o.precisions = bench::split_list(bench::arg(argc, argv, "--precisions", "float32,bf16"));
  const int threads = std::stoi(
      bench::arg(argc, argv, "--threads", std::to_string(std::thread::hardware_concurrency())));
  at::set_num_threads(threads);
  if (dev.is_cuda() && !cuda) {
    std::cerr << "bench_device_throughput: --device " << o.device << " but no CUDA device\n";
    return 2;
  }
  const auto cfg = shape_config(o);

  nlohmann::ordered_json peak{{"bf16", matmul_tflops(dev, at::kBFloat16, o.matmul)},
                              {"float32", matmul_tflops(dev, at::kFloat, o.matmul)},
                              {"n", o.matmul}};
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
    for (bool policy_only : {true, false})
      trainer.push_back(bench_trainer(o, cfg, dev, tp, policy_only, bf16_peak));
    gen.push_back(bench_generation(o, cfg, dev, bf16, bf16_peak));
  }
  nlohmann::ordered_json j{{"benchmark", "device_throughput"},
                           {"machine", bench::machine()},
                           {"device", o.device},
                           {"libtorch", ASYNCRL_LIBTORCH_VERSION},
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
                           {"matmul_peak_tflops", peak},
                           {"trainer", trainer},
                           {"generation", gen},
                           {"host_peak_rss_bytes", host_peak_rss_bytes()}};
  bench::emit(argc, argv, j);
  return 0;
}
