#include "runtime/text/byte_level.hpp"

#include <array>

#include "runtime/text/utf8.hpp"

namespace asyncrl::byte_level {

namespace {

struct tables {
  std::array<char32_t, 256> to_char{};
  std::array<std::string, 256> to_utf8;
  // Inverse: code point -> byte, for code points below 0x144 (all the map uses); -1 elsewhere.
  std::array<int, 0x144> to_byte{};

  tables() {
    to_byte.fill(-1);
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    char32_t extra = 0x100;
    for (int b = 0; b < 256; ++b) {
      to_char[b] = printable(b) ? static_cast<char32_t>(b) : extra++;
      utf8::append(to_utf8[b], to_char[b]);
      to_byte[to_char[b]] = b;
    }
  }
};

const tables& get() {
  static const tables t;
  return t;
}

}  // namespace

char32_t char_of(unsigned char b) {
  return get().to_char[b];
}

void encode(std::string_view bytes, std::string& out) {
  const auto& t = get();
  out.reserve(out.size() + bytes.size() * 2);
  for (char c : bytes)
    out += t.to_utf8[static_cast<unsigned char>(c)];
}

bool decode(std::string_view token, std::string& out) {
  const auto& t = get();
  const size_t start = out.size();
  for (size_t i = 0; i < token.size();) {
    // Every mapped character is 1 or 2 bytes of UTF-8; anything longer is not in the map.
    auto b0 = static_cast<unsigned char>(token[i]);
    char32_t cp;
    if (b0 < 0x80) {
      cp = b0;
      i += 1;
    } else if ((b0 & 0xE0) == 0xC0 && i + 1 < token.size()) {
      cp = (static_cast<char32_t>(b0 & 0x1F) << 6) |
           (static_cast<unsigned char>(token[i + 1]) & 0x3F);
      i += 2;
    } else {
      cp = 0x10000;  // not in the map
    }
    if (cp >= t.to_byte.size() || t.to_byte[cp] < 0) {
      out.resize(start);
      return false;
    }
    out.push_back(static_cast<char>(t.to_byte[cp]));
  }
  return true;
}

}  // namespace asyncrl::byte_level
