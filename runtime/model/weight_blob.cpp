#include "runtime/model/weight_blob.hpp"

#include <msgpack.hpp>

#include <cstring>
#include <stdexcept>

namespace asyncrl {

std::vector<char> pack_weights(const weight_snapshot& w) {
  if (!w.blob) throw std::invalid_argument("pack_weights: empty snapshot");
  const auto& b = *w.blob;
  msgpack::sbuffer buf(static_cast<size_t>(b.bytes()) + 4096);
  msgpack::packer<msgpack::sbuffer> pk(&buf);
  pk.pack_map(4);
  pk.pack(std::string("version"));
  pk.pack(w.version);
  pk.pack(std::string("names"));
  pk.pack(b.names);
  pk.pack(std::string("shapes"));
  pk.pack(b.shapes);
  pk.pack(std::string("data"));
  pk.pack_bin(static_cast<uint32_t>(b.bytes()));
  pk.pack_bin_body(reinterpret_cast<const char*>(b.data.data()), static_cast<uint32_t>(b.bytes()));
  return std::vector<char>(buf.data(), buf.data() + buf.size());
}

weight_snapshot unpack_weights(const char* data, size_t size) {
  msgpack::object_handle oh;
  try {
    oh = msgpack::unpack(data, size);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("weights: invalid msgpack: ") + e.what());
  }
  const auto& obj = oh.get();
  if (obj.type != msgpack::type::MAP) throw std::runtime_error("weights: expected a map");
  weight_snapshot w;
  auto blob = std::make_shared<weight_blob>();
  bool have_data = false, have_names = false, have_shapes = false;
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
      } else if (key == "data") {
        if (kv.val.type != msgpack::type::BIN) throw std::runtime_error("weights: data is not bin");
        if (kv.val.via.bin.size % sizeof(float) != 0)
          throw std::runtime_error("weights: data size is not a multiple of 4");
        blob->data.resize(kv.val.via.bin.size / sizeof(float));
        // An empty vector's data() may be null, and memcpy with null is UB even for 0 bytes.
        if (kv.val.via.bin.size != 0)
          std::memcpy(blob->data.data(), kv.val.via.bin.ptr, kv.val.via.bin.size);
        have_data = true;
      }
    }
  } catch (const msgpack::type_error&) {
    throw std::runtime_error("weights: a field has the wrong type");
  }
  if (!have_data || !have_names || !have_shapes)
    throw std::runtime_error("weights: missing names, shapes or data");
  if (blob->names.size() != blob->shapes.size())
    throw std::runtime_error("weights: names and shapes differ in count");
  // Sizes are checked against the data without overflowing: the data bounds every product.
  const size_t limit = blob->data.size();
  size_t total = 0;
  for (auto& s : blob->shapes) {
    size_t n = 1;
    for (auto d : s) {
      if (d < 0) throw std::runtime_error("weights: negative dimension");
      const auto ud = static_cast<size_t>(d);
      if (ud != 0 && n > limit / ud)
        throw std::runtime_error("weights: shapes need more floats than the data holds");
      n *= ud;
    }
    if (n > limit - total)
      throw std::runtime_error("weights: shapes need more floats than the data holds");
    total += n;
  }
  if (total != blob->data.size())
    throw std::runtime_error("weights: shapes need " + std::to_string(total) +
                             " floats, data has " + std::to_string(blob->data.size()));
  w.blob = std::move(blob);
  return w;
}

}  // namespace asyncrl
