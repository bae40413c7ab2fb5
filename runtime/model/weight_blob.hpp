#pragma once

// Versioned weights as they move from the trainer to the rollouters. In one process a snapshot
// is one immutable buffer shared by pointer with every receiver (no copy per rollouter); when
// it leaves the process it is packed with msgpack (messages/weights.hpp's inspect()).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
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
  int64_t version = 0;
  std::shared_ptr<const weight_blob> blob;
};

/// msgpack map {"version", "names", "shapes", "data" (bin, little-endian float32)}.
std::vector<char> pack_weights(const weight_snapshot& w);
/// Validates names, shapes and the data size; throws std::runtime_error on bad input.
weight_snapshot unpack_weights(const char* data, size_t size);

}  // namespace asyncrl
