#include "runtime/tools/calculator.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>

namespace asyncrl {
namespace {

int64_t value_of(std::string_view expr) {
  auto r = evaluate_calc(expr);
  EXPECT_TRUE(r.ok) << "'" << expr << "': " << r.error;
  return r.value;
}

std::string error_of(std::string_view expr, const calc_limits& limits = {}) {
  auto r = evaluate_calc(expr, limits);
  EXPECT_FALSE(r.ok) << "'" << expr << "' gave " << r.value;
  return r.error;
}

std::string repeat(std::string_view s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i)
    out += s;
  return out;
}

TEST(Calculator, PrecedenceAndAssociativity) {
  EXPECT_EQ(value_of("2+3*4"), 14);    // * before +
  EXPECT_EQ(value_of("(2+3)*4"), 20);  // parentheses first
  EXPECT_EQ(value_of("2*3+4"), 10);
  EXPECT_EQ(value_of("10-3-2"), 5);    // left-associative, not 10-(3-2) = 9
  EXPECT_EQ(value_of("100/10/5"), 2);  // left-associative, not 100/(10/5) = 50
  EXPECT_EQ(value_of("12/4*3"), 9);    // not 12/(4*3) = 1
  EXPECT_EQ(value_of("2-3*4+5"), -5);  // 2-12+5
  EXPECT_EQ(value_of("347*829"), 287663);
  EXPECT_EQ(value_of("287663+512"), 288175);
  EXPECT_EQ(value_of("0"), 0);
  EXPECT_EQ(value_of("007"), 7);
}

TEST(Calculator, UnaryMinusAndSpaces) {
  EXPECT_EQ(value_of("-3*-3"), 9);
  EXPECT_EQ(value_of("--5"), 5);
  EXPECT_EQ(value_of("-(2+3)"), -5);
  EXPECT_EQ(value_of("2--3"), 5);
  EXPECT_EQ(value_of("-5+3"), -2);
  EXPECT_EQ(value_of("-0"), 0);
  EXPECT_EQ(value_of(" 2 +\t3 * 4 "), 14);
  EXPECT_EQ(value_of("- ( 1 - 4 ) / 3"), 1);
  // An odd number of minus signs negates; the loop, not recursion, handles long runs.
  EXPECT_EQ(value_of(repeat("-", 255) + "1"), -1);
}

TEST(Calculator, DivisionMustBeExact) {
  EXPECT_EQ(value_of("84/7"), 12);
  EXPECT_EQ(value_of("-84/7"), -12);
  EXPECT_EQ(value_of("84/-7"), -12);
  EXPECT_EQ(error_of("7/2"), "not an integer");
  EXPECT_EQ(error_of("-7/2"), "not an integer");
  EXPECT_EQ(error_of("1/0"), "division by zero");
  EXPECT_EQ(error_of("0/0"), "division by zero");
  EXPECT_EQ(error_of("5/(3-3)"), "division by zero");
}

TEST(Calculator, Int64EdgesAndOverflow) {
  constexpr auto kMax = std::numeric_limits<int64_t>::max();
  constexpr auto kMin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(error_of("999999999999*999999999999"), "overflow");
  EXPECT_EQ(value_of("922337203685477580*10+7"), kMax);
  EXPECT_EQ(error_of("922337203685477580*10+8"), "overflow");
  // INT64_MIN is reachable, but neither its negation nor its quotient by -1 is.
  const std::string min_expr = "(-922337203685477580*10-8)";
  EXPECT_EQ(value_of(min_expr), kMin);
  EXPECT_EQ(value_of(min_expr + "/1"), kMin);
  EXPECT_EQ(error_of(min_expr + "/-1"), "overflow");
  EXPECT_EQ(error_of("-" + min_expr), "overflow");
  EXPECT_EQ(error_of(min_expr + "-1"), "overflow");
  EXPECT_EQ(value_of(min_expr + "/2"), kMin / 2);
  // 18 digits always fit; 19 are refused before they could overflow.
  EXPECT_EQ(value_of("999999999999999999"), 999999999999999999);
  EXPECT_EQ(error_of("9223372036854775807"), "number longer than 18 digits");
}

TEST(Calculator, SyntaxErrorsNameWhatAndWhere) {
  EXPECT_EQ(error_of(""), "empty expression");
  EXPECT_EQ(error_of("  \t "), "empty expression");
  EXPECT_EQ(error_of("1+"), "unexpected end");
  EXPECT_EQ(error_of("-"), "unexpected end");
  EXPECT_EQ(error_of("(1+2"), "missing ')'");
  EXPECT_EQ(error_of("1 2"), "unexpected '2' at 3");
  EXPECT_EQ(error_of("2x"), "unexpected 'x' at 2");
  EXPECT_EQ(error_of("+1"), "unexpected '+' at 1");
  EXPECT_EQ(error_of(")"), "unexpected ')' at 1");
  EXPECT_EQ(error_of("(1))"), "unexpected ')' at 4");
  EXPECT_EQ(error_of("()"), "unexpected ')' at 2");
  EXPECT_EQ(error_of("1**2"), "unexpected '*' at 3");
  EXPECT_EQ(error_of("3.5"), "unexpected '.' at 2");
  EXPECT_EQ(error_of(std::string("1+\x01", 3)), "unexpected byte at 3");
  EXPECT_EQ(error_of(std::string("1\0", 2)), "unexpected byte at 2");
  EXPECT_EQ(error_of("1+2\n"), "unexpected byte at 4");
}

TEST(Calculator, LengthIsBounded) {
  // "1+1+...+1": 255 bytes fit, 257 do not.
  const auto fits = repeat("1+", 127) + "1";
  ASSERT_EQ(fits.size(), 255u);
  EXPECT_EQ(value_of(fits), 128);
  EXPECT_EQ(error_of(fits + "+1"), "longer than 256 bytes");
  EXPECT_EQ(error_of(std::string(100000, '(')), "longer than 256 bytes");
}

TEST(Calculator, NestingIsBounded) {
  EXPECT_EQ(value_of(repeat("(", 32) + "1" + repeat(")", 32)), 1);
  EXPECT_EQ(error_of(repeat("(", 33) + "1" + repeat(")", 33)), "nested deeper than 32");
  EXPECT_EQ(error_of(repeat("-(", 33) + "1" + repeat(")", 33)), "nested deeper than 32");
  // With the length limit lifted, the depth limit alone keeps the stack bounded: without it
  // this recursion would be a million frames deep and crash.
  calc_limits wide;
  wide.max_length = 1u << 21;
  wide.max_steps = 1 << 22;
  EXPECT_EQ(error_of(std::string(1u << 20, '('), wide), "nested deeper than 32");
}

TEST(Calculator, WorkIsBounded) {
  calc_limits tight;
  tight.max_steps = 3;  // a literal, a literal, an operator
  EXPECT_TRUE(evaluate_calc("1+2", tight).ok);
  EXPECT_EQ(error_of("1+2+3", tight), "too much work");
  EXPECT_EQ(error_of("---1", tight), "too much work");  // each minus is a step
  // The default budget covers every input of the default length: the longest chains pass.
  EXPECT_TRUE(evaluate_calc(repeat("1*", 127) + "1").ok);
  EXPECT_TRUE(evaluate_calc(repeat("-", 255) + "1").ok);
}

TEST(Calculator, RunCalculatorWritesTheObservation) {
  EXPECT_EQ(run_calculator("347*829"), "287663\n");
  EXPECT_EQ(run_calculator("-5+3"), "-2\n");
  EXPECT_EQ(run_calculator("1/0"), "error: division by zero\n");
  EXPECT_EQ(run_calculator("7/2"), "error: not an integer\n");
  EXPECT_EQ(run_calculator(""), "error: empty expression\n");
}

calc_call parsed(std::string_view text, calc_call_kind kind) {
  auto c = parse_calc_call(text);
  EXPECT_EQ(c.kind, kind) << "'" << text << "'";
  return c;
}

TEST(CalcCall, ACallIsExactlyOneBracketedExpression) {
  EXPECT_EQ(parsed("<<347*829>>", calc_call_kind::call).expr, "347*829");
  EXPECT_EQ(parsed("  <<1 + 1>>\n", calc_call_kind::call).expr, "1 + 1");
  // The contents are the calculator's business, not the call syntax's.
  EXPECT_EQ(parsed("<<1/0>>", calc_call_kind::call).expr, "1/0");
  EXPECT_EQ(parsed("<<<1>>", calc_call_kind::call).expr, "<1");
}

TEST(CalcCall, TextWithoutOpeningBracketsIsTheFinalAnswer) {
  EXPECT_EQ(parsed("#### 288175", calc_call_kind::final_answer).error, "");
  parsed("", calc_call_kind::final_answer);
  parsed("1+1 >> 2", calc_call_kind::final_answer);
}

TEST(CalcCall, MalformedCallsSayWhy) {
  EXPECT_EQ(parsed("<<1+1", calc_call_kind::malformed).error, "unclosed <<");
  EXPECT_EQ(parsed("#### 5 <<", calc_call_kind::malformed).error, "unclosed <<");
  EXPECT_EQ(parsed("so <<1+1>>", calc_call_kind::malformed).error, "text before the call");
  EXPECT_EQ(parsed("<<1+1>> = 2", calc_call_kind::malformed).error, "text after the call");
  EXPECT_EQ(parsed("<<1>>>", calc_call_kind::malformed).error, "text after the call");
  EXPECT_EQ(parsed("<<1+1>><<2+2>>", calc_call_kind::malformed).error, "more than one call");
  EXPECT_EQ(parsed("<<1+1>>\n<<2+2>>", calc_call_kind::malformed).error, "more than one call");
  EXPECT_EQ(parsed("<<>>", calc_call_kind::malformed).error, "empty call");
  EXPECT_EQ(parsed("<<  >>", calc_call_kind::malformed).error, "empty call");
  EXPECT_TRUE(parsed("<<1+1", calc_call_kind::malformed).expr.empty());
}

// Randomized comparison against a reference: random expression trees are evaluated directly in
// __int128 (every int64 sum, difference and product fits), rendered with the fewest
// parentheses their precedence and left-associativity need, and handed to the calculator.
// Catches precedence and associativity bugs (the rendering relies on them), missed or spurious
// overflow, and wrong exact-division checks.
struct node {
  char op = 0;  // 0: literal, 'n': negation of a, else a binary operator over a and b
  int64_t value = 0;
  std::unique_ptr<node> a, b;
};

struct ref_result {
  bool ok = true;
  __int128 v = 0;
  std::string error;
};

ref_result fail(std::string why) {
  return {false, 0, std::move(why)};
}

ref_result in_range(__int128 v) {
  if (v < std::numeric_limits<int64_t>::min() || v > std::numeric_limits<int64_t>::max())
    return fail("overflow");
  return {true, v, {}};
}

// Left operand, then right operand, then the operator: the order the calculator evaluates in,
// so the first error is the same one.
ref_result reference(const node& n) {
  if (n.op == 0) return {true, n.value, {}};
  auto a = reference(*n.a);
  if (!a.ok) return a;
  if (n.op == 'n') return in_range(-a.v);
  auto b = reference(*n.b);
  if (!b.ok) return b;
  switch (n.op) {
    case '+':
      return in_range(a.v + b.v);
    case '-':
      return in_range(a.v - b.v);
    case '*':
      return in_range(a.v * b.v);
    default:
      if (b.v == 0) return fail("division by zero");
      if (a.v % b.v != 0) return fail("not an integer");
      return in_range(a.v / b.v);
  }
}

int precedence(const node& n) {
  if (n.op == '+' || n.op == '-') return 1;
  if (n.op == '*' || n.op == '/') return 2;
  return 3;  // literal, negation
}

class tree_maker {
 public:
  explicit tree_maker(uint64_t seed) : rng_(seed) {}

  uint64_t below(uint64_t n) { return rng_() % n; }

  std::unique_ptr<node> literal(int64_t v) {
    auto n = std::make_unique<node>();
    n->value = v;
    return n;
  }

  std::unique_ptr<node> binary(char op, std::unique_ptr<node> a, std::unique_ptr<node> b) {
    auto n = std::make_unique<node>();
    n->op = op;
    n->a = std::move(a);
    n->b = std::move(b);
    return n;
  }

  std::unique_ptr<node> make(int depth) {
    if (depth == 0 || below(4) == 0) {
      // Mostly short literals; sometimes up to 18 digits, so that products overflow.
      const int digits =
          below(5) == 0 ? 1 + static_cast<int>(below(18)) : 1 + static_cast<int>(below(3));
      int64_t v = 0;
      for (int i = 0; i < digits; ++i)
        v = v * 10 + static_cast<int64_t>(below(10));
      return literal(v);
    }
    const auto kind = below(6);
    if (kind == 0) {
      auto n = std::make_unique<node>();
      n->op = 'n';
      n->a = make(depth - 1);
      return n;
    }
    if (kind == 1) {
      // x*d/d, d small: exact divisions (and, with d = 0, division by zero) are common enough.
      const int64_t d = static_cast<int64_t>(below(4));
      return binary('/', binary('*', make(depth - 1), literal(d)), literal(d));
    }
    static constexpr char kOps[] = "+-*/";
    const char op = kOps[below(4)];
    return binary(op, make(depth - 1), make(depth - 1));
  }

  std::string space() { return below(5) == 0 ? " " : ""; }

  std::string render(const node& n) {
    std::string s;
    if (n.op == 0) {
      s = std::to_string(n.value);
    } else if (n.op == 'n') {
      s = "-" + space() + render_child(*n.a, precedence(*n.a) < 3);
    } else {
      // Left-associative: a left child of equal precedence needs no parentheses, a right one
      // does (a-(b-c) is not a-b-c).
      s = render_child(*n.a, precedence(*n.a) < precedence(n)) + space() + n.op + space() +
          render_child(*n.b, precedence(*n.b) <= precedence(n));
    }
    // Redundant parentheses now and then: they must change nothing.
    if (below(10) == 0) s = "(" + s + ")";
    return s;
  }

 private:
  std::string render_child(const node& n, bool parens) {
    auto s = render(n);
    return parens ? "(" + s + ")" : s;
  }

  std::mt19937_64 rng_;
};

TEST(Calculator, MatchesAnInt128ReferenceOnRandomTrees) {
  tree_maker maker(20240611);
  calc_limits roomy;  // the trees are longer than a model's calls; the grammar is what's tested
  roomy.max_length = 1 << 16;
  roomy.max_steps = 1 << 16;
  int ok = 0, overflow = 0, inexact = 0, by_zero = 0;
  for (int i = 0; i < 20000; ++i) {
    auto tree = maker.make(1 + static_cast<int>(maker.below(6)));
    const auto text = maker.render(*tree);
    const auto want = reference(*tree);
    const auto got = evaluate_calc(text, roomy);
    ASSERT_EQ(got.ok, want.ok) << text << ": calculator '" << got.error << "', reference '"
                               << want.error << "'";
    if (want.ok) {
      ASSERT_EQ(got.value, static_cast<int64_t>(want.v)) << text;
      ++ok;
    } else {
      ASSERT_EQ(got.error, want.error) << text;
      overflow += want.error == "overflow";
      inexact += want.error == "not an integer";
      by_zero += want.error == "division by zero";
    }
  }
  // Every outcome was exercised many times, or the comparison proves little.
  EXPECT_GT(ok, 2000);
  EXPECT_GT(overflow, 200);
  EXPECT_GT(inexact, 200);
  EXPECT_GT(by_zero, 200);
}

}  // namespace
}  // namespace asyncrl
