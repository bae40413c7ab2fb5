#pragma once

// The pattern of tokenizer.json's Replace normalizer and Replace decoder: {"String": s} (a
// literal, leftmost non-overlapping occurrences, as the escaped-literal regex Hugging Face
// builds finds them) or {"Regex": r} (Oniguruma syntax, matched through onig_regex).

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/text/hf_json.hpp"
#include "runtime/text/onig_regex.hpp"

namespace asyncrl {

class replace_pattern {
 public:
  /// Reads obj["pattern"] and obj["content"]; throws naming `here` when malformed. An empty
  /// String pattern is refused: the reference's empty regex matches between every character.
  replace_pattern(const nlohmann::json& obj, const hf_where& here) {
    auto pat = obj.find("pattern");
    if (pat == obj.end() || !pat->is_object() || pat->size() != 1)
      here.fail("'pattern' must be {\"String\": ...} or {\"Regex\": ...}");
    auto content = obj.find("content");
    if (content == obj.end() || !content->is_string()) here.fail("missing string field 'content'");
    content_ = content->get<std::string>();
    if (auto s = pat->find("String"); s != pat->end() && s->is_string()) {
      literal_ = s->get<std::string>();
      if (literal_.empty()) here.fail("an empty String pattern is not supported");
      return;
    }
    if (auto r = pat->find("Regex"); r != pat->end() && r->is_string()) {
      try {
        regex_ = std::make_unique<onig_regex>(r->get<std::string>());
      } catch (const std::invalid_argument& e) {
        here.fail(std::string("pattern: ") + e.what());
      }
      return;
    }
    here.fail("'pattern' must be {\"String\": string} or {\"Regex\": string}");
  }

  /// `text` with every match replaced by the content.
  std::string apply(std::string_view text) const {
    std::vector<std::pair<size_t, size_t>> matches;
    if (regex_) {
      matches = regex_->find_all(text);
    } else {
      for (size_t pos = text.find(literal_); pos != std::string_view::npos;
           pos = text.find(literal_, pos + literal_.size()))
        matches.emplace_back(pos, pos + literal_.size());
    }
    if (matches.empty()) return std::string(text);
    std::string out;
    out.reserve(text.size() + matches.size() * content_.size());
    size_t prev = 0;
    for (auto [s, e] : matches) {
      out.append(text, prev, s - prev);
      out += content_;
      prev = e;
    }
    out.append(text, prev, std::string_view::npos);
    return out;
  }

 private:
  std::string literal_;                // for a String pattern
  std::unique_ptr<onig_regex> regex_;  // for a Regex pattern
  std::string content_;
};

}  // namespace asyncrl
