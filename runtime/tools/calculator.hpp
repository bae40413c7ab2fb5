#pragma once

// The built-in calculator tool: an exact integer evaluator for `+ - * / ( )` and unary minus,
// and the `<<EXPR>>` call syntax of untemplated models (docs/episodes.md). Its input is model
// output, so it is bounded in length, nesting, literal size and work: the time one call takes
// is bounded by construction, and no input makes it throw, crash or recurse without bound.

#include <cstdint>
#include <string>
#include <string_view>

namespace asyncrl {

/// What one evaluation may use. Every input within max_length fits the step budget, so the
/// budget only bites when the limits are changed; it keeps the work bounded whatever they are.
struct calc_limits {
  size_t max_length = 256;   // bytes of expression text
  int max_depth = 32;        // nested parentheses
  int max_digits = 18;       // per literal: 18 digits always fit int64
  int64_t max_steps = 1024;  // literals read plus operators applied
};

/// An evaluation's outcome: `value` when ok, else a short reason in `error` ("division by zero",
/// "not an integer", "overflow", "unexpected ')' at 4", ...).
struct calc_result {
  bool ok = false;
  int64_t value = 0;
  std::string error;
};

/// Evaluates `expr` exactly over int64: `*` and `/` bind tighter than `+` and `-`, all are
/// left-associative, `/` must divide exactly, spaces and tabs are ignored. Never throws.
calc_result evaluate_calc(std::string_view expr, const calc_limits& limits = {});

/// The tool's observation for a result: "VALUE\n", or "error: REASON\n".
std::string calc_observation(const calc_result& r);

/// evaluate_calc then calc_observation: the calculator's whole answer to an expression.
std::string run_calculator(std::string_view expr);

/// What a model turn of an untemplated episode is.
enum class calc_call_kind {
  final_answer,  // no `<<`: the episode's last turn
  call,          // exactly `<<EXPR>>`, surrounding whitespace tolerated
  malformed,     // `<<` anywhere else: answered "invalid tool call: <error>\n"
};

struct calc_call {
  calc_call_kind kind = calc_call_kind::final_answer;
  std::string expr;   // call: the text between `<<` and `>>`
  std::string error;  // malformed: a short reason ("unclosed <<", "more than one call", ...)
};

/// Classifies a model turn's text (without its end-of-turn token). Never throws.
calc_call parse_calc_call(std::string_view turn_text);

}  // namespace asyncrl
