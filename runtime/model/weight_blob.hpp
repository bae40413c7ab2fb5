#pragma once

// Versioned weights as they move from the trainer to the rollouters. In one process a snapshot
// is one immutable buffer shared by pointer with every receiver (no copy per rollouter); when
// it leaves the process it is packed with msgpack (messages/weights.hpp's inspect()).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace asyncrl {

/// std::allocator, except that resize() leaves the new elements default-initialized
/// (uninitialized floats): a snapshot buffer is written once by its copy, and zero-filling it
/// first would fault in and write every page twice (bench/bench_weight_sync).
template <class T>
struct uninitialized_allocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = uninitialized_allocator<U>;
  };
  uninitialized_allocator() = default;
  template <class U>
  uninitialized_allocator(const uninitialized_allocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible<U>::value) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

/// Floats that resize() does not zero.
using float_buffer = std::vector<float, uninitialized_allocator<float>>;

/// All parameters of a model as one contiguous float32 buffer, tensors in a fixed order.
struct weight_blob {
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  float_buffer data;  // tensors concatenated in `names` order
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
