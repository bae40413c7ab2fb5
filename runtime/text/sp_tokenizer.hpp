#pragma once

// A SentencePiece tokenizer.model (the protobuf Llama 1/2, Mistral, Gemma and T5 checkpoints
// ship, often without a tokenizer.json), run by Debian's libsentencepiece itself, so encode and
// decode are SentencePiece's own (checked against the Python sentencepiece package, whose 0.2
// breaks some Unigram ties differently from Debian 12's 0.1.97:
// tests/fixtures/tokenizer/sp/). The library is loaded at run time through
// libasyncrl_sentencepiece.so (sentencepiece_shim.cc says why); no header here names it.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/text/tokenizer.hpp"

namespace asyncrl {

class sp_tokenizer final : public tokenizer {
 public:
  /// Loads `model_file` (a SentencePiece model) and, when `config_json` is not "", the
  /// bos/eos/pad tokens of that tokenizer_config.json. Throws std::runtime_error naming the file.
  static std::shared_ptr<const sp_tokenizer> load_files(const std::string& model_file,
                                                        const std::string& config_json);
  /// dir/tokenizer.model, with dir/tokenizer_config.json when present.
  static std::shared_ptr<const sp_tokenizer> load_dir(const std::string& dir);
  ~sp_tokenizer() override;

  /// SentencePiece's encode (no BOS/EOS; its normalizer, user-defined symbols matched in the
  /// text, byte fallback). Control tokens written in the text ("<s>") stay text, as there.
  std::vector<int32_t> encode(std::string_view text) const override;
  /// With skip_special, SentencePiece's decode of the ids inside the vocabulary (it drops
  /// control tokens). Without, control tokens are written as their piece text and the ids
  /// between them decoded segment by segment.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = true) const override;
  /// A piece in the middle of a text: "▁" as a space, <0xXX> as its byte, unk as " ⁇ ". The
  /// space SentencePiece drops at the start of a decoded text is kept here.
  std::string token_bytes(int32_t id, bool skip_special = true) const override;
  int32_t vocab_size() const override;
  int32_t bos_id() const override;
  int32_t eos_id() const override;
  /// The pad token's id, else eos_id().
  int32_t pad_id() const override;
  /// The id of a control, unknown or user-defined piece (one its own text encodes to), or -1.
  int32_t special_id(std::string_view content) const override;
  /// Writes tokenizer.model (and tokenizer_config.json) byte-identical to what was read.
  void save_dir(const std::string& dir) const override;
  const char* kind() const override { return "sentencepiece"; }

  struct impl;

 private:
  explicit sp_tokenizer(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

/// The tokenizer of a model directory that has tokenizer.model but no tokenizer.json (which
/// takes precedence), else nullptr.
tokenizer_ptr load_sentencepiece_dir(const std::string& dir);

}  // namespace asyncrl
