#include "runtime/tools/calculator.hpp"

#include <limits>

namespace asyncrl {

namespace {

// Grammar (left-associative binary operators):
//   expr  := term  (('+' | '-') term)*
//   term  := unary (('*' | '/') unary)*
//   unary := '-'* primary
//   primary := digits | '(' expr ')'
// Each rule evaluates as it parses, so the first error in evaluation order is the one reported.
// Recursion happens only through '(' and is cut at max_depth; unary minus is a loop, not
// recursion, so "------1" costs no stack.
class evaluator {
 public:
  evaluator(std::string_view text, const calc_limits& limits) : s_(text), lim_(limits) {}

  calc_result run() {
    calc_result r;
    if (s_.size() > lim_.max_length) {
      r.error = "longer than " + std::to_string(lim_.max_length) + " bytes";
      return r;
    }
    skip_spaces();
    if (pos_ == s_.size()) {
      r.error = "empty expression";
      return r;
    }
    int64_t v = 0;
    if (expr(v, 0)) {
      skip_spaces();
      if (pos_ == s_.size()) {
        r.ok = true;
        r.value = v;
        return r;
      }
      unexpected();
    }
    r.error = std::move(error_);
    return r;
  }

 private:
  bool fail(std::string why) {
    error_ = std::move(why);
    return false;
  }

  // Names the offending character only when it is printable ASCII: the reason is shown to a
  // character-level model, whose vocabulary has nothing else.
  bool unexpected() {
    if (pos_ >= s_.size()) return fail("unexpected end");
    const char c = s_[pos_];
    const auto at = " at " + std::to_string(pos_ + 1);
    if (c >= 32 && c <= 126) return fail(std::string("unexpected '") + c + "'" + at);
    return fail("unexpected byte" + at);
  }

  bool step() {
    if (++steps_ > lim_.max_steps) return fail("too much work");
    return true;
  }

  void skip_spaces() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t'))
      ++pos_;
  }

  char peek() {
    skip_spaces();
    return pos_ < s_.size() ? s_[pos_] : '\0';
  }

  bool expr(int64_t& out, int depth) {
    if (!term(out, depth)) return false;
    for (;;) {
      const char op = peek();
      if (op != '+' && op != '-') return true;
      ++pos_;
      int64_t rhs = 0;
      if (!term(rhs, depth) || !step()) return false;
      const bool overflow = op == '+' ? __builtin_add_overflow(out, rhs, &out)
                                      : __builtin_sub_overflow(out, rhs, &out);
      if (overflow) return fail("overflow");
    }
  }

  bool term(int64_t& out, int depth) {
    if (!unary(out, depth)) return false;
    for (;;) {
      const char op = peek();
      if (op != '*' && op != '/') return true;
      ++pos_;
      int64_t rhs = 0;
      if (!unary(rhs, depth) || !step()) return false;
      if (op == '*') {
        if (__builtin_mul_overflow(out, rhs, &out)) return fail("overflow");
        continue;
      }
      if (rhs == 0) return fail("division by zero");
      // INT64_MIN / -1 is the one quotient that does not fit (and INT64_MIN % -1 is undefined).
      if (rhs == -1 && out == std::numeric_limits<int64_t>::min()) return fail("overflow");
      if (out % rhs != 0) return fail("not an integer");
      out /= rhs;
    }
  }

  bool unary(int64_t& out, int depth) {
    bool negate = false;
    while (peek() == '-') {
      ++pos_;
      if (!step()) return false;
      negate = !negate;
    }
    if (!primary(out, depth)) return false;
    if (negate && __builtin_sub_overflow(int64_t{0}, out, &out)) return fail("overflow");
    return true;
  }

  bool primary(int64_t& out, int depth) {
    const char c = peek();
    if (c == '(') {
      if (depth >= lim_.max_depth)
        return fail("nested deeper than " + std::to_string(lim_.max_depth));
      ++pos_;
      if (!expr(out, depth + 1)) return false;
      if (peek() != ')') return pos_ == s_.size() ? fail("missing ')'") : unexpected();
      ++pos_;
      return true;
    }
    if (c < '0' || c > '9') return unexpected();
    if (!step()) return false;
    int digits = 0;
    out = 0;
    for (; pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9'; ++pos_) {
      if (++digits > lim_.max_digits)
        return fail("number longer than " + std::to_string(lim_.max_digits) + " digits");
      // Only reachable with max_digits above 18.
      if (__builtin_mul_overflow(out, int64_t{10}, &out) ||
          __builtin_add_overflow(out, int64_t{s_[pos_] - '0'}, &out))
        return fail("overflow");
    }
    return true;
  }

  std::string_view s_;
  const calc_limits& lim_;
  size_t pos_ = 0;
  int64_t steps_ = 0;
  std::string error_;
};

std::string_view trim(std::string_view t) {
  constexpr std::string_view kSpace = " \t\r\n";
  const auto b = t.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return t.substr(b, t.find_last_not_of(kSpace) - b + 1);
}

calc_call malformed(std::string why) {
  calc_call c;
  c.kind = calc_call_kind::malformed;
  c.error = std::move(why);
  return c;
}

}  // namespace

calc_result evaluate_calc(std::string_view expr, const calc_limits& limits) {
  return evaluator(expr, limits).run();
}

std::string calc_observation(const calc_result& r) {
  return r.ok ? std::to_string(r.value) + "\n" : "error: " + r.error + "\n";
}

std::string run_calculator(std::string_view expr) {
  return calc_observation(evaluate_calc(expr));
}

calc_call parse_calc_call(std::string_view turn_text) {
  const auto t = trim(turn_text);
  const auto open = t.find("<<");
  if (open == std::string_view::npos) return {};
  if (t.find("<<", open + 2) != std::string_view::npos) return malformed("more than one call");
  const auto close = t.find(">>", open + 2);
  if (close == std::string_view::npos) return malformed("unclosed <<");
  if (open != 0) return malformed("text before the call");
  if (close + 2 != t.size()) return malformed("text after the call");
  const auto expr = t.substr(2, close - 2);
  if (trim(expr).empty()) return malformed("empty call");
  calc_call c;
  c.kind = calc_call_kind::call;
  c.expr = std::string(expr);
  return c;
}

}  // namespace asyncrl
