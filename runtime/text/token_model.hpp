#pragma once

// What hf_tokenizer needs from a tokenizer.json "model": BPE (bpe_model) or Unigram
// (unigram_model). Both turn one pre-tokenized word into ids and map ids to vocabulary entries.

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/text/hf_json.hpp"

namespace asyncrl {

class token_model {
 public:
  virtual ~token_model() = default;

  /// Appends the ids of one pre-tokenized word.
  virtual void tokenize(std::string_view word, std::vector<int32_t>& out) const = 0;
  /// The id of a vocabulary entry, or -1.
  virtual int32_t token_to_id(std::string_view token) const = 0;
  /// The vocabulary entry of `id`, or nullptr.
  virtual const std::string* id_to_token(int32_t id) const = 0;
  /// Number of vocabulary entries (Hugging Face's get_vocab_size; added tokens are numbered
  /// from it).
  virtual size_t vocab_entries() const = 0;
  /// One past the largest id.
  virtual int32_t id_end() const = 0;

  /// Empties the cache of results for repeated words, where the model keeps one.
  virtual void clear_cache() const {}
  /// Words currently cached.
  virtual size_t cache_entries() const { return 0; }

  /// The model tokenizer.json's "model" object describes (BPE or Unigram); throws
  /// std::runtime_error naming `where` for any other type or an unsupported option.
  static std::unique_ptr<const token_model> from_json(const nlohmann::json& j,
                                                      const hf_where& where);
};

}  // namespace asyncrl
