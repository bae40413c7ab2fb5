#pragma once

// The in-process environments of multi-turn episodes (env.kind=calculator) and the injected
// tool latency every environment kind can get. Torch-free and CAF-free: the environment pool
// actor (actors/env_pool.hpp) calls these; tests call them directly.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/text/chat_format.hpp"
#include "runtime/tools/env_section.hpp"

namespace asyncrl {

/// The environment's side of one model turn.
struct env_step {
  std::vector<std::string> observations;  // one per tool call, in order
  bool done = false;                      // the turn was the final answer (no tool call)
};

/// The calculator tool's answer to a model turn. Untemplated (chat_format::none): a turn that
/// is exactly `<<EXPR>>` is a call whose observation is "VALUE\n"; a turn without `<<` is the
/// final answer; anything else is an invalid call (its observation says why). Chat formats: the
/// turn's tool calls in the model's own syntax (runtime/text/tool_calls.hpp), each named
/// `calculator` with an `expression` argument; none = the final answer. Never throws.
env_step calculator_turn(chat_format format, std::string_view text);

/// A worked tool trace as text (the answers of the built-in tool task, for the supervised warm
/// start): each model turn that calls the tool is followed by kTraceTurnEnd, then the tool's
/// answer; the last model turn is the final answer.
inline constexpr std::string_view kTraceTurnEnd = "<eot>";

struct trace_span {
  std::string text;
  bool model = true;  // the model's turn (ends with the end-of-turn token), else the tool's
};

/// Splits an untemplated calculator trace into model and tool spans, replaying the calculator on
/// each model turn: the tool's span must be exactly its answer. Throws std::runtime_error naming
/// the turn when it is not (a trace that would teach the model a wrong tool). A text without
/// kTraceTurnEnd is one model span.
std::vector<trace_span> split_calculator_trace(std::string_view answer);

/// The injected latency of call (episode, turn) in ms: log-normal with median
/// env.latency_median_ms and p99 = env.latency_p99_ratio x median, a pure function of
/// (seed, episode, turn) so that a replayed run waits the same. 0 when the median is 0.
double tool_latency_ms(const env_section& env, uint64_t seed, uint64_t episode, int32_t turn);

}  // namespace asyncrl
