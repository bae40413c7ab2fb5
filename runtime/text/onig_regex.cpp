#include "runtime/text/onig_regex.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>

#include "runtime/text/unicode_gap.hpp"
#include "runtime/text/utf8.hpp"

namespace asyncrl {

namespace {

// The class items of a general category as the reference's regex engine (Unicode 16.0) has it:
// PCRE2's \p{gc} plus the newer code points PCRE2 10.42 (Unicode 14.0) does not know.
std::string category(const std::string& gc) {
  return "\\p{" + gc + "}" + unicode_gap::category_items(gc);
}

// Oniguruma's \s for Unicode text: U+0009..U+000D, U+0085 and the Z categories. PCRE2's \s
// (with UCP) also has U+180E, which Unicode no longer counts as a space; spelling the set out
// keeps the two engines equal.
const std::string& space_set() {
  static const std::string s = "\\t\\n\\x0B\\f\\r\\x{85}" + category("Z");
  return s;
}
// Oniguruma's \w (PCRE2's differs): Alphabetic (letters, Nl, and the circled/squared Latin
// letters that are Other_Alphabetic symbols), marks, decimal digits, connector punctuation,
// and, from its Latin-1 table, the superscripts 2 3 1 and the fractions 1/4 1/2 3/4.
// (Checked code point by code point against tokenizers 0.23.2.)
const std::string& word_set() {
  static const std::string s =
      "\\p{L}\\p{M}\\p{Nd}\\p{Nl}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}\\x{24B6}-\\x{24E9}"
      "\\x{1F130}-\\x{1F149}\\x{1F150}-\\x{1F169}\\x{1F170}-\\x{1F189}" +
      unicode_gap::word_items();
  return s;
}

bool is_ascii_letter(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_ascii_digit(unsigned char c) {
  return c >= '0' && c <= '9';
}
bool is_hex(unsigned char c) {
  return is_ascii_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}
char upper(char c) {
  return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
}

// An ASCII letter under (?i) as Oniguruma matches it (Unicode simple case folding): both
// cases, and for 's' and 'k' also U+017F (long s) and U+212A (Kelvin sign), the only other
// characters that fold to an ASCII letter (checked over every code point with tokenizers
// 0.23.2).
std::string fold_items(char c) {
  std::string out{lower(c), upper(c)};
  if (lower(c) == 's') out += "\\x{17F}";
  if (lower(c) == 'k') out += "\\x{212A}";
  return out;
}

// Letter pairs that a single character also folds to (the ligatures U+FB00..U+FB06 and the
// sharp s): Oniguruma's matching of those inside a longer literal has rules of its own, so
// such literals are refused under (?i).
bool multi_fold_pair(char a, char b) {
  const char x = lower(a), y = lower(b);
  return (x == 's' && (y == 's' || y == 't')) || (x == 'f' && (y == 'f' || y == 'i' || y == 'l'));
}

// One pass over an Oniguruma pattern, writing the PCRE2 equivalent. Case-insensitive groups
// are expanded here ("(?i:'s)" -> "(?:'[sS\x{17F}])") rather than left to PCRE2, whose
// caseless matching follows other rules; so only ASCII letters are allowed under (?i).
class translator {
 public:
  explicit translator(const std::string& p) : p_(p) {}

  std::string run() {
    while (i_ < p_.size()) {
      if (in_class_)
        class_char();
      else
        outer_char();
    }
    if (in_class_) fail("unterminated character class");
    if (!groups_.empty()) fail("unbalanced parentheses");
    return out_;
  }

 private:
  const std::string& p_;
  size_t i_ = 0;
  std::string out_;
  bool ci_ = false;           // inside a case-insensitive scope
  std::vector<bool> groups_;  // ci_ to restore at each ')'
  bool in_class_ = false;
  bool class_start_ = false;  // just after '[' or '[^' (a ']' there is literal)

  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("regex '" + p_ + "' at offset " + std::to_string(i_) + ": " + what);
  }

  unsigned char at(size_t k) const { return k < p_.size() ? static_cast<unsigned char>(p_[k]) : 0; }

  // Copies one whole (possibly multi-byte) character.
  void copy_char() {
    size_t len = utf8::seq_len(at(i_));
    out_.append(p_, i_, len);
    i_ += len;
  }

  // \p{...}, \P{...}, \p{^...}, \pL. A general category gets the code points newer than
  // PCRE2's tables (unicode_gap); other properties (scripts) are passed on as they are.
  void property() {
    size_t start = i_;
    bool negated = at(i_ + 1) == 'P';
    i_ += 2;
    std::string name;
    if (at(i_) == '{') {
      size_t close = p_.find('}', i_);
      if (close == std::string::npos) fail("unterminated \\p{");
      name = p_.substr(i_ + 1, close - i_ - 1);
      i_ = close + 1;
    } else {
      name = p_.substr(i_, 1);
      ++i_;
    }
    if (!name.empty() && name[0] == '^') {
      negated = !negated;
      name.erase(0, 1);
    }
    if (ci_ && (name == "Lu" || name == "Ll" || name == "Lt"))
      fail("a cased property under (?i) is not supported");
    std::string extra = unicode_gap::category_items(name);
    if (extra.empty()) {
      out_.append(p_, start, i_ - start);
      return;
    }
    std::string items = "\\p{" + name + "}" + extra;
    if (!in_class_)
      out_ += (negated ? "[^" : "[") + items + "]";
    else if (!negated)
      out_ += items;
    else
      fail("a negated general category inside a character class is not supported");
  }

  // \uHHHH -> \x{HHHH}; \xHH and \x{...} copied.
  void hex_escape() {
    if (at(i_ + 1) == 'u') {
      for (size_t k = 2; k < 6; ++k)
        if (!is_hex(at(i_ + k))) fail("\\u needs four hex digits");
      out_ += "\\x{" + p_.substr(i_ + 2, 4) + "}";
      i_ += 6;
      return;
    }
    size_t start = i_;
    i_ += 2;
    if (at(i_) == '{') {
      size_t close = p_.find('}', i_);
      if (close == std::string::npos) fail("unterminated \\x{");
      i_ = close + 1;
    } else {
      while (i_ < start + 4 && is_hex(at(i_)))
        ++i_;
    }
    out_.append(p_, start, i_ - start);
  }

  // Escapes that read the same in both engines, inside or outside a class.
  bool common_escape(unsigned char e) {
    switch (e) {
      case 'p':
      case 'P':
        property();
        return true;
      case 'u':
      case 'x':
        hex_escape();
        return true;
      case 'v':  // Oniguruma: the vertical tab character; PCRE2: any vertical space
        out_ += "\\x0B";
        i_ += 2;
        return true;
      case 't':
      case 'n':
      case 'r':
      case 'f':
      case 'e':
      case 'a':
        out_.append(p_, i_, 2);
        i_ += 2;
        return true;
      case 'd':  // both: Unicode decimal digits
        out_ += in_class_ ? category("Nd") : "[" + category("Nd") + "]";
        i_ += 2;
        return true;
      case 'D':
        if (in_class_) fail("\\D inside a character class is not supported");
        out_ += "[^" + category("Nd") + "]";
        i_ += 2;
        return true;
      default:
        break;
    }
    if (e == 0) fail("pattern ends with a backslash");
    if (e >= 0x80 || !(is_ascii_letter(e) || is_ascii_digit(e))) {
      // An escaped punctuation or other character stands for itself.
      out_ += '\\';
      ++i_;
      copy_char();
      return true;
    }
    return false;
  }

  void outer_escape() {
    unsigned char e = at(i_ + 1);
    if (common_escape(e)) return;
    switch (e) {
      case 's':
        out_ += "[" + space_set() + "]";
        break;
      case 'S':
        out_ += "[^" + space_set() + "]";
        break;
      case 'w':
        out_ += "[" + word_set() + "]";
        break;
      case 'W':
        out_ += "[^" + word_set() + "]";
        break;
      case 'h':  // Oniguruma: a hexadecimal digit (PCRE2: horizontal space)
        out_ += "[0-9a-fA-F]";
        break;
      case 'H':
        out_ += "[^0-9a-fA-F]";
        break;
      case 'A':
      case 'z':
      case 'Z':
      case 'G':
        out_.append(p_, i_, 2);
        break;
      default:
        fail(std::string("escape \\") + static_cast<char>(e) + " is not supported");
    }
    i_ += 2;
  }

  void class_escape() {
    unsigned char e = at(i_ + 1);
    if (common_escape(e)) return;
    switch (e) {
      case 's':
        out_ += space_set();
        break;
      case 'w':
        out_ += word_set();
        break;
      case 'h':
        out_ += "0-9a-fA-F";
        break;
      default:
        fail(std::string("escape \\") + static_cast<char>(e) +
             " inside a character class is not supported");
    }
    i_ += 2;
  }

  // "(?" constructs: groups, lookarounds, and the i flag.
  void group_open() {
    if (at(i_ + 1) != '?') {
      if (at(i_ + 1) == '*') fail("(* verbs are not supported");
      groups_.push_back(ci_);
      out_ += '(';
      ++i_;
      return;
    }
    unsigned char k = at(i_ + 2);
    if (k == ':' || k == '=' || k == '!' || k == '>') {
      groups_.push_back(ci_);
      out_.append(p_, i_, 3);
      i_ += 3;
      return;
    }
    if (k == '<' && (at(i_ + 3) == '=' || at(i_ + 3) == '!')) {
      groups_.push_back(ci_);
      out_.append(p_, i_, 4);
      i_ += 4;
      return;
    }
    if (k == '#') {  // comment
      size_t close = p_.find(')', i_);
      if (close == std::string::npos) fail("unterminated comment");
      i_ = close + 1;
      return;
    }
    // Flags: (?i) (?-i) (?i:...) (?-i:...); no other flag is supported.
    size_t j = i_ + 2;
    bool on = true, value = ci_;
    for (; j < p_.size() && p_[j] != ':' && p_[j] != ')'; ++j) {
      if (p_[j] == '-') {
        on = false;
      } else if (p_[j] == 'i') {
        value = on;
      } else {
        i_ = j;
        fail(std::string("group flag '") + p_[j] + "' is not supported");
      }
    }
    if (j >= p_.size()) fail("unterminated group");
    if (p_[j] == ')') {  // applies to the rest of the enclosing group
      ci_ = value;
    } else {
      groups_.push_back(ci_);
      ci_ = value;
      out_ += "(?:";
    }
    i_ = j + 1;
  }

  // {n,m} quantifiers: Oniguruma reads "{,n}" as {0,n}, and "{n,m}+" as a repeat of {n,m}
  // where PCRE2 would make it possessive.
  void brace() {
    size_t j = i_ + 1;
    bool digits = false, comma = false;
    while (j < p_.size() && (is_ascii_digit(at(j)) || (at(j) == ',' && !comma))) {
      if (at(j) == ',')
        comma = true;
      else
        digits = true;
      ++j;
    }
    if (at(j) != '}' || !digits) {  // not a quantifier: a literal brace in both engines
      out_ += "\\{";
      ++i_;
      return;
    }
    std::string q = p_.substr(i_, j + 1 - i_);
    if (q[1] == ',') q.insert(1, "0");
    out_ += q;
    i_ = j + 1;
    if (at(i_) == '+') fail("'{n,m}+' is not supported (Oniguruma and PCRE2 read it differently)");
  }

  void outer_char() {
    unsigned char c = at(i_);
    switch (c) {
      case '\\':
        outer_escape();
        return;
      case '[':
        in_class_ = true;
        class_start_ = true;
        out_ += '[';
        ++i_;
        if (at(i_) == '^') {
          out_ += '^';
          ++i_;
        }
        return;
      case '(':
        group_open();
        return;
      case ')':
        if (groups_.empty()) fail("unbalanced ')'");
        ci_ = groups_.back();
        groups_.pop_back();
        out_ += ')';
        ++i_;
        return;
      case '.':  // Oniguruma's '.' is any character but '\n'
        out_ += "[^\\n]";
        ++i_;
        return;
      case '^':
      case '$':
        fail("anchors '^' and '$' are not supported (their line semantics differ)");
      case '{':
        brace();
        return;
      default:
        break;
    }
    if (ci_ && is_ascii_letter(c)) {
      if (is_ascii_letter(at(i_ + 1)) &&
          multi_fold_pair(static_cast<char>(c), static_cast<char>(at(i_ + 1))))
        fail(std::string("'") + p_.substr(i_, 2) +
             "' under (?i) is not supported (a ligature or sharp s folds to it)");
      out_ += '[' + fold_items(static_cast<char>(c)) + ']';
      ++i_;
      return;
    }
    if (ci_ && c >= 0x80) fail("a non-ASCII character under (?i) is not supported");
    copy_char();
  }

  void class_char() {
    unsigned char c = at(i_);
    bool first = class_start_;
    class_start_ = false;
    if (c == ']' && !first) {
      in_class_ = false;
      out_ += ']';
      ++i_;
      return;
    }
    if (c == ']') {  // a literal ']' first in the class
      out_ += "\\]";
      ++i_;
      return;
    }
    if (c == '[') fail("nested or POSIX character classes are not supported");
    if (c == '&' && at(i_ + 1) == '&') fail("class intersection '&&' is not supported");
    if (c == '\\') {
      class_escape();
      return;
    }
    if (ci_) {
      if (c == '-' && !first && at(i_ + 1) != ']') fail("a range under (?i) is not supported");
      if (c >= 0x80) fail("a non-ASCII character under (?i) is not supported");
      if (is_ascii_letter(c)) {
        out_ += fold_items(static_cast<char>(c));
        ++i_;
        return;
      }
    }
    copy_char();
  }
};

// One match data per thread, shared by every pattern: only the whole match's bounds are read,
// and a match data of one pair is enough for that (PCRE2 then returns 0 instead of the count).
pcre2_match_data* thread_match_data() {
  struct holder {
    pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
    ~holder() { pcre2_match_data_free(md); }
  };
  thread_local holder h;
  return h.md;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

std::string onig_regex::translate(const std::string& onig) {
  return translator(onig).run();
}

onig_regex::onig_regex(const std::string& pattern) : pattern_(pattern) {
  if (!utf8::valid(pattern)) throw std::invalid_argument("regex is not valid UTF-8");
  std::string pcre = translate(pattern);
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  code_ =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre.data()), pcre.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C, &err, &err_offset, nullptr);
  if (!code_)
    throw std::invalid_argument("regex '" + pattern + "' (as PCRE2 '" + pcre + "'): " +
                                pcre2_message(err) + " at offset " + std::to_string(err_offset));
  // JIT is only a speed-up; without it (unsupported platform) the interpreter gives the same
  // matches.
  pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
}

onig_regex::~onig_regex() {
  pcre2_code_free(code_);
}

std::vector<std::pair<size_t, size_t>> onig_regex::find_all(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> found;
  pcre2_match_data* md = thread_match_data();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t n = text.size();
  // rust-onig's FindMatches: search from last_end; after an empty match step one character;
  // an empty match is dropped when it comes right after a non-empty one (skip_next_empty).
  size_t last_end = 0;
  bool skip_next_empty = false;
  while (last_end <= n) {
    int rc = pcre2_match(code_, subject, n, last_end, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)  // a long backtrack: the interpreter has more room
      rc = pcre2_match(code_, subject, n, last_end, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0)
      throw std::runtime_error("regex '" + pattern_ + "': matching failed: " + pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t s = ov[0], e = ov[1];
    last_end = e;
    if (e == s) {
      last_end += e < n ? utf8::seq_len(static_cast<unsigned char>(text[e])) : 1;
      if (skip_next_empty) {
        skip_next_empty = false;
        continue;
      }
    } else {
      skip_next_empty = true;
    }
    found.emplace_back(s, e);
  }
  return found;
}

}  // namespace asyncrl
