#include "runtime/text/hf_tokenizer.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "runtime/common/atomic_file.hpp"
#include "runtime/text/added_vocabulary.hpp"
#include "runtime/text/byte_level.hpp"
#include "runtime/text/decoder.hpp"
#include "runtime/text/hf_config.hpp"
#include "runtime/text/hf_json.hpp"
#include "runtime/text/normalizer.hpp"
#include "runtime/text/pre_tokenizer.hpp"
#include "runtime/text/token_model.hpp"
#include "runtime/text/utf8.hpp"

namespace asyncrl {

namespace fs = std::filesystem;

struct hf_tokenizer::impl {
  // As read, for save_dir.
  std::string tokenizer_json, config_json, chat_template_jinja;
  bool has_config = false, has_jinja = false;

  std::unique_ptr<const normalizer> norm;
  std::unique_ptr<const pre_tokenizer> pre;
  std::unique_ptr<const token_model> model;
  // Decoding: byte_level (per-id byte tables) or the token strings through `dec` (joined with
  // spaces when the file has no decoder).
  bool byte_level = false;
  std::unique_ptr<const decoder> dec;
  added_vocabulary added;
  hf_config config;

  // By id: whether the id decodes to anything, the bytes it decodes to (token_bytes), its token
  // string (what the decoder chain gets) and whether it is special (decode's skip test compares
  // the token's text with the special contents).
  std::vector<bool> known;
  std::vector<std::string> bytes;
  std::vector<std::string> text;
  std::vector<bool> special;
  int32_t bos = -1, eos = -1, pad = -1;

  int32_t token_to_id(std::string_view t) const {
    int32_t id = added.id_of(t);
    return id >= 0 ? id : model->token_to_id(t);
  }
};

namespace {

// The post-processor only adds BOS/EOS and moves offsets; encode never adds specials and
// returns no offsets, so it is ignored, but only the known kinds are accepted.
void check_post_processor(const nlohmann::json& j, const hf_where& where) {
  if (j.is_null()) return;
  std::string type = where.type_of(j);
  if (type == "ByteLevel" || type == "TemplateProcessing" || type == "RobertaProcessing" ||
      type == "BertProcessing")
    return;
  if (type == "Sequence") {
    auto it = j.find("processors");
    if (it == j.end() || !it->is_array()) where.typed(type).fail("missing array 'processors'");
    for (size_t i = 0; i < it->size(); ++i)
      check_post_processor((*it)[i], where.field("processors").item(i));
    return;
  }
  where.typed(type).fail("post-processor type '" + type + "' is not supported");
}

// The ByteLevel decoder (tokens -> bytes through the inverse GPT-2 map, then lossy UTF-8; its
// options only affect offsets) goes with a ByteLevel pre-tokenizer, the others (decoder.hpp)
// without one; a file mixing them is refused rather than decoded into GPT-2's alphabet.
void read_decoder(const nlohmann::json& j, const hf_where& where, bool pre_maps_bytes,
                  hf_tokenizer::impl& p) {
  if (pre_maps_bytes) {
    if (j.is_null()) where.fail("a null decoder is not supported (byte-level BPE needs ByteLevel)");
    std::string type = where.type_of(j);
    if (type != "ByteLevel")
      where.typed(type).fail("decoder type '" + type +
                             "' is not supported with a ByteLevel pre-tokenizer (only ByteLevel)");
    p.byte_level = true;
    return;
  }
  if (j.is_null()) return;
  if (where.type_of(j) == "ByteLevel")
    throw std::runtime_error(where.file +
                             ": pre_tokenizer: no ByteLevel step; the ByteLevel decoder needs one");
  p.dec = decoder::from_json(j, where);
}

added_token parse_added(const nlohmann::json& j, const hf_where& w) {
  if (!j.is_object()) w.fail("expected an object");
  added_token t;
  auto content = j.find("content");
  if (content == j.end() || !content->is_string()) w.fail("missing string field 'content'");
  t.content = content->get<std::string>();
  auto id = j.find("id");
  if (id == j.end() || !id->is_number_unsigned() || id->get<uint64_t>() > 0x7fffffffu)
    w.fail("missing non-negative integer field 'id'");
  t.id = id->get<int32_t>();
  t.single_word = w.get_bool(j, "single_word", false);
  t.lstrip = w.get_bool(j, "lstrip", false);
  t.rstrip = w.get_bool(j, "rstrip", false);
  t.normalized = w.get_bool(j, "normalized", true);
  t.special = w.get_bool(j, "special", false);
  return t;
}

// Hugging Face's AddedVocabulary::add_tokens as the deserializer calls it: the ids written in
// the file are NOT used; a token gets the id of the same content added earlier, else its id in
// the model vocabulary, else the next one after the vocabulary. A file whose ids disagree with
// that is refused here rather than silently renumbered (the reference only logs a warning).
added_vocabulary build_added(const nlohmann::json& root, const token_model& model,
                             const normalizer* norm, const std::string& file) {
  hf_where w{file, "added_tokens"};
  auto arr = root.find("added_tokens");
  if (arr == root.end() || arr->is_null()) return {};
  if (!arr->is_array()) w.fail("expected an array");

  std::vector<added_token> by_order;                // one per id, in first-seen order
  std::unordered_map<int32_t, size_t> index_of_id;  // id -> index in by_order
  std::unordered_map<std::string, int32_t> id_of;   // content -> id
  std::unordered_set<std::string> specials;
  auto next_id = static_cast<int32_t>(model.vocab_entries());
  for (size_t i = 0; i < arr->size(); ++i) {
    hf_where wi = w.item(i);
    added_token t = parse_added((*arr)[i], wi);
    if (t.content.empty()) continue;
    int32_t declared = t.id;
    int32_t id;
    if (auto it = id_of.find(t.content); it != id_of.end())
      id = it->second;
    else if (int32_t m = model.token_to_id(t.content); m >= 0)
      id = m;
    else
      id = next_id++;
    if (id != declared)
      wi.fail("'" + t.content + "' has id " + std::to_string(declared) +
              " but Hugging Face's tokenizers would give it id " + std::to_string(id));
    id_of[t.content] = id;
    if (t.special) specials.insert(t.content);
    if (auto it = index_of_id.find(id); it != index_of_id.end()) {
      by_order[it->second] = t;  // same content again: the later flags win
    } else {
      index_of_id[id] = by_order.size();
      by_order.push_back(t);
    }
  }
  std::vector<std::string> normalized;
  for (const auto& t : by_order) {
    std::string s = t.content;
    if (t.normalized && norm) norm->apply(s);
    normalized.push_back(std::move(s));
  }
  try {
    return added_vocabulary(std::move(by_order), normalized, std::move(specials));
  } catch (const std::invalid_argument& e) {
    w.fail(e.what());
  }
}

int32_t config_token_id(const hf_tokenizer::impl& p, const std::string& token, const char* key,
                        const std::string& file) {
  if (token.empty()) return -1;
  int32_t id = p.token_to_id(token);
  if (id < 0)
    throw std::runtime_error(file + ": " + key + " '" + token +
                             "' is not a token of the tokenizer");
  return id;
}

}  // namespace

hf_tokenizer::hf_tokenizer(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
hf_tokenizer::~hf_tokenizer() = default;

std::shared_ptr<const hf_tokenizer> hf_tokenizer::load_dir(const std::string& dir) {
  fs::path d(dir);
  fs::path config = d / "tokenizer_config.json";
  auto t = load_files((d / "tokenizer.json").string(),
                      fs::exists(config) ? config.string() : std::string());
  fs::path jinja = d / "chat_template.jinja";
  if (fs::exists(jinja)) {
    t->impl_->chat_template_jinja = read_file_bytes(jinja.string());
    t->impl_->has_jinja = true;
    if (t->impl_->config.chat_template.empty())
      t->impl_->config.chat_template = t->impl_->chat_template_jinja;
  }
  return t;
}

std::shared_ptr<const hf_tokenizer> hf_tokenizer::load_files(const std::string& tokenizer_json,
                                                             const std::string& config_json) {
  const std::string& file = tokenizer_json;
  auto p = std::make_unique<impl>();
  p->tokenizer_json = read_file_bytes(file);
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(p->tokenizer_json);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(file + ": invalid JSON: " + e.what());
  }
  if (!root.is_object()) throw std::runtime_error(file + ": expected a JSON object");
  if (auto v = root.find("version"); v != root.end() && *v != "1.0")
    throw std::runtime_error(file + ": version: " + v->dump() + " is not supported (only \"1.0\")");
  // "truncation" and "padding" shape batches for a model call; encode returns the whole text's
  // ids, so they are ignored.

  auto model = root.find("model");
  if (model == root.end() || !model->is_object())
    throw std::runtime_error(file + ": model: missing object");
  hf_where mw{file, "model"};

  auto get = [&](const char* key) -> const nlohmann::json& {
    static const nlohmann::json null_json;
    auto it = root.find(key);
    return it == root.end() ? null_json : *it;
  };
  p->norm = normalizer::from_json(get("normalizer"), {file, "normalizer"});
  p->pre = pre_tokenizer::from_json(get("pre_tokenizer"), {file, "pre_tokenizer"});
  check_post_processor(get("post_processor"), {file, "post_processor"});
  read_decoder(get("decoder"), {file, "decoder"}, p->pre && p->pre->maps_bytes(), *p);
  p->model = token_model::from_json(*model, mw);
  p->added = build_added(root, *p->model, p->norm.get(), file);

  // Per-id decode tables.
  int32_t end = p->model->id_end();
  for (const auto& t : p->added.tokens())
    end = std::max(end, t.id + 1);
  p->known.assign(end, false);
  p->bytes.assign(end, std::string());
  p->text.assign(end, std::string());
  p->special.assign(end, false);
  for (int32_t id = 0; id < end; ++id) {
    const std::string* text = nullptr;
    if (const added_token* t = p->added.find(id))
      text = &p->added.decode_text(*t);
    else
      text = p->model->id_to_token(id);
    if (!text) continue;
    p->known[id] = true;
    p->special[id] = p->added.is_special(*text);
    if (p->byte_level) {
      if (!byte_level::decode(*text, p->bytes[id])) p->bytes[id] = *text;
      continue;
    }
    p->text[id] = *text;
    p->bytes[id] = *text;
    if (p->dec) p->dec->token_bytes(p->bytes[id]);
  }

  if (!config_json.empty()) {
    p->config_json = read_file_bytes(config_json);
    p->has_config = true;
    p->config = hf_config::parse(p->config_json, config_json);
    p->bos = config_token_id(*p, p->config.bos_token, "bos_token", config_json);
    p->eos = config_token_id(*p, p->config.eos_token, "eos_token", config_json);
    p->pad = config_token_id(*p, p->config.pad_token, "pad_token", config_json);
  }
  return std::shared_ptr<const hf_tokenizer>(new hf_tokenizer(std::move(p)));
}

std::vector<int32_t> hf_tokenizer::encode(std::string_view input) const {
  const impl& p = *impl_;
  std::string repaired;
  std::string_view text = input;
  if (!utf8::valid(input)) {
    repaired = utf8::lossy(input);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<added_vocabulary::piece> outer, inner;
  std::vector<std::string> words;
  p.added.split(text, false, outer);
  for (const auto& o : outer) {
    if (o.id >= 0) {
      ids.push_back(o.id);
      continue;
    }
    std::string normalized(text.substr(o.begin, o.end - o.begin));
    if (p.norm) p.norm->apply(normalized);
    inner.clear();
    p.added.split(normalized, true, inner);
    for (const auto& in : inner) {
      if (in.id >= 0) {
        ids.push_back(in.id);
        continue;
      }
      words.clear();
      words.emplace_back(normalized, in.begin, in.end - in.begin);
      // Whether this stretch starts the text (Metaspace's prepend_scheme "first").
      bool at_origin = o.begin == 0 && in.begin == 0;
      if (p.pre) p.pre->apply(words, at_origin);
      for (const auto& w : words)
        p.model->tokenize(w, ids);
    }
  }
  return ids;
}

std::string hf_tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  const impl& p = *impl_;
  if (!p.byte_level) {
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (int32_t id : ids) {
      if (id < 0 || id >= static_cast<int32_t>(p.known.size()) || !p.known[id]) continue;
      if (skip_special && p.special[id]) continue;
      tokens.push_back(p.text[id]);
    }
    std::string out;
    if (p.dec) p.dec->decode_chain(tokens);
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0 && !p.dec) out += ' ';  // no decoder: Hugging Face joins with spaces
      out += tokens[i];
    }
    return utf8::lossy(out);
  }
  std::string raw;
  for (int32_t id : ids) {
    if (id < 0 || id >= static_cast<int32_t>(p.known.size()) || !p.known[id]) continue;
    if (skip_special && p.special[id]) continue;
    raw += p.bytes[id];
  }
  return utf8::lossy(raw);
}

std::string hf_tokenizer::token_bytes(int32_t id, bool skip_special) const {
  const impl& p = *impl_;
  if (id < 0 || id >= static_cast<int32_t>(p.known.size()) || !p.known[id]) return "";
  if (skip_special && p.special[id]) return "";
  return p.bytes[id];
}

int32_t hf_tokenizer::vocab_size() const {
  return static_cast<int32_t>(impl_->known.size());
}
int32_t hf_tokenizer::bos_id() const {
  return impl_->bos;
}
int32_t hf_tokenizer::eos_id() const {
  return impl_->eos;
}
int32_t hf_tokenizer::pad_id() const {
  return impl_->pad >= 0 ? impl_->pad : impl_->eos;
}
int32_t hf_tokenizer::special_id(std::string_view content) const {
  return impl_->added.id_of(content);
}
int32_t hf_tokenizer::token_to_id(std::string_view token) const {
  return impl_->token_to_id(token);
}
bool hf_tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < static_cast<int32_t>(impl_->special.size()) && impl_->special[id];
}

const std::string& hf_tokenizer::chat_template() const {
  return impl_->config.chat_template;
}
const std::string& hf_tokenizer::bos_token() const {
  return impl_->config.bos_token;
}
const std::string& hf_tokenizer::eos_token() const {
  return impl_->config.eos_token;
}
const std::string& hf_tokenizer::pad_token() const {
  return impl_->config.pad_token;
}

void hf_tokenizer::save_dir(const std::string& dir) const {
  fs::create_directories(dir);
  fs::path d(dir);
  write_file_atomically((d / "tokenizer.json").string(), impl_->tokenizer_json);
  if (impl_->has_config)
    write_file_atomically((d / "tokenizer_config.json").string(), impl_->config_json);
  if (impl_->has_jinja)
    write_file_atomically((d / "chat_template.jinja").string(), impl_->chat_template_jinja);
}

void hf_tokenizer::clear_cache() const {
  impl_->model->clear_cache();
}
size_t hf_tokenizer::cache_entries() const {
  return impl_->model->cache_entries();
}

}  // namespace asyncrl
