#pragma once

// tokenizer.json "model" of type Unigram (SentencePiece's unigram language model): pieces with
// log-probability scores; a word is split by Viterbi into the pieces of highest total score, as
// Hugging Face's Unigram::encode_optimized does (an unknown character scores the lowest piece
// score minus 10, and consecutive unknown characters are fused into one unk). With byte_fallback
// a piece outside the vocabulary becomes its <0xXX> byte tokens.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/text/hf_json.hpp"
#include "runtime/text/token_model.hpp"

namespace asyncrl {

class unigram_model final : public token_model {
 public:
  /// Builds the model from {"type": "Unigram", "vocab": [[piece, score], ...], "unk_id": n,
  /// "byte_fallback": b}; throws std::runtime_error naming `where` when malformed or without
  /// unk_id (the reference then fails on the first character outside the vocabulary).
  unigram_model(const nlohmann::json& j, const hf_where& where);

  void tokenize(std::string_view word, std::vector<int32_t>& out) const override;
  int32_t token_to_id(std::string_view token) const override;
  const std::string* id_to_token(int32_t id) const override;
  size_t vocab_entries() const override { return pieces_.size(); }
  int32_t id_end() const override { return static_cast<int32_t>(pieces_.size()); }

 private:
  std::vector<std::string> pieces_;                    // by id
  std::vector<double> scores_;                         // by id
  std::unordered_map<std::string_view, int32_t> ids_;  // views into pieces_; a later duplicate wins
  size_t max_piece_bytes_ = 0;
  double min_score_ = 0;
  int32_t unk_id_ = -1;
  bool byte_fallback_ = false;
  std::vector<int32_t> byte_ids_;  // <0xXX> token of each byte, or -1
};

}  // namespace asyncrl
