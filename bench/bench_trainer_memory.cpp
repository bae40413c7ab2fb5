// The trainer's host memory and step time on the CPU for one setting of the options that
// decide which buffers it allocates (issue 41): float64 gradient accumulators
// (trainer.deterministic_accumulation), the LM head's logits whole or a chunk of tokens at a
// time (trainer.logprob_chunk_tokens), and the frozen copies the objective reads (old policy,
// reference). One setting per process: peak RSS (VmHWM) only grows, so compare settings by
// running the binary once for each.
//   build/bench/bench_trainer_memory [--hidden 512] [--layers 2] [--vocab 32000]
//       [--prompt 16] [--response 112] [--samples 16] [--micro 2] [--steps 3]
//       [--deterministic 1] [--chunk 2048] [--objective rl|policy_only|lean] [--threads N]
//       [--out FILE]
// --micro: micro-batches per step (the step's samples split evenly), so with --micro >= 2 the
// float64 accumulators are in use. --objective: rl = GRPO with the old policy recomputed and
// the reference for the kl metric (both frozen copies); policy_only = use_rollout_logprobs and
// compute_ref false (neither); lean = the decoupled loss with the loglinear proximal policy,
// kl_coef 0, compute_ref false (neither). Prints: RSS after the trainer is built (weights, AdamW
// moments come at the first step), the peak RSS of the whole run, and the median step time.
//   build/bench/bench_trainer_memory --grad-norm N
// instead measures global_grad_norm alone on one float32 gradient of N elements: the memory its
// call adds to the peak RSS (VmHWM reset through /proc/self/clear_refs), its time, and its value
// against the float64 copy-and-square formula it replaced.

#include <ATen/Parallel.h>

#include <cmath>
#include <fstream>
#include <tuple>
#include <string>

#include "bench/bench_util.hpp"
#include "runtime/common/rng.hpp"
#include "runtime/model/model.hpp"
#include "runtime/train/optimizer.hpp"
#include "runtime/train/policy_trainer.hpp"

using namespace asyncrl;

namespace {

// kB from /proc/self/status ("VmRSS", "VmHWM"), in MiB.
double status_mib(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1)) / 1024.0;
  return -1;
}

// Resets VmHWM to the current RSS (Linux >= 4.0).
void reset_peak() { std::ofstream("/proc/self/clear_refs") << "5"; }

int grad_norm_mode(int argc, char** argv, int64_t n) {
  auto g = at::randn({n}, at::kFloat) * 1e-3;
  std::vector<at::Tensor> grads{g};
  auto measure = [&](auto fn) {
    reset_peak();
    const double before = status_mib("VmHWM");
    const double t0 = bench::now_s();
    const double v = fn();
    return std::tuple{v, status_mib("VmHWM") - before, bench::now_s() - t0};
  };
  auto [v_old, mib_old, s_old] =
      measure([&] { return std::sqrt(g.to(at::kDouble).pow(2).sum().item<double>()); });
  auto [v_new, mib_new, s_new] = measure([&] { return global_grad_norm(grads); });
  nlohmann::ordered_json j{{"benchmark", "grad_norm_memory"},
                           {"machine", bench::machine()},
                           {"elements", n},
                           {"float64_copy_peak_add_mib", mib_old},
                           {"float64_copy_s", s_old},
                           {"sliced_peak_add_mib", mib_new},
                           {"sliced_s", s_new},
                           {"relative_difference", std::abs(v_new - v_old) / v_old}};
  bench::emit(argc, argv, j);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (const auto n = std::stoll(bench::arg(argc, argv, "--grad-norm", "0")); n > 0)
    return grad_norm_mode(argc, argv, n);
  auto num = [&](const char* name, const char* fallback) {
    return std::stoll(bench::arg(argc, argv, name, fallback));
  };
  const int64_t hidden = num("--hidden", "512"), layers = num("--layers", "2");
  const int64_t vocab = num("--vocab", "32000"), prompt = num("--prompt", "16");
  const int64_t response = num("--response", "112"), n_samples = num("--samples", "16");
  const int64_t micro = num("--micro", "2"), steps = num("--steps", "3");
  const bool deterministic = num("--deterministic", "1") != 0;
  const int64_t chunk = num("--chunk", "2048");
  const std::string objective = bench::arg(argc, argv, "--objective", "rl");
  const int threads = static_cast<int>(
      num("--threads", std::to_string(std::thread::hardware_concurrency()).c_str()));
  at::set_num_threads(threads);
  const double rss_start = status_mib("VmRSS");

  model_config c;
  c.model_type = model_arch::qwen2;
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.intermediate_size = hidden * 11 / 4;
  c.num_hidden_layers = layers;
  c.num_attention_heads = hidden / 64;
  c.num_key_value_heads = std::max<int64_t>(1, hidden / 256);
  c.head_dim = 64;
  c.tie_word_embeddings = true;
  c.attention_bias = true;
  c.max_position_embeddings = std::max<int64_t>(128, prompt + response);
  c.eos_token_id = -1;
  c.validate("bench_trainer_memory");

  policy_trainer_params p;
  p.lr = 1e-5;
  p.deterministic_accumulation = deterministic;
  p.logprob_chunk_tokens = chunk;
  if (objective == "policy_only") {
    p.use_rollout_logprobs = true;
    p.compute_ref = false;
  } else if (objective == "lean") {
    p.loss = loss_kind::decoupled;
    p.prox_logp = prox_method::loglinear;
    p.kl_coef = 0;
    p.compute_ref = false;
  } else if (objective != "rl") {
    std::cerr << "bench_trainer_memory: --objective takes rl, policy_only or lean\n";
    return 2;
  }
  policy_trainer t(init_causal_lm(c, 0.02, 1, torch::kCPU), p);
  const double rss_built = status_mib("VmRSS");

  rng_stream rng(7, 1, 1);
  uint64_t k = 0;
  auto tok = [&] { return static_cast<int32_t>(3 + rng.bits(k++) % (vocab - 3)); };
  std::vector<scored_sample> samples(n_samples);
  for (int64_t i = 0; i < n_samples; ++i) {
    auto& s = samples[i];
    s.uid = static_cast<uint64_t>(i);
    s.group_id = static_cast<uint64_t>(i);
    for (int64_t j = 0; j < prompt; ++j)
      s.prompt.push_back(tok());
    for (int64_t j = 0; j < response; ++j) {
      s.response.push_back(tok());
      s.logprobs.push_back(-static_cast<float>(std::log(double(vocab))));
      s.versions.push_back(0);
    }
    s.advantage = i % 2 ? 1.0 : -1.0;
  }
  std::vector<std::vector<const scored_sample*>> parts(micro);
  for (int64_t i = 0; i < n_samples; ++i)
    parts[i * micro / n_samples].push_back(&samples[i]);

  std::vector<double> step_s;
  for (int64_t s = 0; s < steps + 1; ++s) {  // the first step warms up
    const double t0 = bench::now_s();
    t.begin_batch();
    for (const auto& mb : parts)
      t.accumulate(mb);
    t.step();
    if (s > 0) step_s.push_back(bench::now_s() - t0);
  }
  nlohmann::ordered_json j{
      {"benchmark", "trainer_memory"},
      {"machine", bench::machine()},
      {"libtorch", ASYNCRL_LIBTORCH_VERSION},
      {"threads", threads},
      {"parameters", c.num_parameters()},
      {"hidden", hidden},
      {"layers", layers},
      {"vocab", vocab},
      {"tokens_per_micro_batch_response", n_samples / micro * response},
      {"micro_batches", micro},
      {"objective", objective},
      {"deterministic_accumulation", deterministic},
      {"logprob_chunk_tokens", chunk},
      {"has_old", static_cast<bool>(t.old_policy())},
      {"has_reference", static_cast<bool>(t.reference())},
      {"rss_start_mib", rss_start},
      {"rss_built_mib", rss_built},
      {"peak_rss_mib", status_mib("VmHWM")},
      {"step_s", bench::median(step_s)},
      {"step_s_runs", step_s}};
  bench::emit(argc, argv, j);
  return 0;
}
