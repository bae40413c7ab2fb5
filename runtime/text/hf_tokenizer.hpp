#pragma once

// A Hugging Face tokenizer.json: byte-level BPE (GPT-2, Llama 3, Qwen2.5 style) or a
// SentencePiece-family file (BPE with byte_fallback or Unigram, Metaspace/Replace/Prepend,
// Llama 2, Gemma, Mistral, T5 style), encoding and decoding exactly as Hugging Face's
// `tokenizers` library does (checked against it: tests/fixtures/tokenizer/). Components outside
// what is implemented (see normalizer.hpp, pre_tokenizer.hpp, bpe_model.hpp, unigram_model.hpp,
// decoder.hpp) are refused at load with the file and component named, so a file is never
// tokenized differently from the reference. tokenizer_config.json, when present,
// gives the chat template and the bos/eos/pad tokens.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/text/tokenizer.hpp"

namespace asyncrl {

class hf_tokenizer final : public tokenizer {
 public:
  /// Loads dir/tokenizer.json and, when present, dir/tokenizer_config.json (and
  /// dir/chat_template.jinja when the config has no chat_template). Throws std::runtime_error
  /// naming the file (and component) on any problem.
  static std::shared_ptr<const hf_tokenizer> load_dir(const std::string& dir);
  /// Loads the given files; `config_json` may be "" (no bos/eos/pad, no chat template).
  static std::shared_ptr<const hf_tokenizer> load_files(const std::string& tokenizer_json,
                                                        const std::string& config_json);
  ~hf_tokenizer() override;

  /// Hugging Face's encode(text, add_special_tokens=false). Invalid UTF-8 in `text` is first
  /// replaced by U+FFFD (as from_utf8_lossy does): the reference accepts only valid text.
  std::vector<int32_t> encode(std::string_view text) const override;
  /// Hugging Face's decode(ids, skip_special_tokens); ids it does not know are skipped.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = true) const override;
  std::string token_bytes(int32_t id, bool skip_special = true) const override;
  int32_t vocab_size() const override;
  int32_t bos_id() const override;
  int32_t eos_id() const override;
  /// The pad token's id, else eos_id().
  int32_t pad_id() const override;
  int32_t special_id(std::string_view content) const override;
  /// Writes tokenizer.json and tokenizer_config.json (and chat_template.jinja) byte-identical to
  /// what was read.
  void save_dir(const std::string& dir) const override;
  const char* kind() const override { return "hf-bpe"; }

  /// tokenizer_config.json's chat_template ("" when none).
  const std::string& chat_template() const;
  /// tokenizer_config.json's bos_token / eos_token / pad_token ("" when not given).
  const std::string& bos_token() const;
  const std::string& eos_token() const;
  const std::string& pad_token() const;
  /// The id of an added token or vocabulary entry (byte-level text, e.g. "Ġthe"), or -1.
  int32_t token_to_id(std::string_view token) const;
  /// Whether `id` is a special token (dropped by decode when skip_special).
  bool is_special(int32_t id) const;

  /// Empties the cache of BPE results for repeated words (for cold-cache measurements).
  void clear_cache() const;
  /// Words currently cached.
  size_t cache_entries() const;

  struct impl;

 private:
  explicit hf_tokenizer(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace asyncrl
