#pragma once

// What the two runners of multi-turn episodes share (docs/episodes.md): the rollouter (through
// its environment pool) and evaluation (`asyncrl eval`, a run's before/after and in-run checks).
// Both hand each finished model turn to the environment, append its answer the same way and
// score the episode by the same rule, so that evaluation measures the episodes training runs.
// Torch-free and CAF-free.

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/text/chat_format.hpp"
#include "runtime/text/tokenizer.hpp"
#include "runtime/tools/env_section.hpp"
#include "runtime/tools/env_turn.hpp"
#include "runtime/tools/external_env.hpp"

namespace asyncrl {

/// The client options of env.kind=external (command or socket, the per-call timeout).
external_env_options external_env_options_from(const env_section& env);

/// The calculator's answer to a model turn: in-process, it cannot fail. `tool` false answers
/// every call "error: tool unavailable" (evaluation without the tool).
env_answer calculator_answer(chat_format format, const std::string& text, bool tool = true);

/// One model turn through an external environment. A process that does not hold the episode
/// (its first turn, or a fresh process after a failure) gets `reset` (seed mix64(seed ^
/// episode)) and the recorded earlier turns first; after a failed attempt the turn is replayed
/// that way on a fresh process, max_retries times at most. A call that still fails is answered
/// failed (and done), with the error. A finished episode is closed.
env_answer external_answer(external_env& env, const env_call& c, uint64_t seed,
                           int64_t max_retries);

/// The text of the model turn that just ended: tokens[turn_start, end), decoded, without its
/// stop token (what the environment is handed).
std::string model_turn_text(const tokenizer& tok, const std::vector<int32_t>& tokens,
                            size_t turn_start, int32_t stop_id);

/// Whether an episode ends with the environment's answer to its latest model turn: the call
/// failed, the environment said done, or `turns` model turns or `tokens` tokens have reached
/// max_turns / max_tokens (the answer is then not appended).
bool episode_ends(const env_answer& a, int64_t turns, int64_t tokens, int64_t max_turns,
                  int64_t max_tokens);

/// The environment's turn as tokens, ready to append to an episode of `room` tokens left.
struct observation_ids {
  std::vector<int32_t> ids;  // cut to max_observation_tokens, then to the room left
  bool cut = false;          // it was longer than max_observation_tokens
  bool fits = true;          // a model turn has room after it; false: the episode ends with it
};

/// Renders the observations in the model's chat format (chat_format::none: concatenated as
/// they are), encodes them and cuts them to fit.
observation_ids observation_tokens(const tokenizer& tok, chat_format format,
                                   const std::vector<std::string>& observations,
                                   int64_t max_observation_tokens, int64_t room);

/// An episode's reward (env.reward) from the scorer's reward of its final model turn and the
/// environment's (none: 0). An episode whose environment failed scores 0.
double episode_reward(env_reward_source source, double scorer_reward, bool has_env_reward,
                      double env_reward, bool env_failed);

}  // namespace asyncrl
