#include "runtime/tools/builtin_env.hpp"

#include <cmath>
#include <stdexcept>

#include "runtime/common/rng.hpp"
#include "runtime/text/tool_calls.hpp"
#include "runtime/tools/calculator.hpp"

namespace asyncrl {

namespace {

// The standard normal quantile at 0.99: p99 = median * exp(sigma * z99).
constexpr double kZ99 = 2.3263478740408408;
// Latency draws use their own stream family, apart from the sampler's (seed, group, index).
constexpr uint64_t kLatencyStream = 0x6c6174656e6379ull;  // "latency"

env_step untemplated_turn(std::string_view text) {
  env_step s;
  auto call = parse_calc_call(text);
  switch (call.kind) {
    case calc_call_kind::final_answer:
      s.done = true;
      break;
    case calc_call_kind::call:
      s.observations.push_back(run_calculator(call.expr));
      break;
    case calc_call_kind::malformed:
      s.observations.push_back("invalid tool call: " + call.error + "\n");
      break;
  }
  return s;
}

// A turn in a chat family's own tool-call syntax: each well-formed call to `calculator` with a
// string `expression` is evaluated; anything else answers why it is invalid. No call at all is
// the final answer.
env_step templated_turn(chat_format format, std::string_view text) {
  env_step s;
  auto turn = parse_tool_calls(format, std::string(text));
  for (const auto& call : turn.calls) {
    if (call.name != "calculator") {
      s.observations.push_back("invalid tool call: unknown tool '" + call.name +
                               "' (the tool is 'calculator')");
      continue;
    }
    auto args = nlohmann::json::parse(call.arguments_json, nullptr, /*allow_exceptions=*/false);
    auto expr = args.is_object() ? args.find("expression") : args.end();
    if (!args.is_object() || expr == args.end() || !expr->is_string()) {
      s.observations.push_back(
          "invalid tool call: calculator needs a string argument 'expression'");
      continue;
    }
    auto out = run_calculator(expr->get<std::string>());
    if (!out.empty() && out.back() == '\n') out.pop_back();  // the template frames it
    s.observations.push_back(std::move(out));
  }
  for (const auto& e : turn.errors)
    s.observations.push_back(e);
  s.done = s.observations.empty();
  return s;
}

}  // namespace

env_step calculator_turn(chat_format format, std::string_view text) {
  if (format == chat_format::none || format == chat_format::auto_detect)
    return untemplated_turn(text);
  return templated_turn(format, text);
}

std::vector<trace_span> split_calculator_trace(std::string_view answer) {
  std::vector<trace_span> spans;
  size_t pos = 0;
  for (int turn = 1;; ++turn) {
    const auto end = answer.find(kTraceTurnEnd, pos);
    if (end == std::string_view::npos) {
      spans.push_back({std::string(answer.substr(pos)), true});
      return spans;
    }
    auto model = answer.substr(pos, end - pos);
    auto step = calculator_turn(chat_format::none, model);
    std::string tool;
    for (auto& o : step.observations)
      tool += o;
    pos = end + kTraceTurnEnd.size();
    if (step.done || answer.compare(pos, tool.size(), tool) != 0)
      throw std::runtime_error("tool trace: turn " + std::to_string(turn) + " '" +
                               std::string(model) + "' is answered '" + tool +
                               "' by the calculator, but the trace goes on with '" +
                               std::string(answer.substr(pos, tool.size() + 8)) + "'");
    spans.push_back({std::string(model), true});
    spans.push_back({std::move(tool), false});
    pos += spans.back().text.size();
  }
}

double tool_latency_ms(const env_section& env, uint64_t seed, uint64_t episode, int32_t turn) {
  if (env.latency_median_ms <= 0) return 0;
  rng_stream r(seed ^ kLatencyStream, episode, static_cast<uint64_t>(turn));
  // Box-Muller from two uniforms; 1 - u keeps the log's argument in (0, 1].
  const double u1 = 1.0 - r.uniform(0), u2 = r.uniform(1);
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  const double sigma = std::log(env.latency_p99_ratio) / kZ99;
  return env.latency_median_ms * std::exp(sigma * z);
}

}  // namespace asyncrl
