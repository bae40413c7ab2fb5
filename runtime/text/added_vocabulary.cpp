#include "runtime/text/added_vocabulary.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "runtime/text/unicode_gap.hpp"
#include "runtime/text/utf8.hpp"

namespace asyncrl {

namespace {

// Rust regex's \s (Unicode White_Space), which Hugging Face's lstrip/rstrip use.
bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Rust regex's \w, which Hugging Face's single_word uses: Alphabetic, marks, decimal digits,
// connector punctuation, Join_Control. Alphabetic is taken as the letters, Nl, and the
// Other_Alphabetic characters that are neither letters nor marks (circled/squared Latin letters).
bool is_word_char(char32_t c) {
  if (c < 0x80)
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  if (c == 0x200C || c == 0x200D) return true;
  if ((c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
      (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189))
    return true;
  int category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  if (category == UTF8PROC_CATEGORY_CN) {  // newer than utf8proc: the reference's category
    const char* gc = unicode_gap::category_of(c);
    if (!gc) return false;
    return gc[0] == 'L' || gc[0] == 'M' || std::strcmp(gc, "Nd") == 0 ||
           std::strcmp(gc, "Nl") == 0 || std::strcmp(gc, "Pc") == 0;
  }
  switch (category) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

// Start of the character that ends at `end` (exclusive) in valid UTF-8.
size_t char_start_before(std::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80)
    --i;
  return i;
}

bool ends_with_word(std::string_view s, size_t end) {
  if (end == 0) return false;
  size_t i = char_start_before(s, end);
  return is_word_char(utf8::next(s, i));
}

bool starts_with_word(std::string_view s, size_t begin) {
  if (begin >= s.size()) return false;
  return is_word_char(utf8::next(s, begin));
}

}  // namespace

void added_vocabulary::matcher::build() {
  std::sort(patterns.begin(), patterns.end(), [](const pattern& a, const pattern& b) {
    auto fa = static_cast<unsigned char>(a.text[0]), fb = static_cast<unsigned char>(b.text[0]);
    return fa != fb ? fa < fb : a.text.size() > b.text.size();
  });
  first.assign(257, 0);
  for (const auto& p : patterns)
    ++first[static_cast<unsigned char>(p.text[0]) + 1];
  for (size_t b = 1; b <= 256; ++b)
    first[b] += first[b - 1];
}

added_vocabulary::added_vocabulary(std::vector<added_token> tokens,
                                   const std::vector<std::string>& normalized_forms,
                                   std::unordered_set<std::string> special_contents)
    : tokens_(std::move(tokens)),
      normalized_(normalized_forms),
      specials_(std::move(special_contents)) {
  std::unordered_map<std::string, size_t> seen_raw, seen_norm;
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const auto& t = tokens_[i];
    by_id_[t.id] = i;
    by_content_[t.content] = t.id;
    const std::string& text = t.normalized ? normalized_[i] : t.content;
    if (text.empty())
      throw std::invalid_argument("added token '" + t.content + "' is empty once normalized");
    auto& seen = t.normalized ? seen_norm : seen_raw;
    auto [it, fresh] = seen.emplace(text, i);
    if (!fresh)
      throw std::invalid_argument("added tokens '" + tokens_[it->second].content + "' and '" +
                                  t.content + "' are searched as the same text '" + text + "'");
    (t.normalized ? norm_ : raw_).patterns.push_back({text, i});
  }
  raw_.build();
  norm_.build();
}

void added_vocabulary::split(std::string_view text, bool normalized_pass,
                             std::vector<piece>& out) const {
  const size_t n = text.size();
  if (n == 0) return;
  const matcher& m = normalized_pass ? norm_ : raw_;
  if (m.empty()) {
    out.push_back({0, n, -1});
    return;
  }
  // Every leftmost-longest, non-overlapping occurrence first: the flags below may drop or
  // widen a match, but (as with Hugging Face's automaton) they do not change where the search
  // resumes.
  struct found {
    size_t begin, end, token;
  };
  std::vector<found> matches;
  for (size_t i = 0; i < n;) {
    auto b = static_cast<unsigned char>(text[i]);
    bool hit = false;
    for (uint32_t k = m.first[b]; k < m.first[b + 1]; ++k) {
      const std::string& p = m.patterns[k].text;
      if (text.compare(i, p.size(), p) == 0) {
        matches.push_back({i, i + p.size(), m.patterns[k].token});
        i += p.size();
        hit = true;
        break;
      }
    }
    if (!hit) ++i;
  }

  // AddedVocabulary::find_matches.
  size_t start_offset = 0;
  for (const auto& f : matches) {
    const added_token& t = tokens_[f.token];
    size_t start = f.begin, stop = f.end;
    if (t.single_word) {
      bool start_space = start == 0 || !ends_with_word(text, start);
      bool stop_space = stop == n || !starts_with_word(text, stop);
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) {
      size_t s = start;
      while (s > 0) {
        size_t c = char_start_before(text, s);
        size_t k = c;
        if (!is_white_space(utf8::next(text, k))) break;
        s = c;
      }
      start = std::max(s, start_offset);
    }
    if (t.rstrip) {
      while (stop < n) {
        size_t k = stop;
        if (!is_white_space(utf8::next(text, k))) break;
        stop = k;
      }
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, t.id});
    start_offset = stop;
  }
  if (start_offset < n) out.push_back({start_offset, n, -1});
}

const added_token* added_vocabulary::find(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

int32_t added_vocabulary::id_of(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? -1 : it->second;
}

const std::string& added_vocabulary::decode_text(const added_token& t) const {
  if (!t.normalized) return t.content;
  return normalized_[static_cast<size_t>(&t - tokens_.data())];
}

}  // namespace asyncrl
