#pragma once

// The regular expressions of tokenizer.json files (Split pre-tokenizers, ByteLevel's GPT-2
// pattern) are written for Oniguruma, which Hugging Face's tokenizers library matches them
// with. This class runs them on PCRE2 after translating the few constructs whose meaning
// differs, and iterates matches exactly as the Rust `onig` crate's find_iter does (empty
// matches included), so the splits are the reference library's.

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct pcre2_real_code_8;

namespace asyncrl {

class onig_regex {
 public:
  /// Compiles `pattern` (Oniguruma syntax). Throws std::invalid_argument saying what is not
  /// supported or why PCRE2 rejected it.
  explicit onig_regex(const std::string& pattern);
  ~onig_regex();
  onig_regex(const onig_regex&) = delete;
  onig_regex& operator=(const onig_regex&) = delete;

  /// Byte ranges [start, end) of the successive matches in `text` (valid UTF-8), as the
  /// onig crate's find_iter yields them. Safe from several threads at once.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

  /// The PCRE2 pattern an Oniguruma one is translated to; throws std::invalid_argument for a
  /// construct it does not translate. Exposed for tests.
  static std::string translate(const std::string& onig);

  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  pcre2_real_code_8* code_ = nullptr;
};

}  // namespace asyncrl
