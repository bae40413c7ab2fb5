#include "runtime/text/unigram_model.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "runtime/text/utf8.hpp"

namespace asyncrl {

namespace {

// What the reference subtracts from the lowest piece score to score an unknown character.
constexpr double kUnkPenalty = 10.0;

}  // namespace

unigram_model::unigram_model(const nlohmann::json& j, const hf_where& where) {
  hf_where here = where.typed("Unigram");
  auto vocab = j.find("vocab");
  if (vocab == j.end() || !vocab->is_array()) here.fail("missing array 'vocab'");
  hf_where vw = here.field("vocab");
  pieces_.reserve(vocab->size());
  scores_.reserve(vocab->size());
  for (size_t i = 0; i < vocab->size(); ++i) {
    const auto& e = (*vocab)[i];
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
      vw.item(i).fail("expected [piece, score]");
    pieces_.push_back(e[0].get<std::string>());
    scores_.push_back(e[1].get<double>());
  }
  if (pieces_.empty()) here.fail("the vocabulary is empty");
  if (pieces_.size() > 0x7fffffffu) here.fail("the vocabulary is too large");
  min_score_ = *std::min_element(scores_.begin(), scores_.end());
  ids_.reserve(pieces_.size());
  for (size_t id = 0; id < pieces_.size(); ++id) {
    ids_[pieces_[id]] = static_cast<int32_t>(id);
    max_piece_bytes_ = std::max(max_piece_bytes_, pieces_[id].size());
  }

  auto unk = j.find("unk_id");
  if (unk == j.end() || unk->is_null())
    here.fail(
        "a Unigram model without unk_id is not supported (the reference fails on any "
        "character outside the vocabulary)");
  if (!unk->is_number_unsigned() || unk->get<uint64_t>() >= pieces_.size())
    here.fail("unk_id " + unk->dump() + " is not an id of the vocabulary");
  unk_id_ = unk->get<int32_t>();
  byte_fallback_ = here.get_bool(j, "byte_fallback", false);
  byte_ids_.assign(256, -1);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    byte_ids_[b] = token_to_id(name);
  }
}

int32_t unigram_model::token_to_id(std::string_view token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

const std::string* unigram_model::id_to_token(int32_t id) const {
  if (id < 0 || id >= id_end()) return nullptr;
  return &pieces_[id];
}

// Hugging Face's Unigram::encode_optimized and tokenize, step for step: best[e] is the best
// path ending at byte e; candidates are the vocabulary pieces starting at each character (in
// order of length, a later one replacing an earlier only when strictly better), plus an unknown
// one-character piece where no single-character piece exists. Backtracking fuses runs of unk
// nodes; each piece string is then looked up again (a fused run is not in the vocabulary: byte
// tokens with byte_fallback, else unk).
void unigram_model::tokenize(std::string_view w, std::vector<int32_t>& out) const {
  const size_t n = w.size();
  if (n == 0) return;
  struct node {
    int32_t id = 0;
    double score = 0;
    bool reached = false;
    size_t start = 0;
  };
  std::vector<node> best(n + 1);
  const double unk_score = min_score_ - kUnkPenalty;
  for (size_t s = 0; s < n;) {
    const double here = best[s].score;
    const size_t mblen = utf8::seq_len(static_cast<unsigned char>(w[s]));
    bool has_single = false;
    const size_t longest = std::min(max_piece_bytes_, n - s);
    for (size_t len = 1; len <= longest; ++len) {
      auto it = ids_.find(w.substr(s, len));
      if (it == ids_.end()) continue;
      node& t = best[s + len];
      double cand = scores_[it->second] + here;
      if (!t.reached || cand > t.score) t = {it->second, cand, true, s};
      if (len == mblen) has_single = true;
    }
    if (!has_single) {
      node& t = best[s + mblen];
      double cand = unk_score + here;
      if (!t.reached || cand > t.score) t = {unk_id_, cand, true, s};
    }
    s += mblen;
  }

  // Pieces as [begin, end) byte ranges, last first.
  std::vector<std::pair<size_t, size_t>> spans;
  bool unk_open = false;
  for (size_t e = n; e > 0;) {
    const node& nd = best[e];
    if (nd.id == unk_id_) {
      if (unk_open)
        spans.back().first = nd.start;
      else
        spans.emplace_back(nd.start, e);
      unk_open = true;
    } else {
      spans.emplace_back(nd.start, e);
      unk_open = false;
    }
    e = nd.start;
  }
  for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
    std::string_view piece = w.substr(it->first, it->second - it->first);
    int32_t id = token_to_id(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    if (byte_fallback_ && std::all_of(piece.begin(), piece.end(), [&](char c) {
          return byte_ids_[static_cast<unsigned char>(c)] >= 0;
        })) {
      for (char c : piece)
        out.push_back(byte_ids_[static_cast<unsigned char>(c)]);
      continue;
    }
    out.push_back(unk_id_);
  }
}

}  // namespace asyncrl
