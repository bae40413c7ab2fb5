#pragma once

// tokenizer.json "normalizer": what Hugging Face applies to the text between added tokens before
// pre-tokenization. Supported: null, NFC, NFD, NFKC, NFKD, Lowercase (Unicode tables from
// utf8proc), Replace (String or Regex pattern), Prepend and Sequence of these; anything else is
// refused at load.

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "runtime/text/hf_json.hpp"

namespace asyncrl {

class normalizer {
 public:
  virtual ~normalizer() = default;
  /// Normalizes valid UTF-8 `s` in place.
  virtual void apply(std::string& s) const = 0;

  /// The normalizer a tokenizer.json value describes; nullptr for null. Throws
  /// std::runtime_error naming `where` for an unsupported one.
  static std::unique_ptr<const normalizer> from_json(const nlohmann::json& j,
                                                     const hf_where& where);
};

}  // namespace asyncrl
