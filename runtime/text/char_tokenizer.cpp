#include "runtime/text/char_tokenizer.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace asyncrl {

namespace {

// Names of ids 0..kNumSpecial-1. The ids are fixed by the class (pad_id() etc.), so a file that
// lists other specials describes a different tokenizer and is rejected rather than remapped.
const char* const kSpecials[char_tokenizer::kNumSpecial] = {"<pad>", "<bos>", "<eos>", "<unk>"};

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error(path + ": invalid tokenizer file: " + what);
}

std::string describe_byte(unsigned char c) {
  if (c >= 32 && c < 127) return std::string("'") + static_cast<char>(c) + "'";
  std::ostringstream os;
  os << "byte " << static_cast<int>(c);
  return os.str();
}

}  // namespace

char_tokenizer char_tokenizer::builtin() {
  char_tokenizer t;
  t.chars_.push_back('\n');
  for (int c = 32; c <= 126; ++c)
    t.chars_.push_back(static_cast<char>(c));
  t.build_lookup();
  return t;
}

void char_tokenizer::build_lookup() {
  for (auto& id : lookup_)
    id = unk_id();
  for (size_t i = 0; i < chars_.size(); ++i)
    lookup_[static_cast<unsigned char>(chars_[i])] = static_cast<int32_t>(i) + kNumSpecial;
}

char_tokenizer char_tokenizer::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open tokenizer file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object()) fail(path, "expected a JSON object");

  auto type = j.find("type");
  if (type == j.end() || !type->is_string()) fail(path, "missing string field 'type'");
  if (*type != "char")
    fail(path, "field 'type' is '" + type->get<std::string>() + "', expected 'char'");

  auto specials = j.find("specials");
  bool specials_ok = specials != j.end() && specials->is_array() && specials->size() == kNumSpecial;
  for (size_t i = 0; specials_ok && i < kNumSpecial; ++i)
    specials_ok = (*specials)[i] == kSpecials[i];
  if (!specials_ok)
    fail(path, "field 'specials' must be [\"<pad>\", \"<bos>\", \"<eos>\", \"<unk>\"]");

  auto chars = j.find("chars");
  if (chars == j.end() || !chars->is_string()) fail(path, "missing string field 'chars'");
  char_tokenizer t;
  t.chars_ = chars->get<std::string>();
  if (t.chars_.empty()) fail(path, "field 'chars' is empty");
  bool seen[256] = {};
  for (char ch : t.chars_) {
    auto c = static_cast<unsigned char>(ch);
    // Multi-byte UTF-8 would be split into bytes that no longer round-trip through JSON.
    if (c >= 128) fail(path, "field 'chars' has a non-ASCII " + describe_byte(c));
    if (seen[c]) fail(path, "field 'chars' has duplicate " + describe_byte(c));
    seen[c] = true;
  }
  t.build_lookup();
  return t;
}

void char_tokenizer::save(const std::string& path) const {
  nlohmann::json j;
  j["type"] = "char";
  j["specials"] = nlohmann::json::array();
  for (const char* s : kSpecials)
    j["specials"].push_back(s);
  j["chars"] = chars_;
  // Written beside the model; a crash mid-write must not leave a truncated tokenizer.json.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(tmp + ": cannot open for writing");
    out << j.dump(2) << '\n';
    out.flush();
    if (!out) throw std::runtime_error(tmp + ": write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw std::runtime_error(path + ": cannot rename from " + tmp + ": " + ec.message());
  }
}

void char_tokenizer::save_dir(const std::string& dir) const {
  save((std::filesystem::path(dir) / "char_tokenizer.json").string());
}

std::vector<int32_t> char_tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (char c : text)
    ids.push_back(lookup_[static_cast<unsigned char>(c)]);
  return ids;
}

std::string char_tokenizer::token_bytes(int32_t id, bool skip_special) const {
  return decode({id}, skip_special);
}

int32_t char_tokenizer::special_id(std::string_view content) const {
  for (int32_t i = 0; i < kNumSpecial; ++i)
    if (content == kSpecials[i]) return i;
  return -1;
}

std::string char_tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string text;
  text.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) {
      text += kSpecials[unk_id()];
    } else if (id < kNumSpecial) {
      if (!skip_special) text += kSpecials[id];
    } else {
      text.push_back(chars_[static_cast<size_t>(id - kNumSpecial)]);
    }
  }
  return text;
}

}  // namespace asyncrl
