#pragma once

// Turns a stream of token bytes (tokenizer::token_bytes, one token at a time) into text that
// can be shown as it arrives: a byte-level BPE token may end in the middle of a multi-byte
// character, so the incomplete tail is held back until the next bytes complete it.

#include <string>
#include <string_view>

namespace asyncrl {

class utf8_stream {
 public:
  /// Adds `bytes` and returns the text they complete: everything received so far that was not
  /// returned before, except an incomplete trailing UTF-8 sequence (at most 3 bytes), which is
  /// held. Invalid bytes become U+FFFD exactly as Rust's String::from_utf8_lossy renders them,
  /// so the concatenation of every push() and the final flush() equals the lossy decoding of
  /// all the bytes at once (what tokenizer::decode returns for the same tokens).
  std::string push(std::string_view bytes);

  /// Returns what is held (an incomplete sequence becomes one U+FFFD) and empties the stream.
  std::string flush();

  /// Bytes held back, waiting for the rest of their character (0..3).
  size_t pending() const { return held_.size(); }

 private:
  std::string held_;
};

}  // namespace asyncrl
