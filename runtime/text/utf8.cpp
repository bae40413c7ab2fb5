#include "runtime/text/utf8.hpp"

namespace asyncrl::utf8 {

namespace {

// For a lead byte: the sequence length and the range allowed for the SECOND byte (the Unicode
// "well-formed byte sequences" table: E0 and F0 exclude overlongs, ED excludes surrogates, F4
// stops at U+10FFFF). Later bytes are always 80..BF. len 0 marks a byte that never starts one.
struct lead_info {
  int len;
  unsigned char lo, hi;
};

lead_info lead(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

const char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

size_t append_lossy(std::string_view bytes, bool at_end, std::string& out) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    // Copy a run of ASCII at once: the common case.
    size_t j = i;
    while (j < n && p[j] < 0x80)
      ++j;
    out.append(bytes.data() + i, j - i);
    i = j;
    if (i == n) break;

    lead_info li = lead(p[i]);
    if (li.len == 0) {  // a continuation byte or C0, C1, F5..FF on its own
      out += kReplacement;
      ++i;
      continue;
    }
    // How many bytes of the sequence are present and valid.
    int good = 1;
    while (good < li.len && i + good < n) {
      unsigned char c = p[i + good];
      bool ok = good == 1 ? (c >= li.lo && c <= li.hi) : (c >= 0x80 && c <= 0xBF);
      if (!ok) break;
      ++good;
    }
    if (good == li.len) {
      out.append(bytes.data() + i, good);
      i += good;
    } else if (i + good == n && !at_end) {
      return i;  // valid so far, incomplete: wait for more bytes
    } else {
      // The maximal valid prefix is one error (Rust's Utf8Chunks); the offending byte, if any,
      // is looked at again as the possible start of the next sequence.
      out += kReplacement;
      i += good;
    }
  }
  return n;
}

std::string lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  append_lossy(bytes, true, out);
  return out;
}

bool valid(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    lead_info li = lead(p[i]);
    if (li.len == 0 || i + li.len > n) return false;
    if (p[i + 1] < li.lo || p[i + 1] > li.hi) return false;
    for (int k = 2; k < li.len; ++k)
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return false;
    i += li.len;
  }
  return true;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

char32_t next(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  unsigned char b = p[i];
  if (b < 0x80) {
    ++i;
    return b;
  }
  size_t len = seq_len(b);
  char32_t cp = b & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < len; ++k)
    cp = (cp << 6) | (p[i + k] & 0x3F);
  i += len;
  return cp;
}

}  // namespace asyncrl::utf8
