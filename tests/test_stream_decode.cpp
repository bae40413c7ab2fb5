// Streaming decode as `asyncrl generate --stream` does it: each token's bytes through
// utf8_stream, with the real Qwen2.5 tokenizer, whose byte-level tokens split CJK characters
// and emoji.

#include <gtest/gtest.h>

#include <fstream>

#include "runtime/text/hf_tokenizer.hpp"
#include "runtime/text/utf8_stream.hpp"

namespace asyncrl {
namespace {

// True when `s` is well-formed UTF-8 that ends on a character boundary.
bool whole_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    i += n;
  }
  return true;
}

// Catches a character split across two tokens printed half (the terminal shows garbage), bytes
// held back and lost at the end, and special tokens leaking into the text.
TEST(StreamDecode, TokenByTokenOutputIsAlwaysWholeCharactersAndEqualsTheText) {
  auto dir = std::string(ASYNCRL_SOURCE_DIR) + "/tests/fixtures/hf/qwen2_5";
  ASSERT_TRUE(std::ifstream(dir + "/tokenizer.json")) << "run scripts/fetch_tokenizers.py";
  auto tok = hf_tokenizer::load_dir(dir);
  const std::string texts[] = {"日本語の文章と絵文字 🤖👩‍👩‍👧 café",
                               "Ответ: 42 ✓", "#### 7"};
  int split_chars = 0;
  for (const auto& text : texts) {
    auto ids = tok->encode(text);
    ids.push_back(tok->special_id("<|im_end|>"));  // a response ends with its stop token
    utf8_stream out;
    std::string shown;
    for (auto id : ids) {
      auto bytes = tok->token_bytes(id, /*skip_special=*/true);
      if (!whole_utf8(bytes)) ++split_chars;
      auto piece = out.push(bytes);
      EXPECT_TRUE(whole_utf8(piece)) << text;
      shown += piece;
      EXPECT_EQ(text.compare(0, shown.size(), shown), 0) << "not a prefix: " << shown;
    }
    shown += out.flush();
    EXPECT_EQ(shown, text);
  }
  // The test means something only if some token really ends inside a character.
  EXPECT_GT(split_chars, 0);
}

}  // namespace
}  // namespace asyncrl
