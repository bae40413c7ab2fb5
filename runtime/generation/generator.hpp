#pragma once

// Continuous-batching generation with a KV cache, interruptible at token boundaries.
// Torch-free header: the model is only forward-declared.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace asyncrl {

class CausalLMImpl;

struct sampling_params {
  double temperature = 1.0;  // 0 = greedy
  int32_t top_k = 0;         // 0 = off
  double top_p = 1.0;        // 1 = off
};

/// One response to generate. For a resume, `tokens`, `logprobs` and `versions` already hold
/// the partial response: generation continues after them and counts them against
/// `max_new_tokens`.
struct gen_request {
  uint64_t id = 0;         // the caller's handle, echoed back
  uint64_t prompt_id = 0;  // with sample_index, selects the RNG stream
  uint32_t sample_index = 0;
  std::vector<int32_t> prompt;
  std::vector<int32_t> tokens;    // response tokens so far
  std::vector<float> logprobs;    // log-prob of each token under the weights that sampled it
  std::vector<int64_t> versions;  // weight version that sampled each token
  int32_t max_new_tokens = 64;
  sampling_params sampling;
  int32_t interruptions = 0;  // how often this response was stopped and resumed
  /// Benchmark workloads: EOS is masked out, so the response runs to exactly max_new_tokens.
  /// Its log-probs are then those of the masked distribution.
  bool ignore_eos = false;
};

enum class finish_reason : uint8_t { eos, length, interrupted, error };
const char* to_string(finish_reason r);

struct gen_result {
  gen_request request;  // with the response filled in
  finish_reason reason = finish_reason::eos;
  std::string error;  // set when reason == error
};

struct generator_options {
  int64_t max_slots = 64;      // sequences decoded together
  int64_t max_seq_len = 256;   // prompt + response; the KV cache length
  uint64_t seed = 0;           // RNG streams are (seed, prompt_id, sample_index)
  int32_t eos_id = -1;         // -1 = never stop early
  int64_t prefill_batch = 64;  // contexts per prefill forward
  bool use_kv_cache = true;    // false = recompute the whole context every token (benchmarks)
  /// On CUDA, replay each decode step from a captured CUDA graph (one per batch-size and
  /// key-span bucket) instead of launching its kernels one by one. Same tokens and log-probs
  /// as the eager step; falls back to it (logged once) where capture fails.
  bool cuda_graphs = true;
};

/// Counters since construction.
struct generator_stats {
  int64_t tokens_generated = 0;
  int64_t prefill_tokens = 0;  // context tokens run through prefill (after deduplication)
  int64_t decode_steps = 0;
  int64_t prefills = 0;
  int64_t finished = 0;
  int64_t interrupted = 0;
  int64_t chunks = 0;           // device-resident runs of decode steps (one host read each)
  int64_t graphs_captured = 0;  // CUDA graphs captured (batch and span buckets)
  int64_t graph_replays = 0;    // decode steps replayed from a graph
};

/// Generates responses for many requests at once. Waiting requests join free slots at every
/// step and finished ones leave at once, so one long response never holds back the others.
/// Every token is drawn from its request's own RNG stream at counter = its index in the
/// response, so results are independent of batch composition and of interruptions.
/// Not thread-safe: one owner thread drives it.
class generator {
 public:
  generator(std::shared_ptr<CausalLMImpl> model, generator_options opt);
  ~generator();
  generator(const generator&) = delete;
  generator& operator=(const generator&) = delete;

  /// Queues a request. Bad requests (empty prompt, over the cache length) finish with
  /// reason `error` at the next step instead of throwing.
  void submit(gen_request r);
  /// Admits waiting requests into free slots (one prefill for each distinct context), then
  /// runs up to `max_steps` decode steps. Returns the requests that finished meanwhile.
  /// The decode steps run on the device back to back, each sampling from the previous one's
  /// token, and the host reads the tokens once at the end (a chunk): a row that finishes
  /// inside the chunk decodes on until it ends and its extra tokens are dropped, and freed
  /// slots are refilled at the next chunk.
  std::vector<gen_result> step(int max_steps);
  /// Steps until nothing is active or waiting.
  std::vector<gen_result> run_all();
  /// Stops everything at the current token boundary. Active requests come back with their
  /// partial tokens, waiting ones unchanged, all with reason `interrupted`. The KV cache is
  /// dropped: a resume rebuilds it by prefill, under whatever weights are loaded then.
  std::vector<gen_result> interrupt();

  /// Stops one request (active or waiting) at the current token boundary and returns it with
  /// its tokens so far and reason `interrupted`; its cache row is freed for the next admit.
  /// nullopt when no request has this id (it finished already). For a client that went away
  /// or a stop string that matched (asyncrl serve).
  std::optional<gen_result> cancel(uint64_t id);

  /// The weight version stamped on tokens sampled from now on.
  void set_version(int64_t v);
  int64_t version() const;

  /// The tokens an active request has sampled so far (streaming output); empty when no active
  /// request has this id.
  std::vector<int32_t> tokens_so_far(uint64_t id) const;
  /// An active request as it stands (tokens and log-probs so far), or nullptr. Valid until
  /// the next call that changes the generator.
  const gen_request* active_request(uint64_t id) const;

  size_t num_active() const;
  size_t num_waiting() const;
  bool idle() const { return num_active() == 0 && num_waiting() == 0; }
  const generator_stats& stats() const;
  /// Why CUDA graph capture failed (decoding then runs eagerly); empty when it did not.
  const std::string& graph_error() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace asyncrl
