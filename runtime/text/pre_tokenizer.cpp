#include "runtime/text/pre_tokenizer.hpp"

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "runtime/text/byte_level.hpp"
#include "runtime/text/onig_regex.hpp"
#include "runtime/text/utf8.hpp"

namespace asyncrl {

namespace {

// A stretch of a piece and whether the pattern matched it.
struct span {
  size_t begin, end;
  bool match;
};

// Hugging Face's Pattern::find_matches: matches and the gaps between them, in order, covering
// the whole text.
std::vector<span> with_gaps(const std::vector<std::pair<size_t, size_t>>& matches, size_t n) {
  std::vector<span> out;
  if (n == 0) return {{0, 0, false}};
  size_t prev = 0;
  for (auto [s, e] : matches) {
    if (prev != s) out.push_back({prev, s, false});
    out.push_back({s, e, true});
    prev = e;
  }
  if (prev != n) out.push_back({prev, n, false});
  return out;
}

// Non-overlapping leftmost occurrences of a literal (what the escaped-literal regex finds).
std::vector<std::pair<size_t, size_t>> find_literal(std::string_view text, const std::string& lit) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t pos = text.find(lit); pos != std::string_view::npos;
       pos = text.find(lit, pos + lit.size()))
    out.emplace_back(pos, pos + lit.size());
  return out;
}

enum class behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

// NormalizedString::split: which stretches become pieces (the bool of each is "remove").
std::vector<span> combine(std::vector<span> m, behavior b) {
  std::vector<span> acc;
  bool previous_match = false;
  switch (b) {
    case behavior::isolated:
      for (auto& s : m)
        s.match = false;
      return m;
    case behavior::removed:
      return m;
    case behavior::contiguous:
      for (const auto& s : m) {
        if (s.match == previous_match && !acc.empty())
          acc.back().end = s.end;
        else
          acc.push_back({s.begin, s.end, false});
        previous_match = s.match;
      }
      return acc;
    case behavior::merged_with_previous:
      for (const auto& s : m) {
        if (s.match && !previous_match && !acc.empty())
          acc.back().end = s.end;
        else
          acc.push_back({s.begin, s.end, false});
        previous_match = s.match;
      }
      return acc;
    case behavior::merged_with_next:
      for (auto it = m.rbegin(); it != m.rend(); ++it) {
        if (it->match && !previous_match && !acc.empty())
          acc.back().begin = it->begin;
        else
          acc.push_back({it->begin, it->end, false});
        previous_match = it->match;
      }
      std::reverse(acc.begin(), acc.end());
      return acc;
  }
  return acc;
}

// Applies `split_one` to every piece, keeping the non-empty results in order. split_one returns
// where its first kept split begins in the piece, so that `first_at_origin` can follow pieces[0].
template <class F>
void split_each(std::vector<std::string>& pieces, bool& first_at_origin, F&& split_one) {
  std::vector<std::string> out;
  out.reserve(pieces.size() * 2);
  for (size_t i = 0; i < pieces.size(); ++i) {
    size_t first_begin = split_one(pieces[i], out);
    if (i == 0) first_at_origin = first_at_origin && first_begin == 0;
  }
  pieces.swap(out);
}

// Appends the kept spans; returns the begin of the first one (npos when none).
size_t emit(const std::string& piece, const std::vector<span>& spans,
            std::vector<std::string>& out) {
  size_t first = std::string::npos;
  for (const auto& s : spans)
    if (!s.match && s.end > s.begin) {
      if (first == std::string::npos) first = s.begin;
      out.emplace_back(piece, s.begin, s.end - s.begin);
    }
  return first;
}

class split final : public pre_tokenizer {
 public:
  split(std::unique_ptr<onig_regex> re, std::string literal, behavior b, bool invert)
      : re_(std::move(re)), literal_(std::move(literal)), behavior_(b), invert_(invert) {}

  void apply(std::vector<std::string>& pieces, bool& first_at_origin) const override {
    split_each(pieces, first_at_origin, [&](const std::string& p, std::vector<std::string>& out) {
      auto spans = with_gaps(re_ ? re_->find_all(p) : find_literal(p, literal_), p.size());
      if (invert_)
        for (auto& s : spans)
          s.match = !s.match;
      return emit(p, combine(std::move(spans), behavior_), out);
    });
  }

 private:
  std::unique_ptr<onig_regex> re_;  // null for a String pattern
  std::string literal_;
  behavior behavior_;
  bool invert_;
};

// GPT-2's pattern, which ByteLevel uses when use_regex is set.
const char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class byte_level_pt final : public pre_tokenizer {
 public:
  byte_level_pt(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space),
        re_(use_regex ? std::make_unique<onig_regex>(kGpt2Pattern) : nullptr) {}

  // The prefix space and the regex's first match both keep pieces[0] at the origin.
  void apply(std::vector<std::string>& pieces, bool& /*first_at_origin*/) const override {
    std::vector<std::string> out;
    out.reserve(pieces.size() * 2);
    std::string prefixed;
    for (auto& p : pieces) {
      const std::string* text = &p;
      if (add_prefix_space_ && (p.empty() || p[0] != ' ')) {
        prefixed = " " + p;
        text = &prefixed;
      }
      if (!re_) {
        out.emplace_back();
        byte_level::encode(*text, out.back());
        continue;
      }
      auto spans = with_gaps(re_->find_all(*text), text->size());
      for (const auto& s : spans) {
        if (s.end == s.begin) continue;
        out.emplace_back();
        byte_level::encode(std::string_view(*text).substr(s.begin, s.end - s.begin), out.back());
      }
    }
    pieces.swap(out);
  }
  bool maps_bytes() const override { return true; }

 private:
  bool add_prefix_space_;
  std::unique_ptr<onig_regex> re_;
};

// Metaspace: spaces become the replacement character, which is prepended to a piece not
// already starting with it (always, or only to the piece at the start of the text for "first"),
// then with `split` each piece is cut before every replacement (MergedWithNext).
class metaspace final : public pre_tokenizer {
 public:
  enum class scheme { always, first, never };
  metaspace(std::string replacement, scheme prepend, bool split)
      : rep_(std::move(replacement)), prepend_(prepend), split_(split) {}

  void apply(std::vector<std::string>& pieces, bool& first_at_origin) const override {
    std::vector<std::string> out;
    out.reserve(pieces.size() * 2);
    for (size_t i = 0; i < pieces.size(); ++i) {
      std::string p = space_to_rep(pieces[i]);
      bool starts = p.compare(0, rep_.size(), rep_) == 0;
      if (!starts &&
          (prepend_ == scheme::always || (prepend_ == scheme::first && i == 0 && first_at_origin)))
        p.insert(0, rep_);
      if (!split_) {
        out.push_back(std::move(p));
        continue;
      }
      // MergedWithNext: each occurrence starts a piece; text before the first is its own.
      size_t begin = 0;
      for (size_t pos = p.find(rep_); pos != std::string::npos;
           pos = p.find(rep_, pos + rep_.size())) {
        if (pos > begin) out.emplace_back(p, begin, pos - begin);
        begin = pos;
      }
      if (begin < p.size()) out.emplace_back(p, begin, std::string::npos);
    }
    pieces.swap(out);
  }

 private:
  std::string rep_;  // one character, UTF-8
  scheme prepend_;
  bool split_;

  std::string space_to_rep(const std::string& s) const {
    if (s.find(' ') == std::string::npos) return s;
    std::string out;
    out.reserve(s.size() + 8);
    for (char c : s) {
      if (c == ' ')
        out += rep_;
      else
        out.push_back(c);
    }
    return out;
  }
};

std::unique_ptr<const pre_tokenizer> make_metaspace(const nlohmann::json& j, const hf_where& here) {
  std::string rep = here.get_string(j, "replacement", "");
  size_t k = 0;
  if (rep.empty() || !utf8::valid(rep) || (utf8::next(rep, k), k != rep.size()))
    here.fail("'replacement' must be one character");
  std::string scheme = here.get_string(j, "prepend_scheme", "always");
  metaspace::scheme s;
  if (scheme == "always")
    s = metaspace::scheme::always;
  else if (scheme == "first")
    s = metaspace::scheme::first;
  else if (scheme == "never")
    s = metaspace::scheme::never;
  else
    here.fail("prepend_scheme '" + scheme + "' is not supported (always, first, never)");
  // Older files say add_prefix_space instead; false must agree with the scheme (as the
  // reference's deserializer checks).
  auto aps = j.find("add_prefix_space");
  if (aps != j.end() && aps->is_boolean() && !aps->get<bool>()) {
    if (s != metaspace::scheme::never && j.contains("prepend_scheme"))
      here.fail("add_prefix_space does not match declared prepend_scheme");
    s = metaspace::scheme::never;
  }
  return std::make_unique<metaspace>(rep, s, here.get_bool(j, "split", true));
}

class sequence final : public pre_tokenizer {
 public:
  explicit sequence(std::vector<std::unique_ptr<const pre_tokenizer>> parts)
      : parts_(std::move(parts)) {}
  void apply(std::vector<std::string>& pieces, bool& first_at_origin) const override {
    for (const auto& p : parts_)
      p->apply(pieces, first_at_origin);
  }
  bool maps_bytes() const override {
    return std::any_of(parts_.begin(), parts_.end(), [](const auto& p) { return p->maps_bytes(); });
  }

 private:
  std::vector<std::unique_ptr<const pre_tokenizer>> parts_;
};

behavior parse_behavior(const nlohmann::json& j, const hf_where& here) {
  auto it = j.find("behavior");
  if (it == j.end() || !it->is_string()) here.fail("missing string field 'behavior'");
  const std::string b = it->get<std::string>();
  if (b == "Removed") return behavior::removed;
  if (b == "Isolated") return behavior::isolated;
  if (b == "MergedWithPrevious") return behavior::merged_with_previous;
  if (b == "MergedWithNext") return behavior::merged_with_next;
  if (b == "Contiguous") return behavior::contiguous;
  here.fail("behavior '" + b + "' is not supported");
}

std::unique_ptr<const pre_tokenizer> make_split(const nlohmann::json& j, const hf_where& here) {
  behavior b = parse_behavior(j, here);
  auto inv = j.find("invert");
  if (inv == j.end() || !inv->is_boolean()) here.fail("missing boolean field 'invert'");
  auto pat = j.find("pattern");
  if (pat == j.end() || !pat->is_object() || pat->size() != 1)
    here.fail("'pattern' must be {\"Regex\": ...} or {\"String\": ...}");
  auto regex = pat->find("Regex");
  auto str = pat->find("String");
  if (regex != pat->end() && regex->is_string()) {
    try {
      return std::make_unique<split>(std::make_unique<onig_regex>(regex->get<std::string>()), "", b,
                                     inv->get<bool>());
    } catch (const std::invalid_argument& e) {
      here.fail(std::string("pattern: ") + e.what());
    }
  }
  if (str != pat->end() && str->is_string()) {
    // Hugging Face gives an empty String pattern odd offsets (a character count as a byte
    // offset); refuse it rather than copy that.
    if (str->get<std::string>().empty()) here.fail("an empty String pattern is not supported");
    return std::make_unique<split>(nullptr, str->get<std::string>(), b, inv->get<bool>());
  }
  here.fail("'pattern' must be {\"Regex\": string} or {\"String\": string}");
}

}  // namespace

std::unique_ptr<const pre_tokenizer> pre_tokenizer::from_json(const nlohmann::json& j,
                                                              const hf_where& where) {
  if (j.is_null()) return nullptr;
  std::string type = where.type_of(j);
  hf_where here = where.typed(type);
  if (type == "Split") return make_split(j, here);
  if (type == "Metaspace") return make_metaspace(j, here);
  if (type == "ByteLevel") {
    // trim_offsets only moves offsets, which encode does not return.
    return std::make_unique<byte_level_pt>(here.get_bool(j, "add_prefix_space", true),
                                           here.get_bool(j, "use_regex", true));
  }
  if (type == "Sequence") {
    auto it = j.find("pretokenizers");
    if (it == j.end() || !it->is_array()) here.fail("missing array 'pretokenizers'");
    std::vector<std::unique_ptr<const pre_tokenizer>> parts;
    for (size_t i = 0; i < it->size(); ++i) {
      auto part = from_json((*it)[i], where.field("pretokenizers").item(i));
      if (part) parts.push_back(std::move(part));
    }
    return std::make_unique<sequence>(std::move(parts));
  }
  here.fail("pre-tokenizer type '" + type +
            "' is not supported (supported: Split, ByteLevel, Metaspace, Sequence)");
}

}  // namespace asyncrl
