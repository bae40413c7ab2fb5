#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "runtime/task/reward_function.hpp"

namespace asyncrl {

/// The final answer of a response: the text after the last "####" (up to the end of that
/// line), else the contents of the last "\boxed{...}" (braces balanced). nullopt if neither.
std::optional<std::string> extract_final_answer(std::string_view response) noexcept;

/// Parses a number as written in answers: optional sign, digits with optional thousands
/// commas, optional decimal part; a leading '$' and a trailing '.' or '%' are tolerated.
/// nullopt for anything else.
std::optional<double> parse_answer_number(std::string_view text) noexcept;

/// Rule-based reward: 1.0 if the response's final answer equals `ground_truth` numerically
/// (|a - b| <= 1e-6 * max(1, |b|)), else 0.0. Malformed output scores 0 and never throws.
double score_response(std::string_view response, std::string_view ground_truth) noexcept;

/// Scores `response` by `f`; `prefix` is the string the prefix rule looks for.
double score_with(reward_function f, std::string_view prefix, std::string_view response,
                  std::string_view ground_truth) noexcept;

}  // namespace asyncrl
