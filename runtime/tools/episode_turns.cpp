#include "runtime/tools/episode_turns.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "runtime/common/framed_child.hpp"
#include "runtime/common/rng.hpp"
#include "runtime/text/chat_template.hpp"
#include "runtime/tools/builtin_env.hpp"

namespace asyncrl {

namespace {

// Brings the process to the point before `c.turn`; returns the failed call's result, or
// nullopt when ready.
std::optional<env_result> bring_up(external_env& env, const env_call& c, uint64_t seed) {
  if (env.knows(c.episode)) return std::nullopt;
  auto r = env.reset(c.episode, c.task, c.ground_truth, mix64(seed ^ c.episode));
  if (r.outcome != env_outcome::ok) return r;
  for (size_t i = 0; i < c.earlier.size(); ++i) {
    r = env.step(c.episode, static_cast<int32_t>(i + 1), c.earlier[i]);
    if (r.outcome != env_outcome::ok) return r;
  }
  return std::nullopt;
}

}  // namespace

external_env_options external_env_options_from(const env_section& env) {
  external_env_options o;
  o.command = split_command(env.command);
  o.socket = env.socket;
  o.timeout_s = static_cast<double>(env.timeout_ms) / 1000.0;
  return o;
}

env_answer calculator_answer(chat_format format, const std::string& text, bool tool) {
  env_answer out;
  auto step = calculator_turn(format, text);
  out.observations = std::move(step.observations);
  out.done = step.done;
  if (!tool)
    for (auto& o : out.observations)
      o = "error: tool unavailable\n";
  return out;
}

env_answer external_answer(external_env& env, const env_call& c, uint64_t seed,
                           int64_t max_retries) {
  env_answer out;
  for (int64_t attempt = 0;; ++attempt) {
    auto failed = bring_up(env, c, seed);
    if (!failed) {
      auto r = env.step(c.episode, c.turn, c.text);
      if (r.outcome == env_outcome::ok) {
        out.observations = {std::move(r.observation)};
        out.done = r.done;
        out.has_reward = r.has_reward;
        out.reward = r.reward;
        if (r.done) env.close(c.episode);
        return out;
      }
      failed = std::move(r);
    }
    out.error = std::string(to_string(failed->outcome)) + ": " + failed->error;
    if (attempt >= max_retries || env.gave_up()) {
      out.failed = out.done = true;
      if (env.gave_up()) out.error += " (" + env.give_up_reason() + ")";
      return out;
    }
    ++out.failed_attempts;
    spdlog::warn("environment: episode {} turn {} failed ({}); replaying it on a fresh process",
                 c.episode, c.turn, out.error);
  }
}

std::string model_turn_text(const tokenizer& tok, const std::vector<int32_t>& tokens,
                            size_t turn_start, int32_t stop_id) {
  size_t end = tokens.size();
  if (end > turn_start && tokens[end - 1] == stop_id) --end;
  return tok.decode(std::vector<int32_t>(tokens.begin() + static_cast<std::ptrdiff_t>(turn_start),
                                         tokens.begin() + static_cast<std::ptrdiff_t>(end)));
}

bool episode_ends(const env_answer& a, int64_t turns, int64_t tokens, int64_t max_turns,
                  int64_t max_tokens) {
  return a.failed || a.done || turns >= max_turns || tokens >= max_tokens;
}

observation_ids observation_tokens(const tokenizer& tok, chat_format format,
                                   const std::vector<std::string>& observations,
                                   int64_t max_observation_tokens, int64_t room) {
  std::string text;
  if (format == chat_format::none) {
    for (const auto& o : observations)
      text += o;
  } else {
    text = render_tool_responses(format, observations);
  }
  observation_ids out;
  out.ids = tok.encode(text);
  if (static_cast<int64_t>(out.ids.size()) > max_observation_tokens) {
    out.ids.resize(static_cast<size_t>(std::max<int64_t>(0, max_observation_tokens)));
    out.cut = true;
  }
  out.fits = static_cast<int64_t>(out.ids.size()) < room;
  if (!out.fits) out.ids.resize(static_cast<size_t>(std::max<int64_t>(0, room)));
  return out;
}

double episode_reward(env_reward_source source, double scorer_reward, bool has_env_reward,
                      double env_reward, bool env_failed) {
  if (env_failed) return 0;
  const double env = has_env_reward ? env_reward : 0.0;
  switch (source) {
    case env_reward_source::scorer:
      return scorer_reward;
    case env_reward_source::env:
      return env;
    case env_reward_source::sum:
      return scorer_reward + env;
  }
  return scorer_reward;
}

}  // namespace asyncrl
