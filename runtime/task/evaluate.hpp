#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/generation/generator.hpp"
#include "runtime/task/dataset.hpp"
#include "runtime/task/prompting.hpp"
#include "runtime/text/tokenizer.hpp"
#include "runtime/tools/env_section.hpp"

namespace asyncrl {

class CausalLMImpl;
struct eval_section;

struct eval_options {
  int64_t samples = 1;  // > 1 adds mean@N with `sampling`
  int64_t max_new_tokens = 48;
  int64_t batch = 128;
  sampling_params sampling;  // for the sampled pass
  uint64_t seed = 0;
  // Episodes (docs/episodes.md) when env.kind is not none: up to max_turns model turns of
  // max_new_tokens each, max_episode_tokens in all, each answered by env (the calculator, or
  // an external environment: its command or socket, timeout, replays, failure rate and
  // observation cap) exactly as in training; env.reward says how an episode is scored.
  env_section env;
  int64_t max_turns = 1;
  int64_t max_episode_tokens = 0;  // 0 = max_new_tokens
  bool tool = true;                // false: every call is answered "error: tool unavailable"
  bool keep_responses = false;     // fill eval_result::responses (greedy pass)
};

// One greedy response, kept for inspection (`asyncrl eval --responses FILE`).
struct eval_response {
  int64_t question = 0;  // index into the evaluated data
  std::string text;      // the whole response: model turns and the tool's answers
  double reward = 0.0;   // of the final model turn
  int64_t turns = 0;     // model turns
};

struct eval_result {
  int64_t questions = 0;
  double pass1 = 0.0;     // greedy accuracy
  double mean_at_n = -1;  // mean accuracy over `samples` sampled responses; -1 when samples == 1
  int64_t samples = 1;
  double mean_response_tokens = 0.0;  // of the greedy pass
  int64_t env_calls = 0;              // of the greedy pass's episodes
  int64_t env_failures = 0;           // calls that failed after their replays (episode scores 0)
  double seconds = 0.0;
  std::vector<eval_response> responses;  // with keep_responses, in question order
};

/// Greedy-only options from the config's eval section (the run's seed for the sampled pass):
/// the same settings for the warm start's checks, a run's before/after and in-run evaluations.
eval_options greedy_eval_options(const eval_section& e, int64_t seed);

/// Greedy pass@1 (and mean@N when samples > 1) on `data`, scored by the rule-based reward (and
/// the environment's, per env.reward). Throws std::runtime_error when the environment fails
/// more than env.max_failure_rate of its calls.
eval_result evaluate(std::shared_ptr<CausalLMImpl> model, const tokenizer& tok,
                     const prompt_format& fmt, const std::vector<qa_example>& data,
                     const eval_options& opt);

}  // namespace asyncrl
