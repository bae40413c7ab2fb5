#include "runtime/text/unicode_gap.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdio>
#include <iterator>

namespace asyncrl::unicode_gap {

namespace {

struct gap_range {
  char32_t first, last;
};
struct gap_category {
  char32_t first, last;
  const char* gc;
};
struct gap_lowercase {
  char32_t cp;
  const char* lower;
};

#include "runtime/text/unicode_gap_data.inc"

void append_item(std::string& out, char32_t a, char32_t b) {
  char buf[40];
  if (a == b)
    std::snprintf(buf, sizeof(buf), "\\x{%X}", static_cast<unsigned>(a));
  else
    std::snprintf(buf, sizeof(buf), "\\x{%X}-\\x{%X}", static_cast<unsigned>(a),
                  static_cast<unsigned>(b));
  out += buf;
}

}  // namespace

std::string category_items(const std::string& gc) {
  std::string out;
  if (gc.empty() || gc.size() > 2) return out;
  for (const auto& r : kCategoryGap)
    if (std::string(r.gc).compare(0, gc.size(), gc) == 0) append_item(out, r.first, r.last);
  return out;
}

std::string word_items() {
  std::string out;
  for (const auto& r : kWordGap)
    append_item(out, r.first, r.last);
  return out;
}

bool normalization_unknown(char32_t cp) {
  if (cp < kNormalizationGap[0].first) return false;
  auto it = std::upper_bound(std::begin(kNormalizationGap), std::end(kNormalizationGap), cp,
                             [](char32_t c, const gap_range& r) { return c < r.first; });
  return it != std::begin(kNormalizationGap) && cp <= std::prev(it)->last;
}

const char* category_of(char32_t cp) {
  auto it = std::upper_bound(std::begin(kCategoryGap), std::end(kCategoryGap), cp,
                             [](char32_t c, const gap_category& r) { return c < r.first; });
  if (it == std::begin(kCategoryGap) || cp > std::prev(it)->last) return nullptr;
  return std::prev(it)->gc;
}

const char* lowercase_of(char32_t cp) {
  auto it = std::lower_bound(std::begin(kLowercaseGap), std::end(kLowercaseGap), cp,
                             [](const gap_lowercase& r, char32_t c) { return r.cp < c; });
  return it != std::end(kLowercaseGap) && it->cp == cp ? it->lower : nullptr;
}

const char* generated_pcre2_unicode() {
  return kPcre2Unicode;
}

std::string linked_pcre2_unicode() {
  char buf[64] = {};
  pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, buf);
  return buf;
}

}  // namespace asyncrl::unicode_gap
