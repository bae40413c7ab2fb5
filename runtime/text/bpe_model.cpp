#include "runtime/text/bpe_model.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <queue>
#include <stdexcept>

#include "runtime/text/utf8.hpp"

namespace asyncrl {

namespace {

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

// A prefix/suffix option: null and "" both mean none (the merged strings are the same).
void refuse_affix(const nlohmann::json& j, const char* key, const hf_where& here) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  if (!it->is_string() || !it->get<std::string>().empty())
    here.fail(std::string("'") + key + "' " + it->dump() + " is not supported");
}

}  // namespace

bpe_model::bpe_model(const nlohmann::json& j, const hf_where& where) {
  hf_where here = where.typed("BPE");
  byte_fallback_ = here.get_bool(j, "byte_fallback", false);
  auto dropout = j.find("dropout");
  if (dropout != j.end() && !dropout->is_null() &&
      !(dropout->is_number() && dropout->get<double>() == 0.0))
    here.fail("dropout " + dropout->dump() + " is not supported");
  refuse_affix(j, "continuing_subword_prefix", here);
  refuse_affix(j, "end_of_word_suffix", here);
  fuse_unk_ = here.get_bool(j, "fuse_unk", false);
  ignore_merges_ = here.get_bool(j, "ignore_merges", false);

  // Vocabulary.
  auto vocab = j.find("vocab");
  if (vocab == j.end() || !vocab->is_object()) here.fail("missing object 'vocab'");
  int64_t max_id = -1;
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it->is_number_unsigned() || it->get<uint64_t>() > 0x7fffffffu)
      here.field("vocab").fail("'" + it.key() + "' has id " + it->dump() +
                               ", expected a non-negative integer");
    max_id = std::max<int64_t>(max_id, it->get<int64_t>());
  }
  // Ids index a table: refuse a vocabulary so sparse that the table would be mostly holes.
  if (max_id >= 4 * static_cast<int64_t>(vocab->size()) + 1024)
    here.field("vocab").fail("ids are too sparse (largest " + std::to_string(max_id) + " for " +
                             std::to_string(vocab->size()) + " entries)");
  tokens_.resize(static_cast<size_t>(max_id + 1));
  present_.assign(tokens_.size(), false);
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    auto id = it->get<int32_t>();
    if (present_[id])
      here.field("vocab").fail("id " + std::to_string(id) + " is given to both '" + tokens_[id] +
                               "' and '" + it.key() + "'");
    tokens_[id] = it.key();
    present_[id] = true;
  }
  vocab_.reserve(vocab->size());
  for (size_t id = 0; id < tokens_.size(); ++id)
    if (present_[id]) vocab_.emplace(tokens_[id], static_cast<int32_t>(id));
  small_char_id_.fill(-1);
  for (const auto& [tok, id] : vocab_) {
    size_t i = 0;
    if (tok.empty() || !utf8::valid(tok)) continue;
    char32_t cp = utf8::next(tok, i);
    if (i == tok.size() && cp < small_char_id_.size()) small_char_id_[cp] = id;
  }

  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    byte_ids_[b] = token_to_id(name);
  }

  std::string unk = here.get_string(j, "unk_token", "");
  if (!unk.empty()) {
    unk_id_ = token_to_id(unk);
    if (unk_id_ < 0) here.fail("unk_token '" + unk + "' is not in the vocabulary");
  }

  // Merges: ["a b", ...] (legacy, "#version" lines skipped) or [["a", "b"], ...]; the rank is
  // the position. A later duplicate replaces an earlier one, as in Hugging Face's map.
  auto merges = j.find("merges");
  if (merges == j.end() || !merges->is_array()) here.fail("missing array 'merges'");
  hf_where mw = here.field("merges");
  merges_.reserve(merges->size());
  uint32_t rank = 0;
  for (size_t i = 0; i < merges->size(); ++i) {
    const auto& m = (*merges)[i];
    std::string a, b;
    if (m.is_string()) {
      const auto& line = m.get_ref<const std::string&>();
      if (line.rfind("#version", 0) == 0) continue;
      size_t sp = line.find(' ');
      if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos)
        mw.item(i).fail("'" + line + "' is not two tokens separated by one space");
      a = line.substr(0, sp);
      b = line.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      mw.item(i).fail("expected \"a b\" or [\"a\", \"b\"]");
    }
    int32_t ia = token_to_id(a), ib = token_to_id(b), in = token_to_id(a + b);
    if (ia < 0) mw.item(i).fail("token '" + a + "' is not in the vocabulary");
    if (ib < 0) mw.item(i).fail("token '" + b + "' is not in the vocabulary");
    if (in < 0) mw.item(i).fail("merged token '" + a + b + "' is not in the vocabulary");
    merges_[pair_key(ia, ib)] = merge{rank, in};
    ++rank;
  }
}

bpe_model::~bpe_model() = default;

int32_t bpe_model::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

const std::string* bpe_model::id_to_token(int32_t id) const {
  if (id < 0 || id >= id_end() || !present_[id]) return nullptr;
  return &tokens_[id];
}

const bpe_model::merge* bpe_model::find_merge(int32_t a, int32_t b) const {
  auto it = merges_.find(pair_key(a, b));
  return it == merges_.end() ? nullptr : &it->second;
}

// Hugging Face's BPE::merge_word and Word::merge_all, step for step: the characters become
// symbols (unknown ones become their byte tokens with byte_fallback when all exist, else
// unk_token, fused when fuse_unk, or vanish without one), then a queue ordered by (rank,
// position) applies merges, skipping entries a previous merge made stale.
void bpe_model::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  struct symbol {
    int32_t c;
    int32_t prev, next;
    uint32_t len;
  };
  std::vector<symbol> sym;
  sym.reserve(word.size());
  auto add = [&](int32_t c, uint32_t len) {
    auto n = static_cast<int32_t>(sym.size());
    if (!sym.empty()) sym.back().next = n;
    sym.push_back({c, n - 1, -1, len});
  };
  int32_t unk_len = 0;  // > 0: an unk symbol is pending
  for (size_t i = 0; i < word.size();) {
    size_t start = i;
    char32_t cp = utf8::next(word, i);
    auto len = static_cast<uint32_t>(i - start);
    int32_t id =
        cp < small_char_id_.size() ? small_char_id_[cp] : token_to_id(word.substr(start, len));
    if (id >= 0) {
      if (unk_len > 0) add(unk_id_, static_cast<uint32_t>(unk_len));
      unk_len = 0;
      add(id, len);
    } else if (byte_fallback_ &&
               std::all_of(word.begin() + static_cast<std::ptrdiff_t>(start),
                           word.begin() + static_cast<std::ptrdiff_t>(i),
                           [&](char c) { return byte_ids_[static_cast<unsigned char>(c)] >= 0; })) {
      // As the reference: a pending unk is not flushed first, so it lands after these bytes.
      for (size_t k = start; k < i; ++k)
        add(byte_ids_[static_cast<unsigned char>(word[k])], 1);
    } else if (unk_id_ >= 0) {
      if (unk_len > 0 && !fuse_unk_) {
        add(unk_id_, static_cast<uint32_t>(unk_len));
        unk_len = 0;
      }
      unk_len += static_cast<int32_t>(len);
    }
  }
  if (unk_len > 0) add(unk_id_, static_cast<uint32_t>(unk_len));

  struct entry {
    uint32_t rank;
    int32_t pos;
    int32_t new_id;
  };
  auto later = [](const entry& x, const entry& y) {
    return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos;
  };
  std::priority_queue<entry, std::vector<entry>, decltype(later)> queue(later);
  for (size_t k = 0; k + 1 < sym.size(); ++k)
    if (const merge* m = find_merge(sym[k].c, sym[k + 1].c))
      queue.push({m->rank, static_cast<int32_t>(k), m->new_id});

  while (!queue.empty()) {
    entry top = queue.top();
    queue.pop();
    symbol& cur = sym[top.pos];
    if (cur.len == 0 || cur.next == -1) continue;
    const int32_t next_pos = cur.next;
    const symbol right = sym[next_pos];
    const merge* m = find_merge(cur.c, right.c);
    if (!m || m->new_id != top.new_id) continue;  // stale entry

    cur.c = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    sym[next_pos].len = 0;
    if (right.next > -1 && right.next < static_cast<int32_t>(sym.size()))
      sym[right.next].prev = top.pos;

    if (cur.prev >= 0)
      if (const merge* pm = find_merge(sym[cur.prev].c, cur.c))
        queue.push({pm->rank, cur.prev, pm->new_id});
    if (cur.next > -1 && cur.next < static_cast<int32_t>(sym.size()))
      if (const merge* nm = find_merge(cur.c, sym[cur.next].c))
        queue.push({nm->rank, top.pos, nm->new_id});
  }
  for (const auto& s : sym)
    if (s.len != 0) out.push_back(s.c);
}

void bpe_model::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    int32_t id = token_to_id(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (word.size() > kMaxCachedWord) {
    merge_word(word, out);
    return;
  }
  // Lookups with a reused per-thread key: no allocation on a hit.
  thread_local std::string key;
  key.assign(word.data(), word.size());
  size_t h = std::hash<std::string_view>{}(word);
  shard& sh = cache_[(h >> 7) % kShards];
  {
    std::lock_guard<std::mutex> lock(sh.mu);
    auto it = sh.map.find(key);
    if (it != sh.map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t before = out.size();
  merge_word(word, out);
  std::vector<int32_t> ids(out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
  std::lock_guard<std::mutex> lock(sh.mu);
  if (sh.map.size() >= kCacheBound / kShards) sh.map.clear();
  sh.map.emplace(key, std::move(ids));
}

void bpe_model::clear_cache() const {
  for (auto& sh : cache_) {
    std::lock_guard<std::mutex> lock(sh.mu);
    sh.map.clear();
  }
}

size_t bpe_model::cache_entries() const {
  size_t n = 0;
  for (auto& sh : cache_) {
    std::lock_guard<std::mutex> lock(sh.mu);
    n += sh.map.size();
  }
  return n;
}

}  // namespace asyncrl
