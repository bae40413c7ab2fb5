#include "runtime/task/reward.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

namespace asyncrl {

namespace {

constexpr std::string_view kSpace = " \t\r\n\v\f";

std::string_view trim(std::string_view s) {
  auto b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  auto e = s.find_last_not_of(kSpace);
  return s.substr(b, e - b + 1);
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Contents of the last "\boxed{...}" whose braces balance. A truncated final box (the model ran
// out of tokens) is skipped in favour of an earlier complete one. One pass with a brace stack
// keeps adversarial input ("\boxed{" repeated) linear rather than quadratic.
std::optional<std::string_view> last_boxed(std::string_view s) {
  constexpr std::string_view kOpen = "\\boxed{";
  std::vector<size_t> open;  // positions just after each unclosed '{'
  std::optional<std::string_view> best;
  size_t best_begin = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '{') {
      open.push_back(i + 1);
    } else if (s[i] == '}' && !open.empty()) {
      size_t begin = open.back();
      open.pop_back();
      bool boxed = begin >= kOpen.size() && s.substr(begin - kOpen.size(), kOpen.size()) == kOpen;
      if (boxed && (!best || begin > best_begin)) {
        best = s.substr(begin, i - begin);
        best_begin = begin;
      }
    }
  }
  return best;
}

// Accepts "123" or "1,234,567" (groups of exactly three after the first group of 1-3 digits).
// Appends the digits without commas to `out`; returns the number of characters consumed, or 0.
size_t scan_integer_part(std::string_view s, std::string& out) {
  size_t i = 0;
  while (i < s.size() && is_digit(s[i]))
    ++i;
  if (i == 0) return 0;
  out.append(s.substr(0, i));
  if (i > 3 || i == s.size() || s[i] != ',') return i;
  while (i < s.size() && s[i] == ',') {
    size_t g = i + 1;
    while (g < s.size() && is_digit(s[g]))
      ++g;
    if (g - (i + 1) != 3) return 0;  // "1,23" or "1,2345": not thousands grouping
    out.append(s.substr(i + 1, 3));
    i = g;
  }
  return i;
}

}  // namespace

std::optional<std::string> extract_final_answer(std::string_view response) noexcept {
  try {
    auto hashes = response.rfind("####");
    if (hashes != std::string_view::npos) {
      auto rest = response.substr(hashes + 4);
      return std::string(trim(rest.substr(0, rest.find('\n'))));
    }
    if (auto boxed = last_boxed(response)) return std::string(trim(*boxed));
    return std::nullopt;
  } catch (...) {  // only bad_alloc can get here; a reward must never take the process down
    return std::nullopt;
  }
}

std::optional<double> parse_answer_number(std::string_view text) noexcept {
  try {
    auto s = trim(text);
    std::string clean;  // what std::from_chars sees: [-]digits[.digits]
    size_t i = 0;
    bool seen_sign = false;
    bool seen_dollar = false;
    // Sign and '$' in either order ("-$5", "$-5"), each at most once.
    while (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == '$')) {
      if (s[i] == '$') {
        if (seen_dollar) return std::nullopt;
        seen_dollar = true;
      } else {
        if (seen_sign) return std::nullopt;
        seen_sign = true;
        if (s[i] == '-') clean.push_back('-');
      }
      ++i;
    }
    size_t int_len = scan_integer_part(s.substr(i), clean);
    i += int_len;
    bool any_digits = int_len > 0;
    // A '.' without digits after it is not a decimal point; the trailing-period rule below takes
    // it.
    if (i + 1 < s.size() && s[i] == '.' && is_digit(s[i + 1])) {
      size_t f = ++i;
      while (i < s.size() && is_digit(s[i]))
        ++i;
      clean.push_back('.');
      clean.append(s.substr(f, i - f));
      any_digits = true;
    }
    if (!any_digits) return std::nullopt;
    if (i < s.size() && s[i] == '%') ++i;
    if (i < s.size() && s[i] == '.') ++i;  // sentence-ending period: "72." or "3.50."
    if (i != s.size()) return std::nullopt;

    double value = 0.0;
    auto [p, ec] = std::from_chars(clean.data(), clean.data() + clean.size(), value);
    if (ec != std::errc() || p != clean.data() + clean.size() || !std::isfinite(value))
      return std::nullopt;
    return value;
  } catch (...) {
    return std::nullopt;
  }
}

double score_response(std::string_view response, std::string_view ground_truth) noexcept {
  try {
    auto truth = parse_answer_number(ground_truth);
    if (!truth) return 0.0;
    auto answer = extract_final_answer(response);
    if (!answer) return 0.0;
    auto value = parse_answer_number(*answer);
    if (!value) return 0.0;
    double tol = 1e-6 * std::max(1.0, std::fabs(*truth));
    return std::fabs(*value - *truth) <= tol ? 1.0 : 0.0;
  } catch (...) {
    return 0.0;
  }
}

double score_with(reward_function f, std::string_view prefix, std::string_view response,
                  std::string_view ground_truth) noexcept {
  if (f == reward_function::prefix)
    return !prefix.empty() && response.substr(0, prefix.size()) == prefix ? 1.0 : 0.0;
  return score_response(response, ground_truth);
}

}  // namespace asyncrl
