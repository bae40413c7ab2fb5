#pragma once

// UTF-8 helpers shared by the Hugging Face tokenizer pieces: validation, code point
// encode/decode, and the lossy conversion Hugging Face's decode ends with (Rust's
// String::from_utf8_lossy: each maximal invalid subsequence becomes one U+FFFD).

#include <cstddef>
#include <string>
#include <string_view>

namespace asyncrl::utf8 {

/// True when `s` is well-formed UTF-8 (no overlongs, surrogates or code points > U+10FFFF).
bool valid(std::string_view s);

/// Appends the lossy decoding of `bytes` to `out` and returns how many bytes it consumed.
/// With `at_end` everything is consumed (an incomplete trailing sequence becomes one U+FFFD);
/// without it, a trailing sequence that is valid so far but incomplete (at most 3 bytes) is left
/// unconsumed so that more bytes can complete it.
size_t append_lossy(std::string_view bytes, bool at_end, std::string& out);

/// `bytes` as valid UTF-8, exactly as Rust's String::from_utf8_lossy renders it.
std::string lossy(std::string_view bytes);

/// Appends the UTF-8 encoding of code point `cp` (which must be a Unicode scalar value).
void append(std::string& out, char32_t cp);

/// Decodes the code point at `s[i]` of a VALID UTF-8 string and advances `i` past it.
char32_t next(std::string_view s, size_t& i);

/// Length in bytes of the UTF-8 sequence led by byte `lead` of a valid string (1..4).
inline size_t seq_len(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

}  // namespace asyncrl::utf8
