// A C interface to libsentencepiece, built as its own module (libasyncrl_sentencepiece.so) and
// dlopen'ed by sp_tokenizer.cpp with RTLD_LOCAL | RTLD_DEEPBIND. Debian's libsentencepiece
// carries its own copy of protobuf-lite (an older one) with exported symbols; linked into a
// process that also loads libprotobuf.so.32 (libtorch does, through onnx), one copy's symbols
// replace the other's and the process crashes in protobuf's static initialisers. Loaded this
// way, its symbols stay out of the global scope and it binds to its own copy first.
//
// Only C types cross the boundary (ids, bytes into caller-owned buffers), so no allocation made
// on one side is freed on the other. Named .cc so that the library's *.cpp glob leaves it out.

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace {

void set_error(char* err, size_t cap, const std::string& what) {
  if (!err || cap == 0) return;
  size_t n = std::min(cap - 1, what.size());
  std::memcpy(err, what.data(), n);
  err[n] = '\0';
}

sentencepiece::SentencePieceProcessor* sp(void* h) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(h);
}

}  // namespace

extern "C" {

/// A processor for the serialized model `data`, or null with the reason in `err`.
__attribute__((visibility("default"))) void* asyncrl_sp_open(const char* data, size_t size,
                                                             char* err, size_t errcap) {
  try {
    auto* p = new sentencepiece::SentencePieceProcessor();
    auto st = p->LoadFromSerializedProto(std::string(data, size));
    if (!st.ok()) {
      set_error(err, errcap, st.ToString());
      delete p;
      return nullptr;
    }
    return p;
  } catch (const std::exception& e) {
    set_error(err, errcap, e.what());
    return nullptr;
  }
}

/// Frees what asyncrl_sp_open returned.
__attribute__((visibility("default"))) void asyncrl_sp_close(void* h) {
  delete sp(h);
}

/// Number of pieces.
__attribute__((visibility("default"))) int asyncrl_sp_piece_size(void* h) {
  return sp(h)->GetPieceSize();
}

/// Copies piece `id` into out (at most cap bytes); returns its full length.
__attribute__((visibility("default"))) long asyncrl_sp_piece(void* h, int id, char* out,
                                                             size_t cap) {
  const std::string& p = sp(h)->IdToPiece(id);
  std::memcpy(out, p.data(), std::min(cap, p.size()));
  return static_cast<long>(p.size());
}

/// Bits: 1 control, 2 unknown, 4 byte, 8 unused.
__attribute__((visibility("default"))) int asyncrl_sp_kind(void* h, int id) {
  auto* p = sp(h);
  return (p->IsControl(id) ? 1 : 0) | (p->IsUnknown(id) ? 2 : 0) | (p->IsByte(id) ? 4 : 0) |
         (p->IsUnused(id) ? 8 : 0);
}

/// The model's bos, eos, pad and unk ids (-1 when disabled).
__attribute__((visibility("default"))) void asyncrl_sp_ids(void* h, int* bos, int* eos, int* pad,
                                                           int* unk) {
  *bos = sp(h)->bos_id();
  *eos = sp(h)->eos_id();
  *pad = sp(h)->pad_id();
  *unk = sp(h)->unk_id();
}

/// Encodes text into out (at most cap ids); returns the number of ids (call again with a larger
/// buffer when it exceeds cap), or -1 with the reason in err.
__attribute__((visibility("default"))) long asyncrl_sp_encode(void* h, const char* text, size_t n,
                                                              int* out, size_t cap, char* err,
                                                              size_t errcap) {
  try {
    std::vector<int> ids;
    auto st = sp(h)->Encode(std::string(text, n), &ids);
    if (!st.ok()) {
      set_error(err, errcap, st.ToString());
      return -1;
    }
    std::memcpy(out, ids.data(), std::min(cap, ids.size()) * sizeof(int));
    return static_cast<long>(ids.size());
  } catch (const std::exception& e) {
    set_error(err, errcap, e.what());
    return -1;
  }
}

/// Decodes ids into out (at most cap bytes); returns the text's length (call again with a
/// larger buffer when it exceeds cap), or -1 with the reason in err.
__attribute__((visibility("default"))) long asyncrl_sp_decode(void* h, const int* ids, size_t n,
                                                              char* out, size_t cap, char* err,
                                                              size_t errcap) {
  try {
    std::string text;
    auto st = sp(h)->Decode(std::vector<int>(ids, ids + n), &text);
    if (!st.ok()) {
      set_error(err, errcap, st.ToString());
      return -1;
    }
    std::memcpy(out, text.data(), std::min(cap, text.size()));
    return static_cast<long>(text.size());
  } catch (const std::exception& e) {
    set_error(err, errcap, e.what());
    return -1;
  }
}

}  // extern "C"
