#pragma once

// The generation side of `asyncrl serve`: one thread owns the model and a generator and runs
// every request's choices in one continuous batch. Requests join at the next round and leave
// when they end, so a long response never holds back a short one. HTTP threads only submit,
// cancel and receive updates. Torch-free header.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/generation/generator.hpp"
#include "runtime/text/tokenizer.hpp"

namespace asyncrl {

/// The choices one request asks for.
struct serve_job {
  std::vector<int32_t> prompt;
  int32_t n = 1;
  int32_t max_tokens = 16;
  sampling_params sampling;
  /// The request's RNG stream: choice i samples from stream (seed, i), so the same seed gives
  /// the same output whatever else is in the batch. Unset: a fresh stream per request.
  std::optional<int64_t> seed;
  std::vector<std::string> stop;  // stop strings
  std::vector<int32_t> stop_ids;  // stop tokens (the chat format's end of turn, or EOS)
};

/// New output of one choice since the last update.
struct choice_delta {
  int32_t index = 0;
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;  // of `tokens`, under the sampling distribution
  std::string finish_reason;    // "" while running, else "stop" or "length"
};

/// What a job's sink receives: deltas of the choices that moved, and `done` once every choice
/// has ended (or `error` is set).
struct job_update {
  std::vector<choice_delta> deltas;
  bool done = false;
  std::string error;
  int64_t completion_tokens = 0;  // all choices, so far
  int64_t version = 0;            // the weights version of the newest tokens
};

using job_sink = std::function<void(const job_update&)>;

struct serve_engine_stats {
  int64_t requests = 0;
  int64_t tokens_generated = 0;
  int64_t active_choices = 0;
  int64_t weight_updates = 0;
};

class serve_engine {
 public:
  /// `steps_per_round`: decode steps between two looks at new requests, cancellations and
  /// stop strings (the generator's chunk).
  serve_engine(std::shared_ptr<CausalLMImpl> model, tokenizer_ptr tok, generator_options opt,
               int32_t steps_per_round, int64_t version);
  /// Ends every job still running with error "the server is shutting down".
  ~serve_engine();
  serve_engine(const serve_engine&) = delete;
  serve_engine& operator=(const serve_engine&) = delete;

  /// Queues a job; `sink` is called on the engine thread, never after cancel() returns... for
  /// that job (see cancel). Returns the job's handle.
  uint64_t submit(serve_job job, job_sink sink);
  /// Drops a job (its client went away): its choices stop at the next round, and its sink is
  /// not called again once this returns.
  void cancel(uint64_t job);
  /// Weights to load between two rounds (following a run): `load` runs on the engine thread
  /// with the model to copy into; tokens sampled after it are stamped `version`.
  void stage_weights(std::function<void(CausalLMImpl&)> load, int64_t version);

  int64_t version() const;
  /// The longest prompt + response (the generator's KV cache length).
  int64_t max_seq_len() const { return max_seq_len_; }
  serve_engine_stats stats() const;

 private:
  struct choice;
  struct job_state;
  void loop();
  void admit(std::deque<std::pair<uint64_t, std::pair<serve_job, job_sink>>>& incoming);
  void advance(std::vector<gen_result> finished);

  std::shared_ptr<CausalLMImpl> model_;
  tokenizer_ptr tok_;
  int64_t max_seq_len_ = 0;
  int32_t steps_per_round_ = 1;
  std::unique_ptr<generator> gen_;  // engine thread only

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  uint64_t next_job_ = 1;
  std::deque<std::pair<uint64_t, std::pair<serve_job, job_sink>>> incoming_;
  std::set<uint64_t> cancelled_;
  std::function<void(CausalLMImpl&)> staged_load_;
  int64_t staged_version_ = 0;
  int64_t version_ = 0;
  serve_engine_stats stats_;
  // Sinks are called with mu_ released but sink_mu_ held, so cancel() (which takes sink_mu_)
  // returns only when no call of the cancelled job's sink is running.
  std::mutex sink_mu_;

  // Engine thread only.
  std::map<uint64_t, std::unique_ptr<job_state>> jobs_;
  std::map<uint64_t, std::pair<uint64_t, int32_t>> by_gen_id_;  // generator id -> (job, choice)
  uint64_t next_gen_id_ = 1;
  uint64_t fresh_stream_ = 0;

  std::thread thread_;
};

}  // namespace asyncrl
