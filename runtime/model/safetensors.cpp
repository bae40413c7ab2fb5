#include "runtime/model/safetensors.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <system_error>
#include <tuple>
#include <utility>

// Tensor bytes are handed out and converted as stored, which is only right on a little-endian
// host; the header length itself is decoded byte by byte and does not depend on this.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "asyncrl safetensors support assumes a little-endian host"
#endif

namespace asyncrl {

namespace {

// A larger header is far beyond any real checkpoint and most likely a corrupt length field.
constexpr uint64_t max_header_bytes = 100ull * 1000 * 1000;

struct dtype_desc {
  const char* name;
  size_t size;
};
// Indexed by st_dtype; keep in the enum's order.
constexpr dtype_desc dtype_table[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
                                      {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};
constexpr size_t dtype_count = sizeof(dtype_table) / sizeof(dtype_table[0]);
static_assert(dtype_count == static_cast<size_t>(st_dtype::boolean) + 1, "dtype_table is stale");

const dtype_desc& describe(st_dtype t) {
  const auto i = static_cast<size_t>(t);
  return dtype_table[i < dtype_count ? i : 0];  // only a corrupted enum value takes the fallback
}

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw safetensors_error(source + ": " + what);
}

[[noreturn]] void fail_tensor(const std::string& source, const std::string& name,
                              const std::string& what) {
  fail(source, "tensor '" + name + "': " + what);
}

bool dtype_from_name(const std::string& s, st_dtype* out) {
  for (size_t i = 0; i < dtype_count; ++i) {
    if (s == dtype_table[i].name) {
      *out = static_cast<st_dtype>(i);
      return true;
    }
  }
  return false;
}

// numel * dtype_size, or false when it does not fit in int64 (so a hostile shape cannot wrap
// around to a small, plausible byte count).
bool checked_nbytes(const std::vector<int64_t>& shape, st_dtype dtype, uint64_t* out) {
  const uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  // A zero dimension makes the product 0 whatever the others are; check it first so that
  // [huge, huge, 0] does not overflow on the way.
  for (int64_t d : shape)
    if (d == 0) {
      *out = 0;
      return true;
    }
  uint64_t n = st_dtype_size(dtype);
  for (int64_t d : shape) {
    if (d < 0) return false;
    const auto u = static_cast<uint64_t>(d);
    if (n > limit / u) return false;
    n *= u;
  }
  *out = n;
  return true;
}

std::string u64(uint64_t v) {
  return std::to_string(v);
}

// Reads a non-negative JSON integer; floats, negatives and non-numbers are rejected.
bool json_uint(const nlohmann::json& j, uint64_t* out) {
  if (!j.is_number_unsigned()) return false;
  *out = j.get<uint64_t>();
  return true;
}

nlohmann::json parse_header_json(const uint8_t* first, const uint8_t* last,
                                 const std::string& source) {
  // nlohmann keeps the last of duplicate keys silently; a file that names a tensor twice is
  // ambiguous, so track the keys of every open object and reject repeats.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  auto cb = [&](int, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    using ev_t = nlohmann::json::parse_event_t;
    if (ev == ev_t::object_start) {
      open_objects.emplace_back();
    } else if (ev == ev_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (ev == ev_t::key && !open_objects.empty() && duplicate.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second) duplicate = key;
    }
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(first, last, cb, /*allow_exceptions=*/false);
  } catch (const nlohmann::json::exception& e) {
    fail(source, std::string("header is not valid JSON: ") + e.what());
  }
  if (header.is_discarded()) fail(source, "header is not valid JSON");
  if (!duplicate.empty()) fail(source, "header has duplicate key '" + duplicate + "'");
  if (!header.is_object()) fail(source, "header is not a JSON object");
  return header;
}

}  // namespace

const char* st_dtype_name(st_dtype t) {
  return describe(t).name;
}

size_t st_dtype_size(st_dtype t) {
  return describe(t).size;
}

int64_t st_tensor_info::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d == 0) return 0;
    n *= d;  // parse and the writer have already checked that the product fits
  }
  return n;
}

safetensors_file safetensors_file::read(const std::string& path) {
  // file_size also fails on directories, where an ifstream would "open" and report a bogus size.
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  if (ec || !in) fail(path, "cannot open");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (!bytes.empty()) in.read(reinterpret_cast<char*>(bytes.data()), bytes.size());
  if (static_cast<uint64_t>(in.gcount()) != bytes.size()) fail(path, "read error");
  return parse(std::move(bytes), path);
}

safetensors_file safetensors_file::parse(std::vector<uint8_t> bytes, const std::string& source) {
  if (bytes.size() < 8)
    fail(source, "file is " + u64(bytes.size()) + " bytes, shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | bytes[i];
  const uint64_t remaining = bytes.size() - 8;
  if (n == 0) fail(source, "header length is 0");
  if (n > max_header_bytes) fail(source, "header length " + u64(n) + " exceeds the 100 MB limit");
  if (n > remaining)
    fail(source, "header length " + u64(n) + " exceeds the remaining " + u64(remaining) +
                     " bytes (truncated file?)");

  const nlohmann::json header = parse_header_json(bytes.data() + 8, bytes.data() + 8 + n, source);
  safetensors_file f;
  f.source_ = source;
  f.data_start_ = static_cast<size_t>(8 + n);
  const uint64_t data_size = bytes.size() - f.data_start_;

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(source, "__metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string())
          fail(source, "__metadata__ value for '" + key + "' is not a string");
        f.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object()) fail_tensor(source, name, "entry is not an object");
    st_tensor_info t;
    t.name = name;

    const auto dt = entry.find("dtype");
    if (dt == entry.end() || !dt->is_string() || !dtype_from_name(dt->get<std::string>(), &t.dtype))
      fail_tensor(source, name,
                  "unknown dtype " + (dt == entry.end() ? std::string("(missing)") : dt->dump()));

    const auto sh = entry.find("shape");
    if (sh == entry.end() || !sh->is_array())
      fail_tensor(source, name, "shape is not an array of non-negative integers");
    for (const auto& d : *sh) {
      uint64_t v = 0;
      if (!json_uint(d, &v) || v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail_tensor(source, name, "shape is not an array of non-negative integers");
      t.shape.push_back(static_cast<int64_t>(v));
    }

    const auto off = entry.find("data_offsets");
    uint64_t begin = 0, end = 0;
    if (off == entry.end() || !off->is_array() || off->size() != 2 ||
        !json_uint((*off)[0], &begin) || !json_uint((*off)[1], &end))
      fail_tensor(source, name, "data_offsets is not two non-negative integers [begin, end]");
    if (begin > end)
      fail_tensor(source, name, "data_offsets begin " + u64(begin) + " > end " + u64(end));
    if (end > data_size)
      fail_tensor(source, name,
                  "data_offsets end " + u64(end) + " is beyond the data section of " +
                      u64(data_size) + " bytes");

    uint64_t expected = 0;
    if (!checked_nbytes(t.shape, t.dtype, &expected))
      fail_tensor(source, name, "shape element count overflows");
    if (end - begin != expected)
      fail_tensor(source, name,
                  "expected " + u64(expected) + " bytes for " + st_dtype_name(t.dtype) +
                      " shape of " + u64(expected / st_dtype_size(t.dtype)) +
                      " elements, data_offsets span " + u64(end - begin) + " bytes");
    t.begin = static_cast<size_t>(begin);
    t.end = static_cast<size_t>(end);
    f.tensors_.push_back(std::move(t));
  }

  // JSON objects are unordered, so file order (by offset) is the only stable order to expose.
  std::sort(f.tensors_.begin(), f.tensors_.end(), [](const auto& a, const auto& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  // Zero-byte tensors occupy nothing and cannot overlap anything.
  const st_tensor_info* prev = nullptr;
  for (const auto& t : f.tensors_) {
    if (t.begin == t.end) continue;
    if (prev != nullptr && t.begin < prev->end)
      fail(source, "tensors '" + prev->name + "' and '" + t.name + "' overlap in the data section");
    prev = &t;
  }
  f.bytes_ = std::move(bytes);
  return f;
}

const st_tensor_info* safetensors_file::find(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

const uint8_t* safetensors_file::data(const st_tensor_info& t) const {
  return bytes_.data() + data_start_ + t.begin;
}

std::vector<float> safetensors_file::to_f32(const st_tensor_info& t) const {
  const size_t elem = st_dtype_size(t.dtype);
  const size_t n = (t.end - t.begin) / elem;
  const uint8_t* p = data(t);
  if (t.dtype != st_dtype::f32 && t.dtype != st_dtype::f64 && t.dtype != st_dtype::f16 &&
      t.dtype != st_dtype::bf16)
    fail_tensor(source_, t.name,
                std::string("dtype ") + st_dtype_name(t.dtype) + " cannot be converted to f32");
  std::vector<float> out(n);
  // memcpy per element: offsets are byte offsets, so the data need not be aligned.
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* q = p + i * elem;
    if (t.dtype == st_dtype::f32) {
      std::memcpy(&out[i], q, 4);
    } else if (t.dtype == st_dtype::f64) {
      double v;
      std::memcpy(&v, q, 8);
      out[i] = static_cast<float>(v);
    } else {
      uint16_t h;
      std::memcpy(&h, q, 2);
      out[i] = t.dtype == st_dtype::f16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  }
  return out;
}

namespace {

std::vector<uint8_t> serialize_impl(const std::vector<st_write_tensor>& tensors,
                                    const std::map<std::string, std::string>& metadata,
                                    const std::string& where) {
  // ordered_json keeps insertion order, so the header lists tensors in the caller's order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto& meta = header["__metadata__"];
    meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata)
      meta[k] = v;
  }
  uint64_t offset = 0;
  std::set<std::string> names;
  for (const auto& t : tensors) {
    if (t.name == "__metadata__") fail_tensor(where, t.name, "name is reserved");
    if (!names.insert(t.name).second) fail_tensor(where, t.name, "duplicate tensor name");
    uint64_t expected = 0;
    if (!checked_nbytes(t.shape, t.dtype, &expected))
      fail_tensor(where, t.name, "shape has a negative dimension or overflows");
    if (t.nbytes != expected)
      fail_tensor(where, t.name,
                  "nbytes is " + u64(t.nbytes) + ", expected " + u64(expected) + " for " +
                      st_dtype_name(t.dtype) + " shape");
    if (t.nbytes != 0 && t.data == nullptr) fail_tensor(where, t.name, "data is null");
    auto& e = header[t.name];
    e["dtype"] = st_dtype_name(t.dtype);
    e["shape"] = t.shape;
    e["data_offsets"] = {offset, offset + t.nbytes};
    offset += t.nbytes;
  }
  std::string json;
  try {
    json = header.dump();
  } catch (const nlohmann::json::exception& e) {
    fail(where, std::string("cannot encode header: ") + e.what());  // e.g. names not UTF-8
  }
  // Padding keeps the data section 8-byte aligned for readers that map the file.
  json.append((8 - json.size() % 8) % 8, ' ');

  std::vector<uint8_t> out;
  out.reserve(8 + json.size() + offset);
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), json.begin(), json.end());
  for (const auto& t : tensors) {
    const auto* p = static_cast<const uint8_t*>(t.data);
    if (t.nbytes != 0) out.insert(out.end(), p, p + t.nbytes);
  }
  return out;
}

}  // namespace

std::vector<uint8_t> serialize_safetensors(const std::vector<st_write_tensor>& tensors,
                                           const std::map<std::string, std::string>& metadata) {
  return serialize_impl(tensors, metadata, "serialize_safetensors");
}

void write_safetensors(const std::string& path, const std::vector<st_write_tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::vector<uint8_t> bytes = serialize_impl(tensors, metadata, path);
  // Write then rename, so a crash mid-write never leaves a truncated file under `path`.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(path, "cannot open " + tmp + " for writing");
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      fail(path, "write to " + tmp + " failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    fail(path, "cannot rename " + tmp + ": " + ec.message());
  }
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf, or NaN keeping its payload
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);  // rebias 15 -> 127
  } else {
    // Zero or subnormal: mant * 2^-24 is exact in float.
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign != 0 ? -v : v;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bf16_to_f32(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((ax >> 13) & 0x3ffu);
  if (ax >= 0x47800000u) return sign | 0x7c00u;  // >= 65536 (or inf): past the largest binade
  const uint32_t exp = ax >> 23;
  if (exp < 113) {
    // Below 2^-14: the result is a subnormal, round(|f| * 2^24) = mant24 >> (126 - exp).
    const uint32_t shift = 126 - exp;
    if (shift > 24) return sign;  // below half the smallest subnormal
    const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    uint32_t r = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;  // may carry into the smallest normal
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t r = ((exp - 112) << 10) | ((ax >> 13) & 0x3ffu);
  const uint32_t rem = ax & 0x1fffu;
  // A carry out of the mantissa bumps the exponent, and at 65520 and up it reaches inf.
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return sign | static_cast<uint16_t>(r);
}

uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet
  // Ties-to-even: add 0x7fff plus the lowest kept bit, then truncate.
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace asyncrl
