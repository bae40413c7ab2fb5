#pragma once

// tokenizer.json "pre_tokenizer": splits normalized text into the words the model sees.
// Supported: Sequence, Split (Regex or String pattern, every behavior, invert), ByteLevel
// (add_prefix_space, use_regex with GPT-2's pattern) and Metaspace (replacement, prepend_scheme
// always/first/never, split), matching Hugging Face's splits exactly; anything else is refused at
// load.

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "runtime/text/hf_json.hpp"

namespace asyncrl {

class pre_tokenizer {
 public:
  virtual ~pre_tokenizer() = default;
  /// Replaces every piece by its splits, in order; empty splits are dropped (as Hugging Face's
  /// PreTokenizedString does). `first_at_origin` says whether pieces[0] starts at offset 0 of
  /// the original text (Metaspace's prepend_scheme "first" reads it); it is updated for the
  /// new pieces[0].
  virtual void apply(std::vector<std::string>& pieces, bool& first_at_origin) const = 0;
  /// apply() for pieces that do not start the text.
  void apply(std::vector<std::string>& pieces) const {
    bool at_origin = false;
    apply(pieces, at_origin);
  }
  /// Whether this maps text to GPT-2's byte-level alphabet (is or contains a ByteLevel).
  virtual bool maps_bytes() const { return false; }

  /// The pre-tokenizer a tokenizer.json value describes; nullptr for null. Throws
  /// std::runtime_error naming `where` for an unsupported one.
  static std::unique_ptr<const pre_tokenizer> from_json(const nlohmann::json& j,
                                                        const hf_where& where);
};

}  // namespace asyncrl
