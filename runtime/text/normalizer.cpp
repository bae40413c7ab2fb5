#include "runtime/text/normalizer.hpp"

#include <utf8proc.h>

#include <cstdlib>
#include <vector>

#include "runtime/text/replace_pattern.hpp"
#include "runtime/text/unicode_gap.hpp"
#include "runtime/text/utf8.hpp"

namespace asyncrl {

namespace {

bool all_ascii(const std::string& s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

// NFC/NFD/NFKC/NFKD through utf8proc_map (with an explicit length: the text may hold NULs).
// Hugging Face's normalizer has older Unicode tables: the characters it does not know
// (unicode_gap) it leaves alone, as inert starters that nothing reorders or composes across, so
// the text is normalized in the stretches between them; and a composition utf8proc makes into
// such a character is undone.
class unicode_form final : public normalizer {
 public:
  unicode_form(utf8proc_option_t options) : options_(options) {}
  void apply(std::string& s) const override {
    if (all_ascii(s)) return;  // every normal form leaves ASCII alone
    std::string out;
    out.reserve(s.size());
    size_t segment = 0;
    for (size_t i = 0; i < s.size();) {
      size_t start = i;
      char32_t cp = utf8::next(s, i);
      if (cp >= 0x80 && unicode_gap::normalization_unknown(cp)) {
        normalize(std::string_view(s).substr(segment, start - segment), out);
        out.append(s, start, i - start);
        segment = i;
      }
    }
    normalize(std::string_view(s).substr(segment), out);
    s.swap(out);
  }

 private:
  utf8proc_option_t options_;

  void normalize(std::string_view text, std::string& out) const {
    if (text.empty()) return;
    utf8proc_uint8_t* dst = nullptr;
    utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                      static_cast<utf8proc_ssize_t>(text.size()), &dst, options_);
    if (n < 0)
      throw std::runtime_error(std::string("unicode normalization failed: ") + utf8proc_errmsg(n));
    std::string_view done(reinterpret_cast<const char*>(dst), static_cast<size_t>(n));
    if (!(options_ & UTF8PROC_COMPOSE)) {
      out.append(done);
    } else {
      for (size_t i = 0; i < done.size();) {
        size_t start = i;
        char32_t cp = utf8::next(done, i);
        if (cp < 0x80 || !unicode_gap::normalization_unknown(cp)) {
          out.append(done, start, i - start);
          continue;
        }
        utf8proc_int32_t parts[4];
        int last_boundclass = 0;
        utf8proc_ssize_t k = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), parts, 4,
                                                     UTF8PROC_DECOMPOSE, &last_boundclass);
        for (utf8proc_ssize_t j = 0; j < k && k <= 4; ++j)
          utf8::append(out, static_cast<char32_t>(parts[j]));
      }
    }
    std::free(dst);
  }
};

// Hugging Face lowercases char by char with Rust's char::to_lowercase: the full mapping, where
// only U+0130 (capital I with dot) becomes two characters, and no final-sigma context. Its
// Unicode tables are newer than utf8proc's: unicode_gap has the difference.
class lowercase final : public normalizer {
 public:
  void apply(std::string& s) const override {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
      auto b = static_cast<unsigned char>(s[i]);
      if (b < 0x80) {
        out.push_back(b >= 'A' && b <= 'Z' ? static_cast<char>(b - 'A' + 'a')
                                           : static_cast<char>(b));
        ++i;
        continue;
      }
      char32_t cp = utf8::next(s, i);
      if (cp == 0x130) {
        out += "i\xCC\x87";  // U+0069 U+0307
        continue;
      }
      if (const char* newer = unicode_gap::lowercase_of(cp)) {  // case pairs utf8proc lacks
        out += newer;
        continue;
      }
      utf8::append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
    }
    s.swap(out);
  }
};

// Replace: every match of a String or Regex pattern becomes the content (Gemma's " " -> "▁").
class replace final : public normalizer {
 public:
  replace(const nlohmann::json& j, const hf_where& here) : pattern_(j, here) {}
  void apply(std::string& s) const override { s = pattern_.apply(s); }

 private:
  replace_pattern pattern_;
};

// Prepend: the text gets a prefix unless it is empty (Llama 2's "▁" before each stretch of
// text between added tokens).
class prepend final : public normalizer {
 public:
  explicit prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void apply(std::string& s) const override {
    if (!s.empty()) s.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class sequence final : public normalizer {
 public:
  explicit sequence(std::vector<std::unique_ptr<const normalizer>> parts)
      : parts_(std::move(parts)) {}
  void apply(std::string& s) const override {
    for (const auto& p : parts_)
      p->apply(s);
  }

 private:
  std::vector<std::unique_ptr<const normalizer>> parts_;
};

}  // namespace

std::unique_ptr<const normalizer> normalizer::from_json(const nlohmann::json& j,
                                                        const hf_where& where) {
  if (j.is_null()) return nullptr;
  std::string type = where.type_of(j);
  hf_where here = where.typed(type);
  const auto stable = UTF8PROC_STABLE;
  if (type == "NFC")
    return std::make_unique<unicode_form>(utf8proc_option_t(stable | UTF8PROC_COMPOSE));
  if (type == "NFD")
    return std::make_unique<unicode_form>(utf8proc_option_t(stable | UTF8PROC_DECOMPOSE));
  if (type == "NFKC")
    return std::make_unique<unicode_form>(
        utf8proc_option_t(stable | UTF8PROC_COMPOSE | UTF8PROC_COMPAT));
  if (type == "NFKD")
    return std::make_unique<unicode_form>(
        utf8proc_option_t(stable | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT));
  if (type == "Lowercase") return std::make_unique<lowercase>();
  if (type == "Replace") return std::make_unique<replace>(j, here);
  if (type == "Prepend") {
    auto it = j.find("prepend");
    if (it == j.end() || !it->is_string()) here.fail("missing string field 'prepend'");
    return std::make_unique<prepend>(it->get<std::string>());
  }
  if (type == "Sequence") {
    auto it = j.find("normalizers");
    if (it == j.end() || !it->is_array()) here.fail("missing array 'normalizers'");
    std::vector<std::unique_ptr<const normalizer>> parts;
    for (size_t i = 0; i < it->size(); ++i) {
      auto part = from_json((*it)[i], where.field("normalizers").item(i));
      if (part) parts.push_back(std::move(part));
    }
    return std::make_unique<sequence>(std::move(parts));
  }
  here.fail("normalizer type '" + type +
            "' is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend, "
            "Sequence)");
}

}  // namespace asyncrl
