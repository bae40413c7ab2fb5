#include "runtime/text/decoder.hpp"

#include <algorithm>

#include "runtime/text/replace_pattern.hpp"
#include "runtime/text/utf8.hpp"

namespace asyncrl {

namespace {

class replace_dec final : public decoder {
 public:
  replace_dec(const nlohmann::json& j, const hf_where& here) : pattern_(j, here) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens)
      t = pattern_.apply(t);
  }
  void token_bytes(std::string& token) const override { token = pattern_.apply(token); }

 private:
  replace_pattern pattern_;
};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte a "<0xXX>" token stands for, or -1. As the reference: six bytes, "<0x" ... ">", and
// the two in between parsed as Rust's u8::from_str_radix(_, 16) does (which takes a '+').
int byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  if (t[3] == '+') return hex_digit(t[4]);
  int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// ByteFallback: runs of byte tokens become the text they spell when it is valid UTF-8, else one
// U+FFFD per byte.
class byte_fallback final : public decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string run;
    size_t run_len = 0;
    auto flush = [&] {
      if (run_len == 0) return;
      if (utf8::valid(run)) {
        out.push_back(run);
      } else {
        for (size_t k = 0; k < run_len; ++k)
          out.emplace_back("\xEF\xBF\xBD");
      }
      run.clear();
      run_len = 0;
    };
    for (auto& t : tokens) {
      int b = byte_token(t);
      if (b >= 0) {
        run.push_back(static_cast<char>(b));
        ++run_len;
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens.swap(out);
  }
  void token_bytes(std::string& token) const override {
    int b = byte_token(token);
    if (b >= 0) token.assign(1, static_cast<char>(b));
  }
};

class fuse final : public decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens)
      all += t;
    tokens.assign(1, std::move(all));
  }
  void token_bytes(std::string&) const override {}
};

// Strip: removes up to `start` leading and `stop` trailing `content` characters of each token.
class strip final : public decoder {
 public:
  strip(char32_t content, size_t start, size_t stop)
      : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      std::vector<size_t> at;  // byte offset of each character, then the end
      std::vector<char32_t> cps;
      for (size_t i = 0; i < t.size();) {
        at.push_back(i);
        cps.push_back(utf8::next(t, i));
      }
      at.push_back(t.size());
      size_t begin = 0, end = cps.size();
      for (size_t i = 0; i < std::min(start_, cps.size()) && cps[i] == content_; ++i)
        begin = i + 1;
      for (size_t i = 0; i < std::min(stop_, cps.size()) && cps[cps.size() - 1 - i] == content_;
           ++i)
        end = cps.size() - 1 - i;
      end = std::max(begin, end);
      t = t.substr(at[begin], at[end] - at[begin]);
    }
  }
  // Only the text's ends are stripped: a token in the middle keeps its characters.
  void token_bytes(std::string&) const override {}

 private:
  char32_t content_;
  size_t start_, stop_;
};

// Metaspace: the replacement becomes a space, except in the first token (unless the scheme is
// "never"), where every replacement is dropped.
class metaspace_dec final : public decoder {
 public:
  metaspace_dec(std::string rep, bool drop_first) : rep_(std::move(rep)), drop_first_(drop_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = swap(tokens[i], i == 0 && drop_first_ ? "" : " ");
  }
  void token_bytes(std::string& token) const override { token = swap(token, " "); }

 private:
  std::string rep_;
  bool drop_first_;

  std::string swap(const std::string& t, const char* with) const {
    std::string out;
    out.reserve(t.size());
    size_t prev = 0;
    for (size_t pos = t.find(rep_); pos != std::string::npos; pos = t.find(rep_, prev)) {
      out.append(t, prev, pos - prev);
      out += with;
      prev = pos + rep_.size();
    }
    out.append(t, prev, std::string::npos);
    return out;
  }
};

class sequence final : public decoder {
 public:
  explicit sequence(std::vector<std::unique_ptr<const decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_)
      p->decode_chain(tokens);
  }
  void token_bytes(std::string& token) const override {
    for (const auto& p : parts_)
      p->token_bytes(token);
  }

 private:
  std::vector<std::unique_ptr<const decoder>> parts_;
};

// The single character of a string field.
char32_t one_char(const nlohmann::json& j, const char* key, const hf_where& here) {
  std::string s = here.get_string(j, key, "");
  size_t k = 0;
  if (s.empty() || !utf8::valid(s)) here.fail(std::string("'") + key + "' must be one character");
  char32_t c = utf8::next(s, k);
  if (k != s.size()) here.fail(std::string("'") + key + "' must be one character");
  return c;
}

size_t count_field(const nlohmann::json& j, const char* key, const hf_where& here) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned())
    here.fail(std::string("missing non-negative integer field '") + key + "'");
  return it->get<size_t>();
}

}  // namespace

std::unique_ptr<const decoder> decoder::from_json(const nlohmann::json& j, const hf_where& where) {
  std::string type = where.type_of(j);
  hf_where here = where.typed(type);
  if (type == "Replace") return std::make_unique<replace_dec>(j, here);
  if (type == "ByteFallback") return std::make_unique<byte_fallback>();
  if (type == "Fuse") return std::make_unique<fuse>();
  if (type == "Strip")
    return std::make_unique<strip>(one_char(j, "content", here), count_field(j, "start", here),
                                   count_field(j, "stop", here));
  if (type == "Metaspace") {
    one_char(j, "replacement", here);
    std::string rep = here.get_string(j, "replacement", "");
    std::string scheme = here.get_string(j, "prepend_scheme", "always");
    if (scheme != "always" && scheme != "first" && scheme != "never")
      here.fail("prepend_scheme '" + scheme + "' is not supported (always, first, never)");
    auto aps = j.find("add_prefix_space");
    if (aps != j.end() && aps->is_boolean() && !aps->get<bool>()) {
      if (scheme != "never" && j.contains("prepend_scheme"))
        here.fail("add_prefix_space does not match declared prepend_scheme");
      scheme = "never";
    }
    return std::make_unique<metaspace_dec>(rep, scheme != "never");
  }
  if (type == "Sequence") {
    auto it = j.find("decoders");
    if (it == j.end() || !it->is_array()) here.fail("missing array 'decoders'");
    std::vector<std::unique_ptr<const decoder>> parts;
    for (size_t i = 0; i < it->size(); ++i) {
      hf_where wi = where.field("decoders").item(i);
      if ((*it)[i].is_null()) wi.fail("expected an object");
      parts.push_back(from_json((*it)[i], wi));
    }
    return std::make_unique<sequence>(std::move(parts));
  }
  if (type == "ByteLevel")
    here.fail("ByteLevel is supported only as the whole decoder, not inside a Sequence");
  here.fail("decoder type '" + type +
            "' is not supported (supported: ByteLevel, Replace, ByteFallback, Fuse, Strip, "
            "Metaspace, Sequence)");
}

}  // namespace asyncrl
