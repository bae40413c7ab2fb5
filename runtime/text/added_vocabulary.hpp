#pragma once

// Added and special tokens (tokenizer.json "added_tokens"). As in Hugging Face's
// AddedVocabulary they are found in the text BEFORE normalization and BPE, leftmost-longest:
// first the tokens with normalized=false in the raw text, then those with normalized=true in
// each normalized stretch between them; single_word, lstrip and rstrip are honoured the same way.

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace asyncrl {

struct added_token {
  std::string content;
  int32_t id = -1;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

class added_vocabulary {
 public:
  /// A stretch [begin, end) of the text searched; id >= 0 for an added token, -1 for text.
  struct piece {
    size_t begin, end;
    int32_t id;
  };

  added_vocabulary() = default;
  /// `tokens` have their final ids (one entry per id; the last flags given win, as in Hugging
  /// Face). `normalized_forms[i]` is tokens[i].content normalized (what the normalized=true
  /// tokens are searched as); `special_contents` every content ever marked special.
  added_vocabulary(std::vector<added_token> tokens,
                   const std::vector<std::string>& normalized_forms,
                   std::unordered_set<std::string> special_contents);

  /// Splits `text` at the tokens of one pass: normalized=false ones when !normalized_pass,
  /// else normalized=true ones. Never returns empty stretches.
  void split(std::string_view text, bool normalized_pass, std::vector<piece>& out) const;

  /// The added token with this id, or nullptr.
  const added_token* find(int32_t id) const;
  /// The id of the added token with this content, or -1.
  int32_t id_of(std::string_view content) const;
  /// Whether `text` is the content of a special token (what decode's skip_special tests).
  bool is_special(std::string_view text) const { return specials_.count(std::string(text)) != 0; }
  const std::vector<added_token>& tokens() const { return tokens_; }
  /// The text decode uses for an added token: its normalized form when it is normalized=true
  /// and the normalizer changes it (Hugging Face's normalized cache), else its content.
  const std::string& decode_text(const added_token& t) const;

 private:
  // One leftmost-longest search set.
  struct matcher {
    struct pattern {
      std::string text;
      size_t token;  // index in tokens_
    };
    std::vector<pattern> patterns;  // sorted by first byte, then longest first
    std::vector<uint32_t> first;    // first[b]..first[b+1]: patterns starting with byte b
    bool empty() const { return patterns.empty(); }
    void build();
  };

  std::vector<added_token> tokens_;
  std::vector<std::string> normalized_;  // by index in tokens_
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, int32_t> by_content_;
  std::unordered_set<std::string> specials_;
  matcher raw_, norm_;
};

}  // namespace asyncrl
