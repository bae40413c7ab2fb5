#include "runtime/task/task_tools.hpp"

#include <iterator>
#include <limits>
#include <stdexcept>
#include <unordered_set>

#include "runtime/common/rng.hpp"
#include "runtime/tools/builtin_env.hpp"  // kTraceTurnEnd
#include "runtime/tools/calculator.hpp"

namespace asyncrl {

namespace {

// Draws from rng_stream's counter-based bits, which are defined bit-for-bit (unlike the std::
// distributions), so a seed names the same data with every standard library.
class draws {
 public:
  explicit draws(uint64_t seed) : rng_(seed, 0, 0) {}

  /// Uniform in [0, bound), bound > 0; rejection keeps it exactly uniform (no modulo bias).
  uint64_t below(uint64_t bound) {
    const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
    for (;;) {
      const uint64_t r = rng_.bits(counter_++);
      if (r >= threshold) return r % bound;
    }
  }

 private:
  rng_stream rng_;
  uint64_t counter_ = 0;
};

std::string final_answer_text(int64_t v) {
  return "#### " + std::to_string(v);
}

void validate(const arith_tools_options& opt) {
  const std::string who = "arith_tools_options: ";
  if (opt.terms_min < 2)
    throw std::invalid_argument(who + "terms_min must be >= 2, got " +
                                std::to_string(opt.terms_min));
  if (opt.terms_max < opt.terms_min)
    throw std::invalid_argument(who + "terms_max (" + std::to_string(opt.terms_max) +
                                ") must be >= terms_min (" + std::to_string(opt.terms_min) + ")");
  if (opt.digits < 1)
    throw std::invalid_argument(who + "digits must be >= 1, got " + std::to_string(opt.digits));
  // A product of terms_max terms of `digits` digits is below 10^(digits * terms_max), and any
  // mix of sums and products below that again: 18 keeps every value inside int64.
  if (opt.digits * opt.terms_max > 18)
    throw std::invalid_argument(who + "digits * terms_max must be <= 18, got " +
                                std::to_string(opt.digits) + " * " + std::to_string(opt.terms_max));
  for (size_t i = 0; i < opt.ops.size(); ++i) {
    const char op = opt.ops[i];
    if (op != '*' && op != '+' && op != '-')
      throw std::invalid_argument(who + "ops must be a subset of \"*+-\", got \"" + opt.ops + "\"");
    // A repeated op would silently skew the op mix.
    if (opt.ops.find(op) != i)
      throw std::invalid_argument(who + "ops has '" + std::string(1, op) + "' twice");
  }
  // The product is what makes a problem hard in the head.
  if (opt.ops.find('*') == std::string::npos)
    throw std::invalid_argument(who + "ops must contain '*', got \"" + opt.ops + "\"");
}

uint64_t saturating_mul(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<uint64_t>::max() : r;
}

uint64_t saturating_add(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<uint64_t>::max() : r;
}

uint64_t saturating_pow(uint64_t base, int exp) {
  uint64_t p = 1;
  for (int i = 0; i < exp; ++i)
    p = saturating_mul(p, base);
  return p;
}

// Distinct questions: for each term count t, every choice of terms times every op sequence
// with at least one '*' (all sequences less those without one). Saturates at 2^64 - 1.
uint64_t question_space(const arith_tools_options& opt) {
  const uint64_t values = 9 * saturating_pow(10, opt.digits - 1);
  const uint64_t k = opt.ops.size();
  uint64_t total = 0;
  for (int t = opt.terms_min; t <= opt.terms_max; ++t) {
    const uint64_t seqs = saturating_pow(k, t - 1) - saturating_pow(k - 1, t - 1);
    total = saturating_add(total, saturating_mul(saturating_pow(values, t), seqs));
  }
  return total;
}

// a op b, checked; records the call and the calculator's answer to it.
int64_t apply(tool_trace& trace, int64_t a, char op, int64_t b) {
  int64_t v = 0;
  const bool overflow = op == '*'   ? __builtin_mul_overflow(a, b, &v)
                        : op == '+' ? __builtin_add_overflow(a, b, &v)
                                    : __builtin_sub_overflow(a, b, &v);
  if (overflow)
    throw std::overflow_error("arith_tool_trace: " + std::to_string(a) + op + std::to_string(b) +
                              " overflows int64");
  calc_result r;
  r.ok = true;
  r.value = v;
  trace.turns.push_back(
      {"<<" + std::to_string(a) + op + std::to_string(b) + ">>", calc_observation(r)});
  return v;
}

// The calculator solution's calls go into `trace`; returns the value (the final answer).
int64_t solve(const std::vector<int64_t>& terms, const std::string& ops, tool_trace& trace) {
  if (terms.empty() || ops.size() + 1 != terms.size())
    throw std::invalid_argument(
        "arith_tool_trace: " + std::to_string(terms.size()) + " terms need " +
        std::to_string(terms.empty() ? 0 : terms.size() - 1) + " ops, got \"" + ops + "\"");
  if (ops.find_first_not_of("*+-") != std::string::npos)
    throw std::invalid_argument("arith_tool_trace: ops must be from \"*+-\", got \"" + ops + "\"");
  // Term j's run of '*' (terms j..k joined by ops j..k-1), multiplied out left to right; leaves
  // j on the run's last term.
  auto product = [&](size_t& j) {
    int64_t p = terms[j];
    for (; j < ops.size() && ops[j] == '*'; ++j)
      p = apply(trace, p, '*', terms[j + 1]);
    return p;
  };
  size_t j = 0;
  int64_t acc = product(j);
  while (j < ops.size()) {
    const char op = ops[j];  // '+' or '-': a run of '*' stops only there
    ++j;
    const int64_t rhs = product(j);
    acc = apply(trace, acc, op, rhs);
  }
  return acc;
}

}  // namespace

std::string flatten(const tool_trace& trace, std::string_view eot_text) {
  std::string out;
  for (const auto& t : trace.turns) {
    out += t.model;
    if (t.observation.empty()) continue;
    out += eot_text;
    out += t.observation;
  }
  return out;
}

tool_trace arith_tool_trace(const std::vector<int64_t>& terms, const std::string& ops) {
  tool_trace trace;
  const int64_t answer = solve(terms, ops, trace);
  trace.turns.push_back({final_answer_text(answer), ""});
  return trace;
}

std::vector<tool_problem> generate_arith_tools(const arith_tools_options& opt, size_t n,
                                               uint64_t seed) {
  validate(opt);
  const uint64_t space = question_space(opt);
  if (n > space)
    throw std::invalid_argument("generate_arith_tools: asked for " + std::to_string(n) +
                                " unique questions but the options allow only " +
                                std::to_string(space));
  const int64_t lo = static_cast<int64_t>(saturating_pow(10, opt.digits - 1));
  draws rng(seed);
  std::unordered_set<std::string> seen;
  seen.reserve(n);
  std::vector<tool_problem> out;
  out.reserve(n);
  // Draw order per candidate is fixed (term count, terms, ops) so that a seed names the same
  // data everywhere; rejecting repeats makes any prefix of a run equal a shorter run.
  while (out.size() < n) {
    const int t =
        opt.terms_min +
        static_cast<int>(rng.below(static_cast<uint64_t>(opt.terms_max - opt.terms_min + 1)));
    tool_problem p;
    for (int i = 0; i < t; ++i)
      p.terms.push_back(lo + static_cast<int64_t>(rng.below(static_cast<uint64_t>(9 * lo))));
    // Redraw op sequences without a '*': uniform over the sequences that have one. Each try
    // succeeds with probability >= 1/3, so this ends after a few draws.
    do {
      p.ops.clear();
      for (int i = 1; i < t; ++i)
        p.ops += opt.ops[rng.below(opt.ops.size())];
    } while (p.ops.find('*') == std::string::npos);
    for (int i = 0; i < t; ++i) {
      if (i > 0) p.question += p.ops[static_cast<size_t>(i - 1)];
      p.question += std::to_string(p.terms[static_cast<size_t>(i)]);
    }
    p.question += "=?";
    if (!seen.insert(p.question).second) continue;
    p.answer = solve(p.terms, p.ops, p.trace);
    p.no_tool_answer = final_answer_text(p.answer);
    p.trace.turns.push_back({p.no_tool_answer, ""});
    out.push_back(std::move(p));
  }
  return out;
}

arith_tools_splits generate_arith_tools_splits(const arith_tools_options& opt, size_t train_size,
                                               size_t test_size, uint64_t seed) {
  if (train_size > std::numeric_limits<size_t>::max() - test_size)
    throw std::invalid_argument("generate_arith_tools_splits: train_size + test_size overflows");
  // One unique draw then a cut: disjoint by construction.
  auto all = generate_arith_tools(opt, train_size + test_size, seed);
  arith_tools_splits s;
  s.test.assign(std::make_move_iterator(all.begin() + static_cast<std::ptrdiff_t>(train_size)),
                std::make_move_iterator(all.end()));
  all.resize(train_size);
  s.train = std::move(all);
  return s;
}

qa_example to_qa_example(const tool_problem& p, tool_answer_style style) {
  qa_example ex;
  ex.question = p.question;
  ex.answer =
      style == tool_answer_style::trace ? flatten(p.trace, kTraceTurnEnd) : p.no_tool_answer;
  ex.ground_truth = gsm8k_final_answer(ex.answer);
  return ex;
}

arith_splits generate_arith_tools_examples(const arith_tools_options& opt, size_t train_size,
                                           size_t test_size, uint64_t seed,
                                           tool_answer_style style) {
  auto problems = generate_arith_tools_splits(opt, train_size, test_size, seed);
  arith_splits s;
  for (const auto& p : problems.train)
    s.train.push_back(to_qa_example(p, style));
  for (const auto& p : problems.test)
    s.test.push_back(to_qa_example(p, style));
  return s;
}

}  // namespace asyncrl
