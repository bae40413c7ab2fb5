#include "runtime/text/sp_tokenizer.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "runtime/common/atomic_file.hpp"
#include "runtime/text/hf_config.hpp"

namespace asyncrl {

namespace fs = std::filesystem;

namespace {

// libsentencepiece is reached through libasyncrl_sentencepiece.so (sentencepiece_shim.cc says
// why it is not linked in): its C functions, resolved once.
struct sp_api {
  void* (*open)(const char*, size_t, char*, size_t);
  void (*close)(void*);
  int (*piece_size)(void*);
  long (*piece)(void*, int, char*, size_t);
  int (*kind)(void*, int);
  void (*ids)(void*, int*, int*, int*, int*);
  long (*encode)(void*, const char*, size_t, int*, size_t, char*, size_t);
  long (*decode)(void*, const int*, size_t, char*, size_t, char*, size_t);
};

constexpr const char* kShimName = "libasyncrl_sentencepiece.so";

// Where the shim is: $ASYNCRL_SENTENCEPIECE_SHIM, else where the build put it, else next to the
// running program.
std::vector<std::string> shim_candidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("ASYNCRL_SENTENCEPIECE_SHIM")) out.emplace_back(env);
#ifdef ASYNCRL_SENTENCEPIECE_SHIM
  out.emplace_back(ASYNCRL_SENTENCEPIECE_SHIM);
#endif
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) out.push_back((exe.parent_path() / kShimName).string());
  return out;
}

const sp_api& api() {
  static std::once_flag once;
  static sp_api a{};
  static std::string error;
  std::call_once(once, [] {
    void* lib = nullptr;
    std::string tried;
    for (const auto& path : shim_candidates()) {
      if (!fs::exists(path)) {
        tried += " " + path + " (missing)";
        continue;
      }
      lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (lib) break;
      tried += " " + path + " (" + dlerror() + ")";
    }
    if (!lib) {
      error = std::string("cannot load ") + kShimName +
              ", which reads tokenizer.model files:" + tried +
              "; set ASYNCRL_SENTENCEPIECE_SHIM to its path";
      return;
    }
    auto sym = [&](const char* name) {
      void* f = dlsym(lib, name);
      if (!f && error.empty()) error = std::string(kShimName) + ": no symbol " + name;
      return f;
    };
    a.open = reinterpret_cast<decltype(a.open)>(sym("asyncrl_sp_open"));
    a.close = reinterpret_cast<decltype(a.close)>(sym("asyncrl_sp_close"));
    a.piece_size = reinterpret_cast<decltype(a.piece_size)>(sym("asyncrl_sp_piece_size"));
    a.piece = reinterpret_cast<decltype(a.piece)>(sym("asyncrl_sp_piece"));
    a.kind = reinterpret_cast<decltype(a.kind)>(sym("asyncrl_sp_kind"));
    a.ids = reinterpret_cast<decltype(a.ids)>(sym("asyncrl_sp_ids"));
    a.encode = reinterpret_cast<decltype(a.encode)>(sym("asyncrl_sp_encode"));
    a.decode = reinterpret_cast<decltype(a.decode)>(sym("asyncrl_sp_decode"));
  });
  if (!error.empty()) throw std::runtime_error(error);
  return a;
}

enum piece_kind : int { kControl = 1, kUnknown = 2, kByte = 4, kUnused = 8 };

}  // namespace

struct sp_tokenizer::impl {
  const sp_api* a = nullptr;
  void* h = nullptr;                     // the processor in the shim
  std::string model_bytes, config_json;  // as read, for save_dir
  bool has_config = false;
  int32_t size = 0;
  int32_t bos = -1, eos = -1, pad = -1, unk = -1;
  std::vector<std::string> pieces;  // by id
  std::vector<int> kinds;           // piece_kind bits by id
  std::unordered_map<std::string, int32_t> id_of;

  ~impl() {
    if (h) a->close(h);
  }
  bool in_range(int32_t id) const { return id >= 0 && id < size; }
  bool is(int32_t id, piece_kind k) const { return (kinds[id] & k) != 0; }
  // SentencePiece's PieceToId: unk for a text that is no piece.
  int32_t piece_to_id(const std::string& piece) const {
    auto it = id_of.find(piece);
    return it == id_of.end() ? unk : it->second;
  }
  std::string decode_ids(const std::vector<int>& ids) const {
    std::string out(ids.size() * 8 + 64, '\0');
    char err[512] = {0};
    for (;;) {
      long n = a->decode(h, ids.data(), ids.size(), out.data(), out.size(), err, sizeof err);
      if (n < 0) throw std::runtime_error(std::string("sentencepiece decode failed: ") + err);
      if (static_cast<size_t>(n) <= out.size()) {
        out.resize(static_cast<size_t>(n));
        return out;
      }
      out.assign(static_cast<size_t>(n), '\0');
    }
  }
};

namespace {

// The byte of a "<0xXX>" byte piece.
char byte_of_piece(const std::string& piece) {
  return static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16));
}

}  // namespace

sp_tokenizer::sp_tokenizer(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
sp_tokenizer::~sp_tokenizer() = default;

std::shared_ptr<const sp_tokenizer> sp_tokenizer::load_files(const std::string& model_file,
                                                             const std::string& config_json) {
  auto p = std::make_unique<impl>();
  p->model_bytes = read_file_bytes(model_file);
  p->a = &api();
  char err[512] = {0};
  p->h = p->a->open(p->model_bytes.data(), p->model_bytes.size(), err, sizeof err);
  if (!p->h) throw std::runtime_error(model_file + ": not a SentencePiece model: " + err);
  p->size = p->a->piece_size(p->h);
  int bos, eos, pad, unk;
  p->a->ids(p->h, &bos, &eos, &pad, &unk);
  p->bos = bos;
  p->eos = eos;
  p->pad = pad;
  p->unk = unk;
  p->pieces.resize(p->size);
  p->kinds.resize(p->size);
  for (int32_t id = 0; id < p->size; ++id) {
    std::string& piece = p->pieces[id];
    piece.resize(32);
    long n = p->a->piece(p->h, id, piece.data(), piece.size());
    if (static_cast<size_t>(n) > piece.size()) {
      piece.resize(static_cast<size_t>(n));
      p->a->piece(p->h, id, piece.data(), piece.size());
    }
    piece.resize(static_cast<size_t>(n));
    p->kinds[id] = p->a->kind(p->h, id);
    p->id_of.emplace(piece, id);
  }
  if (!config_json.empty()) {
    p->config_json = read_file_bytes(config_json);
    p->has_config = true;
    hf_config c = hf_config::parse(p->config_json, config_json);
    // The config names the tokens; each must be a piece of the model (PieceToId gives unk for
    // a text that is none).
    auto id_of = [&](const std::string& token, const char* key, int32_t fallback) {
      if (token.empty()) return fallback;
      int32_t id = p->piece_to_id(token);
      if (!p->in_range(id) || p->pieces[id] != token)
        throw std::runtime_error(config_json + ": " + key + " '" + token + "' is not a piece of " +
                                 model_file);
      return id;
    };
    p->bos = id_of(c.bos_token, "bos_token", p->bos);
    p->eos = id_of(c.eos_token, "eos_token", p->eos);
    p->pad = id_of(c.pad_token, "pad_token", p->pad);
  }
  return std::shared_ptr<const sp_tokenizer>(new sp_tokenizer(std::move(p)));
}

std::shared_ptr<const sp_tokenizer> sp_tokenizer::load_dir(const std::string& dir) {
  fs::path config = fs::path(dir) / "tokenizer_config.json";
  return load_files((fs::path(dir) / "tokenizer.model").string(),
                    fs::exists(config) ? config.string() : std::string());
}

std::vector<int32_t> sp_tokenizer::encode(std::string_view text) const {
  const impl& p = *impl_;
  // Byte fallback gives at most one id per byte; normalization may add a few.
  std::vector<int> ids(text.size() + 16);
  char err[512] = {0};
  for (;;) {
    long n = p.a->encode(p.h, text.data(), text.size(), ids.data(), ids.size(), err, sizeof err);
    if (n < 0) throw std::runtime_error(std::string("sentencepiece encode failed: ") + err);
    if (static_cast<size_t>(n) <= ids.size()) {
      ids.resize(static_cast<size_t>(n));
      break;
    }
    ids.assign(static_cast<size_t>(n), 0);
  }
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string sp_tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  const impl& p = *impl_;
  std::string out;
  std::vector<int> segment;
  auto flush = [&] {
    if (segment.empty()) return;
    out += p.decode_ids(segment);
    segment.clear();
  };
  for (int32_t id : ids) {
    if (!p.in_range(id)) continue;
    if (!skip_special && p.is(id, kControl)) {
      flush();
      out += p.pieces[id];
      continue;
    }
    segment.push_back(id);
  }
  flush();
  return out;
}

std::string sp_tokenizer::token_bytes(int32_t id, bool skip_special) const {
  const impl& p = *impl_;
  if (!p.in_range(id)) return "";
  if (p.is(id, kControl)) return skip_special ? "" : p.pieces[id];
  if (p.is(id, kUnknown)) return " \xE2\x81\x87 ";  // SentencePiece's unk surface " ⁇ "
  const std::string& piece = p.pieces[id];
  if (p.is(id, kByte)) return std::string(1, byte_of_piece(piece));
  static const std::string meta = "\xE2\x96\x81";  // U+2581
  std::string out;
  size_t prev = 0;
  for (size_t pos = piece.find(meta); pos != std::string::npos; pos = piece.find(meta, prev)) {
    out.append(piece, prev, pos - prev);
    out += ' ';
    prev = pos + meta.size();
  }
  out.append(piece, prev, std::string::npos);
  return out;
}

int32_t sp_tokenizer::vocab_size() const {
  return impl_->size;
}
int32_t sp_tokenizer::bos_id() const {
  return impl_->bos;
}
int32_t sp_tokenizer::eos_id() const {
  return impl_->eos;
}
int32_t sp_tokenizer::pad_id() const {
  return impl_->pad >= 0 ? impl_->pad : impl_->eos;
}

int32_t sp_tokenizer::special_id(std::string_view content) const {
  const impl& p = *impl_;
  std::string text(content);
  int32_t id = p.piece_to_id(text);
  if (!p.in_range(id) || p.pieces[id] != text) return -1;
  if (p.is(id, kControl) || p.is(id, kUnknown)) return id;
  // The library does not say which pieces are user-defined; those are the ones their text
  // encodes to whole.
  if (p.is(id, kByte) || p.is(id, kUnused)) return -1;
  // encode: maybe the dummy-prefix "▁" first.
  std::vector<int32_t> ids = encode(text);
  bool whole = !ids.empty() && ids.back() == id &&
               (ids.size() == 1 || (ids.size() == 2 && p.pieces[ids[0]] == "\xE2\x96\x81"));
  return whole ? id : -1;
}

void sp_tokenizer::save_dir(const std::string& dir) const {
  fs::create_directories(dir);
  write_file_atomically((fs::path(dir) / "tokenizer.model").string(), impl_->model_bytes);
  if (impl_->has_config)
    write_file_atomically((fs::path(dir) / "tokenizer_config.json").string(), impl_->config_json);
}

tokenizer_ptr load_sentencepiece_dir(const std::string& dir) {
  fs::path d(dir);
  if (fs::exists(d / "tokenizer.json") || !fs::exists(d / "tokenizer.model")) return nullptr;
  return sp_tokenizer::load_dir(dir);
}

}  // namespace asyncrl
