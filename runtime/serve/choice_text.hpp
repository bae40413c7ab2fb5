#pragma once

// One choice's output as its tokens arrive: text in whole UTF-8 characters, ended by a stop
// token or cut before the first stop string, and never handing out text that a stop string
// could still claim (the last max_stop_len - 1 bytes are held back until the choice ends).

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/text/utf8_stream.hpp"

namespace asyncrl {

class tokenizer;

class choice_text {
 public:
  /// `stop`: strings that end the choice (not part of the text); `stop_ids`: tokens that end
  /// it (kept in the tokens, not in the text: they are specials).
  choice_text(std::vector<std::string> stop, std::vector<int32_t> stop_ids);

  /// Adds one sampled token. Returns true when it ended the choice (a stop token, or text that
  /// completes a stop string; the text is then cut where the stop string begins).
  bool push(int32_t id, float logprob, const tokenizer& tok);
  /// The generation ended without a stop (length, cancelled): releases held bytes.
  void finish();

  bool stopped() const { return stopped_; }
  bool ended() const { return ended_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::vector<float>& logprobs() const { return logprobs_; }
  const std::string& text() const { return text_; }

  /// Text not handed out before that is safe to hand out now (all of it once ended).
  std::string take_text();
  /// Tokens (and their log-probs) not handed out before.
  size_t tokens_taken() const { return tokens_taken_; }
  void mark_tokens_taken() { tokens_taken_ = tokens_.size(); }

 private:
  std::vector<std::string> stop_;
  std::vector<int32_t> stop_ids_;
  size_t hold_ = 0;  // longest stop string - 1
  utf8_stream utf8_;
  std::string text_;
  size_t text_taken_ = 0;
  size_t scanned_ = 0;  // text_ before this offset holds no stop string start that fits
  std::vector<int32_t> tokens_;
  std::vector<float> logprobs_;
  size_t tokens_taken_ = 0;
  bool stopped_ = false;
  bool ended_ = false;

  bool find_stop();
};

}  // namespace asyncrl
