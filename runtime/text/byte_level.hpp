#pragma once

// GPT-2's reversible byte <-> unicode map that byte-level BPE vocabularies are written in:
// printable Latin-1 bytes stand for themselves, the other 68 bytes (controls, space, 0x7F..0xA0,
// 0xAD) for U+0100.. in byte order. Same table as Hugging Face's bytes_char().

#include <string>
#include <string_view>

namespace asyncrl::byte_level {

/// Appends the mapped characters (UTF-8) of every byte of `bytes`.
void encode(std::string_view bytes, std::string& out);

/// Appends the bytes `token` stands for when every character of it is in the map and returns
/// true; otherwise appends nothing and returns false (the ByteLevel decoder then uses the
/// token's own UTF-8 bytes, as Hugging Face's does).
bool decode(std::string_view token, std::string& out);

/// The code point byte `b` maps to.
char32_t char_of(unsigned char b);

}  // namespace asyncrl::byte_level
