#pragma once

// The built-in tool task (data.task: arith_tools): multi-step integer arithmetic that is hard in
// the head but easy with the calculator (runtime/tools/calculator.hpp). Every problem has at
// least one product of two `digits`-digit numbers, and comes with a worked tool trace (one
// binary operation per calculator call) and a no-tool answer for the without-tool evaluation.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/task/dataset.hpp"
#include "runtime/task/task_arith.hpp"  // arith_splits

namespace asyncrl {

/// Problems `t0 op1 t1 ... =?` with a term count uniform in [terms_min, terms_max], every term
/// exactly `digits` digits, each op drawn from `ops` (a subset of "*+-" that holds '*'), and at
/// least one '*'. digits * terms_max <= 18 keeps every intermediate value inside int64.
struct arith_tools_options {
  int terms_min = 2;
  int terms_max = 3;
  int digits = 3;
  std::string ops = "*+-";
};

/// One turn of an episode: what the model writes (without its end-of-turn token), then the
/// environment's answer.
struct tool_turn {
  std::string model;
  std::string observation;
};

/// A worked episode. Every turn but the last is a calculator call `<<EXPR>>` whose observation
/// is the calculator's answer; the last is the final answer "#### N" with an empty observation.
struct tool_trace {
  std::vector<tool_turn> turns;
};

/// The response text of a trace: each model turn, then `eot_text` and its observation when it
/// has one. The final answer gets no marker: the response's stop token follows it
/// (runtime/task/prompting.hpp, encode_trace_response).
std::string flatten(const tool_trace& trace, std::string_view eot_text);

/// One generated problem.
struct tool_problem {
  std::vector<int64_t> terms;
  std::string ops;             // ops[i] stands between terms[i] and terms[i + 1]
  std::string question;        // "347*829+512=?"
  int64_t answer = 0;          // with * before + and -, left to right
  tool_trace trace;            // the calculator solution
  std::string no_tool_answer;  // "#### 288175"
};

/// The calculator solution of terms[0] ops[0] terms[1] ...: left to right, one binary operation
/// per call, each product of a run of '*' computed before it is added or subtracted. Throws
/// std::invalid_argument for a shape mismatch or an op outside "*+-", std::overflow_error when
/// a value leaves int64.
tool_trace arith_tool_trace(const std::vector<int64_t>& terms, const std::string& ops);

/// `n` problems drawn deterministically from `seed`; questions are unique within the result.
/// Throws std::invalid_argument for bad options or when fewer than `n` questions exist.
std::vector<tool_problem> generate_arith_tools(const arith_tools_options& opt, size_t n,
                                               uint64_t seed);

struct arith_tools_splits {
  std::vector<tool_problem> train;
  std::vector<tool_problem> test;
};

/// A disjoint train/test split: one unique draw, then a cut.
arith_tools_splits generate_arith_tools_splits(const arith_tools_options& opt, size_t train_size,
                                               size_t test_size, uint64_t seed);

/// Which worked answer an example carries.
enum class tool_answer_style {
  trace,    // flatten(trace, kTraceTurnEnd): the supervised warm start of tool episodes
  no_tool,  // "#### N": episodes without the tool (env.kind none)
};

/// The example of a problem: its question, the chosen answer, the ground truth N.
qa_example to_qa_example(const tool_problem& p, tool_answer_style style);

/// What load_task_data calls for data.task arith_tools: generate_arith_tools_splits, each
/// problem turned into an example of `style`.
arith_splits generate_arith_tools_examples(const arith_tools_options& opt, size_t train_size,
                                           size_t test_size, uint64_t seed,
                                           tool_answer_style style);

}  // namespace asyncrl
