#pragma once

// What every tokenizer offers the runtime. Two implementations: char_tokenizer (the built-in
// character vocabulary models trained here use) and hf_tokenizer (a Hugging Face
// tokenizer.json: byte-level BPE). Both are immutable after loading, so one instance is shared
// by every role of a run (actor_env holds a shared_ptr<const tokenizer>); encode and decode are
// safe to call from several threads at once.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace asyncrl {

class tokenizer {
 public:
  virtual ~tokenizer() = default;

  /// Text to ids. Never adds BOS/EOS. Special and added tokens written in the text (e.g.
  /// "<|im_start|>") become their ids where the tokenizer has them.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;

  /// Ids to text. Specials are dropped when skip_special. Never throws on ids outside
  /// [0, vocab_size): the char tokenizer renders them as <unk>, the HF one skips them. Invalid
  /// UTF-8 (e.g. a cut multi-byte character) becomes U+FFFD, as Hugging Face's decode does.
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special = true) const = 0;

  /// The raw bytes one token stands for, for streaming output (see utf8_stream): "" for a
  /// special when skip_special and for an id out of range. May be an incomplete UTF-8
  /// sequence: byte-level BPE tokens can split a character.
  virtual std::string token_bytes(int32_t id, bool skip_special = true) const = 0;

  /// One past the largest id, added tokens included.
  virtual int32_t vocab_size() const = 0;
  /// -1 when the tokenizer has none.
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;
  virtual int32_t pad_id() const = 0;

  /// The id of a special or added token given by its text ("<|im_end|>"), or -1.
  virtual int32_t special_id(std::string_view content) const = 0;

  /// Writes what a model directory needs to load this tokenizer again into `dir` (char:
  /// char_tokenizer.json; HF: tokenizer.json and tokenizer_config.json as read).
  virtual void save_dir(const std::string& dir) const = 0;

  /// Short name for messages and reports: "char" or "hf-bpe".
  virtual const char* kind() const = 0;
};

using tokenizer_ptr = std::shared_ptr<const tokenizer>;

}  // namespace asyncrl
