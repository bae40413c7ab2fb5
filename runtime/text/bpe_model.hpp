#pragma once

// tokenizer.json "model" of type BPE: the vocabulary, the merges ranked by their order, and
// Hugging Face's merge procedure (lowest rank first, leftmost on ties), with `ignore_merges`
// `unk_token`/`fuse_unk` and `byte_fallback` (a character outside the vocabulary becomes its
// <0xXX> byte tokens). Dropout and subword prefixes/suffixes are refused at load. Results for
// repeated words are kept in a bounded, thread-safe cache.

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/text/hf_json.hpp"
#include "runtime/text/token_model.hpp"

namespace asyncrl {

class bpe_model final : public token_model {
 public:
  /// Builds the model from tokenizer.json's "model" object; throws std::runtime_error naming
  /// `where` for anything unsupported or inconsistent (e.g. a merge naming an unknown token).
  bpe_model(const nlohmann::json& j, const hf_where& where);
  ~bpe_model() override;

  /// Appends the ids of one pre-tokenized word. Uses and fills the cache.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const override;

  /// The id of a vocabulary entry, or -1.
  int32_t token_to_id(std::string_view token) const override;
  /// The vocabulary entry of `id`, or nullptr.
  const std::string* id_to_token(int32_t id) const override;
  /// Number of vocabulary entries (Hugging Face's get_vocab_size; added tokens are numbered
  /// from it).
  size_t vocab_entries() const override { return vocab_.size(); }
  /// One past the largest id.
  int32_t id_end() const override { return static_cast<int32_t>(tokens_.size()); }

  void clear_cache() const override;
  size_t cache_entries() const override;

 private:
  struct merge {
    uint32_t rank;
    int32_t new_id;
  };
  std::vector<std::string> tokens_;  // by id; tokens_[id] empty with present_[id] false = hole
  std::vector<bool> present_;
  std::unordered_map<std::string_view, int32_t> vocab_;  // views into tokens_
  std::unordered_map<uint64_t, merge> merges_;           // (left id << 32 | right id) -> merge
  std::array<int32_t, 0x180> small_char_id_{};  // single-character tokens below U+0180, or -1
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  bool byte_fallback_ = false;
  std::array<int32_t, 256> byte_ids_{};  // the <0xXX> token of each byte, or -1

  // Thread-safe word -> ids cache, sharded to keep lock contention low; a shard is emptied when
  // it outgrows its share of the bound.
  static constexpr size_t kShards = 16;
  static constexpr size_t kCacheBound = 50000;
  static constexpr size_t kMaxCachedWord = 256;  // bytes; longer words are rare, not cached
  struct shard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>> map;
  };
  mutable std::array<shard, kShards> cache_;

  const merge* find_merge(int32_t a, int32_t b) const;
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
};

}  // namespace asyncrl
