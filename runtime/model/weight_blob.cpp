#include "runtime/model/weight_blob.hpp"

#include "runtime/common/msgpack_limits.hpp"

#include <msgpack.hpp>

#include <cstring>
#include <stdexcept>

namespace asyncrl {

const char* to_string(weight_dtype d) {
  return d == weight_dtype::bf16 ? "bf16" : "float32";
}

float* weight_blob::floats() {
  if (on_device()) throw std::logic_error("weight_blob: floats() of a device snapshot");
  if (dtype != weight_dtype::float32)
    throw std::logic_error(std::string("weight_blob: floats() of a ") + to_string(dtype) + " blob");
  return reinterpret_cast<float*>(data.data());
}

const float* weight_blob::floats() const {
  return const_cast<weight_blob*>(this)->floats();
}

std::vector<char> pack_weights(const weight_snapshot& w) {
  if (!w.blob) throw std::invalid_argument("pack_weights: empty snapshot");
  if (w.blob->on_device())  // this file stays torch-free: the callers copy it to the host
    throw std::invalid_argument("pack_weights: a device snapshot (host_snapshot() it first)");
  const auto& b = *w.blob;
  msgpack::sbuffer buf(static_cast<size_t>(b.bytes()) + 4096);
  msgpack::packer<msgpack::sbuffer> pk(&buf);
  pk.pack_map(5);
  pk.pack(std::string("version"));
  pk.pack(w.version);
  pk.pack(std::string("names"));
  pk.pack(b.names);
  pk.pack(std::string("shapes"));
  pk.pack(b.shapes);
  pk.pack(std::string("dtype"));
  pk.pack(std::string(to_string(b.dtype)));
  pk.pack(std::string("data"));
  pk.pack_bin(static_cast<uint32_t>(b.bytes()));
  pk.pack_bin_body(reinterpret_cast<const char*>(b.data.data()), static_cast<uint32_t>(b.bytes()));
  return std::vector<char>(buf.data(), buf.data() + buf.size());
}

weight_snapshot unpack_weights(const char* data, size_t size) {
  msgpack::object_handle oh;
  try {
    std::size_t off = 0;
    // Depth: the map, the shapes' array, a shape; slack for keys a newer sender adds.
    oh = msgpack::unpack(data, size, off, nullptr, nullptr, msgpack_limits(size, 8));
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("weights: invalid msgpack: ") + e.what());
  }
  const auto& obj = oh.get();
  if (obj.type != msgpack::type::MAP) throw std::runtime_error("weights: expected a map");
  weight_snapshot w;
  auto blob = std::make_shared<weight_blob>();
  bool have_data = false, have_names = false, have_shapes = false;
  const char* bin = nullptr;
  size_t bin_size = 0;
  try {
    for (uint32_t i = 0; i < obj.via.map.size; ++i) {
      const auto& kv = obj.via.map.ptr[i];
      auto key = kv.key.as<std::string>();
      if (key == "version") {
        w.version = kv.val.as<int64_t>();
        if (w.version < 0) throw std::runtime_error("weights: negative version");
      } else if (key == "names") {
        blob->names = kv.val.as<std::vector<std::string>>();
        have_names = true;
      } else if (key == "shapes") {
        blob->shapes = kv.val.as<std::vector<std::vector<int64_t>>>();
        have_shapes = true;
      } else if (key == "dtype") {
        const auto d = kv.val.as<std::string>();
        if (d == "float32")
          blob->dtype = weight_dtype::float32;
        else if (d == "bf16")
          blob->dtype = weight_dtype::bf16;
        else
          throw std::runtime_error("weights: unknown dtype '" + d + "'");
      } else if (key == "data") {
        if (kv.val.type != msgpack::type::BIN) throw std::runtime_error("weights: data is not bin");
        bin = kv.val.via.bin.ptr;
        bin_size = kv.val.via.bin.size;
        have_data = true;
      }
    }
  } catch (const msgpack::type_error&) {
    throw std::runtime_error("weights: a field has the wrong type");
  }
  if (!have_data || !have_names || !have_shapes)
    throw std::runtime_error("weights: missing names, shapes or data");
  // After the loop: "dtype" may come after "data".
  const size_t esize = element_size(blob->dtype);
  if (bin_size % esize != 0)
    throw std::runtime_error("weights: data size is not a multiple of " + std::to_string(esize) +
                             " (" + to_string(blob->dtype) + ")");
  blob->data.resize(bin_size);
  // An empty vector's data() may be null, and memcpy with null is UB even for 0 bytes.
  if (bin_size != 0) std::memcpy(blob->data.data(), bin, bin_size);
  if (blob->names.size() != blob->shapes.size())
    throw std::runtime_error("weights: names and shapes differ in count");
  // Sizes are checked against the data without overflowing: the data bounds every product.
  const size_t limit = static_cast<size_t>(blob->numel());
  size_t total = 0;
  for (auto& s : blob->shapes) {
    size_t n = 1;
    for (auto d : s) {
      if (d < 0) throw std::runtime_error("weights: negative dimension");
      const auto ud = static_cast<size_t>(d);
      if (ud != 0 && n > limit / ud)
        throw std::runtime_error("weights: shapes need more elements than the data holds");
      n *= ud;
    }
    if (n > limit - total)
      throw std::runtime_error("weights: shapes need more elements than the data holds");
    total += n;
  }
  if (total != limit)
    throw std::runtime_error("weights: shapes need " + std::to_string(total) +
                             " elements, data has " + std::to_string(limit));
  w.blob = std::move(blob);
  return w;
}

}  // namespace asyncrl
