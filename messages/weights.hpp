#pragma once

// Versioned weights as they move from the trainer to the rollouters. In one process a snapshot
// is one immutable buffer shared by pointer with every receiver (no copy per rollouter); when
// it leaves the process, inspect() serializes it with msgpack.

#include <caf/detail/stringification_inspector.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace asyncrl {

/// All parameters of a model as one contiguous float32 buffer, tensors in a fixed order.
struct weight_blob {
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<float> data;  // tensors concatenated in `names` order
  int64_t bytes() const { return static_cast<int64_t>(data.size() * sizeof(float)); }
};

struct weight_snapshot {
  int32_t version = 0;
  std::shared_ptr<const weight_blob> blob;
};

/// msgpack map {"version", "names", "shapes", "data" (bin, little-endian float32)}.
std::vector<char> pack_weights(const weight_snapshot& w);
/// Validates names, shapes and the data size; throws std::runtime_error on bad input.
weight_snapshot unpack_weights(const char* data, size_t size);

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, weight_snapshot& x) {
  if constexpr (std::is_same<Inspector, caf::detail::stringification_inspector>::value) {
    // Printing must not serialize megabytes.
    int64_t bytes = x.blob ? x.blob->bytes() : 0;
    return f(caf::meta::type_name("weight_snapshot"), x.version, bytes);
  } else if constexpr (Inspector::reads_state) {
    std::vector<char> bytes;
    if (x.blob) bytes = pack_weights(x);
    return f(caf::meta::type_name("weight_snapshot"), x.version, bytes);
  } else {
    std::vector<char> bytes;
    return f(caf::meta::type_name("weight_snapshot"), x.version, bytes,
             caf::meta::load_callback([&]() -> caf::error {
               if (bytes.empty()) {
                 x.blob.reset();
                 return caf::none;
               }
               try {
                 x = unpack_weights(bytes.data(), bytes.size());
               } catch (const std::exception&) {
                 return caf::sec::invalid_argument;
               }
               return caf::none;
             }));
  }
}

}  // namespace asyncrl
