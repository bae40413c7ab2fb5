#pragma once

// tokenizer.json "decoder" for tokenizers that are not byte-level (SentencePiece-family files:
// Llama 2, Gemma, Mistral, T5): token strings -> text, as Hugging Face's decode_chain does.
// Supported: Replace, ByteFallback, Fuse, Strip, Metaspace and Sequence of these. The ByteLevel
// decoder is handled by hf_tokenizer itself (per-id byte tables); anything else is refused at
// load.

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "runtime/text/hf_json.hpp"

namespace asyncrl {

class decoder {
 public:
  virtual ~decoder() = default;
  /// Hugging Face's decode_chain: rewrites the list of token strings (the decoded text is
  /// their concatenation).
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
  /// What one token contributes in the middle of a text, for streaming: a <0xXX> token gives
  /// its raw byte (possibly part of a character); what only applies at the start of the text
  /// (Metaspace's first-token rule, Strip) is left out.
  virtual void token_bytes(std::string& token) const = 0;

  /// The decoder a tokenizer.json value describes (not ByteLevel, not null). Throws
  /// std::runtime_error naming `where` for an unsupported one.
  static std::unique_ptr<const decoder> from_json(const nlohmann::json& j, const hf_where& where);
};

}  // namespace asyncrl
