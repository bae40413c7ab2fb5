#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/text/tokenizer.hpp"

namespace asyncrl {

/// A character-level tokenizer. The built-in vocabulary is the four specials <pad>, <bos>,
/// <eos>, <unk> (ids 0..3) followed by '\n' and printable ASCII 32..126. It is saved beside
/// a model as `tokenizer.json`.
class char_tokenizer final : public tokenizer {
 public:
  /// The built-in vocabulary described above (vocab_size() == 100).
  static char_tokenizer builtin();
  /// Loads `tokenizer.json`; throws std::runtime_error naming the file and what is wrong.
  static char_tokenizer load(const std::string& path);
  /// Writes `tokenizer.json` (atomically: temp file + rename).
  void save(const std::string& path) const;

  /// Text to ids, without specials. Characters outside the vocabulary map to <unk>.
  std::vector<int32_t> encode(std::string_view text) const override;
  /// Ids to text. Specials are dropped when skip_special, else rendered as "<eos>" etc.
  /// Ids outside [0, vocab_size) render as <unk>; never throws on bad ids.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = true) const override;
  std::string token_bytes(int32_t id, bool skip_special = true) const override;
  int32_t special_id(std::string_view content) const override;
  const char* kind() const override { return "char"; }
  /// save() to dir/char_tokenizer.json.
  void save_dir(const std::string& dir) const override;

  int32_t vocab_size() const override { return static_cast<int32_t>(chars_.size()) + kNumSpecial; }
  int32_t pad_id() const override { return 0; }
  int32_t bos_id() const override { return 1; }
  int32_t eos_id() const override { return 2; }
  int32_t unk_id() const { return 3; }

  static constexpr int32_t kNumSpecial = 4;

 private:
  std::string chars_;         // chars_[i] has id i + kNumSpecial
  int32_t lookup_[256] = {};  // byte -> id (unk_id when absent)
  void build_lookup();
};

}  // namespace asyncrl
