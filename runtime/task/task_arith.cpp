#include "runtime/task/task_arith.hpp"

#include <algorithm>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_set>

namespace asyncrl {

// Worked-answer notation. Every character is a token for a ~1M-parameter char-level policy, so
// each column is one short group, least significant digit first, groups separated by one space,
// and the answer ends in GSM8K's " #### <result>" so the generic reward applies unchanged.
//
//   a+b       one group "x+y+c=s" per column over max(len a, len b) columns; x, y are the
//             column's digits (0 past the end of the shorter operand), c the carry in (0 or 1),
//             s the column sum (its tens digit is the next carry).
//               47+385 -> "7+5+0=12 4+8+1=13 0+3+1=4 #### 432"
//   a-b, a>=b one group "x-y-c=r" per column of a; c is the borrow in (0 or 1). When x-y-c < 0
//             the column borrows: r is x+10-y-c and a 'b' is appended ("2-7-0=5b"), so the
//             borrow out is visible right next to the digit it produced.
//               52-17 -> "2-7-0=5b 5-1-1=3 #### 35"
//   a-b, a<b  "neg " then the columns of b-a, and the result is negative.
//               17-52 -> "neg 2-7-0=5b 5-1-1=3 #### -35"
//
// Leading zeros are dropped from the result only ("#### 0" for zero).

namespace {

// splitmix64 (Steele, Lea, Flood 2014): tiny, well mixed, and defined bit-for-bit, unlike the
// std:: distributions, whose outputs differ between standard libraries.
class splitmix64 {
 public:
  explicit splitmix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  /// Uniform in [0, bound), bound > 0; rejection keeps it exactly uniform (no modulo bias).
  uint64_t below(uint64_t bound) {
    const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
    for (;;) {
      uint64_t r = next();
      if (r >= threshold) return r % bound;
    }
  }

 private:
  uint64_t state_;
};

uint64_t pow10(int n) {
  uint64_t p = 1;
  for (int i = 0; i < n; ++i)
    p *= 10;
  return p;
}

void validate(const arith_options& opt) {
  if (opt.min_digits < 1)
    throw std::invalid_argument("arith_options: min_digits must be >= 1, got " +
                                std::to_string(opt.min_digits));
  if (opt.max_digits < opt.min_digits)
    throw std::invalid_argument("arith_options: max_digits (" + std::to_string(opt.max_digits) +
                                ") must be >= min_digits (" + std::to_string(opt.min_digits) + ")");
  // 9 digits keep a, b, a+b and the question-space count well inside 64 bits.
  if (opt.max_digits > 9)
    throw std::invalid_argument("arith_options: max_digits must be <= 9, got " +
                                std::to_string(opt.max_digits));
  if (opt.ops.empty()) throw std::invalid_argument("arith_options: ops must not be empty");
  for (size_t i = 0; i < opt.ops.size(); ++i) {
    char op = opt.ops[i];
    if (op != '+' && op != '-')
      throw std::invalid_argument("arith_options: ops must be a subset of \"+-\", got \"" +
                                  opt.ops + "\"");
    // A repeated op would silently skew the op mix.
    if (opt.ops.find(op) != i)
      throw std::invalid_argument("arith_options: ops has '" + std::string(1, op) + "' twice");
  }
}

// Distinct questions the options can produce: every operand value times every op.
uint64_t question_space(const arith_options& opt) {
  uint64_t hi = pow10(opt.max_digits);
  uint64_t lo = opt.min_digits == 1 ? 0 : pow10(opt.min_digits - 1);
  uint64_t values = hi - lo;
  return values * values * opt.ops.size();
}

// A number with a digit count uniform in [min_digits, max_digits], then uniform among numbers
// with exactly that many digits (0 counts as a 1-digit number).
int64_t draw_operand(splitmix64& rng, const arith_options& opt) {
  int d = opt.min_digits +
          static_cast<int>(rng.below(static_cast<uint64_t>(opt.max_digits - opt.min_digits + 1)));
  if (d == 1) return static_cast<int64_t>(rng.below(10));
  uint64_t lo = pow10(d - 1);
  return static_cast<int64_t>(lo + rng.below(9 * lo));
}

// Digits least significant first; 0 is "0".
std::string reversed_digits(int64_t v) {
  std::string s = std::to_string(v);
  return std::string(s.rbegin(), s.rend());
}

int digit_at(const std::string& rev, size_t i) {
  return i < rev.size() ? rev[i] - '0' : 0;
}

std::string add_columns(int64_t a, int64_t b) {
  auto ra = reversed_digits(a), rb = reversed_digits(b);
  std::string out;
  int carry = 0;
  for (size_t i = 0; i < std::max(ra.size(), rb.size()); ++i) {
    int x = digit_at(ra, i), y = digit_at(rb, i), s = x + y + carry;
    if (i > 0) out += ' ';
    out += std::to_string(x) + '+' + std::to_string(y) + '+' + std::to_string(carry) + '=' +
           std::to_string(s);
    carry = s / 10;
  }
  return out;
}

// Requires a >= b.
std::string sub_columns(int64_t a, int64_t b) {
  auto ra = reversed_digits(a), rb = reversed_digits(b);
  std::string out;
  int borrow = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    int x = digit_at(ra, i), y = digit_at(rb, i), r = x - y - borrow;
    if (i > 0) out += ' ';
    out += std::to_string(x) + '-' + std::to_string(y) + '-' + std::to_string(borrow) + '=';
    borrow = r < 0 ? 1 : 0;
    out += std::to_string(r + 10 * borrow);
    if (borrow) out += 'b';
  }
  return out;
}

}  // namespace

std::string arith_worked_answer(int64_t a, char op, int64_t b) {
  // The notation is defined for non-negative operands; generate_arith never produces others.
  if (a < 0 || b < 0)
    throw std::invalid_argument("arith_worked_answer: operands must be non-negative");
  if (op == '+') return add_columns(a, b) + " #### " + std::to_string(a + b);
  if (op == '-') {
    if (a >= b) return sub_columns(a, b) + " #### " + std::to_string(a - b);
    return "neg " + sub_columns(b, a) + " #### -" + std::to_string(b - a);
  }
  throw std::invalid_argument(std::string("arith_worked_answer: op must be '+' or '-', got '") +
                              op + "'");
}

std::vector<qa_example> generate_arith(const arith_options& opt, size_t n, uint64_t seed) {
  validate(opt);
  uint64_t space = question_space(opt);
  if (n > space)
    throw std::invalid_argument("generate_arith: asked for " + std::to_string(n) +
                                " unique questions but the options allow only " +
                                std::to_string(space));
  splitmix64 rng(seed);
  std::unordered_set<std::string> seen;
  seen.reserve(n);
  std::vector<qa_example> out;
  out.reserve(n);
  // Draw order per candidate is fixed (a, b, op) so a seed names the same data everywhere;
  // rejecting repeats keeps the per-question distribution and makes any prefix of a run
  // identical to a shorter run with the same seed.
  while (out.size() < n) {
    int64_t a = draw_operand(rng, opt);
    int64_t b = draw_operand(rng, opt);
    char op = opt.ops[rng.below(opt.ops.size())];
    std::string question = std::to_string(a) + op + std::to_string(b) + "=?";
    if (!seen.insert(question).second) continue;
    qa_example ex;
    ex.question = std::move(question);
    ex.answer = arith_worked_answer(a, op, b);
    ex.ground_truth = gsm8k_final_answer(ex.answer);
    out.push_back(std::move(ex));
  }
  return out;
}

arith_splits generate_arith_splits(const arith_options& opt, size_t train_size, size_t test_size,
                                   uint64_t seed) {
  if (train_size > std::numeric_limits<size_t>::max() - test_size)
    throw std::invalid_argument("generate_arith_splits: train_size + test_size overflows");
  // One unique draw then a cut: disjoint by construction.
  auto all = generate_arith(opt, train_size + test_size, seed);
  arith_splits s;
  s.test.assign(std::make_move_iterator(all.begin() + static_cast<std::ptrdiff_t>(train_size)),
                std::make_move_iterator(all.end()));
  all.resize(train_size);
  s.train = std::move(all);
  return s;
}

}  // namespace asyncrl
