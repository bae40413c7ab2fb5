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

/// Bytes that resize() does not zero (operator new's alignment, enough for float32 and bf16).
using byte_buffer = std::vector<unsigned char, uninitialized_allocator<unsigned char>>;

/// The element type of a snapshot: float32 (the trainer's master weights, checkpoints) or
/// bf16 (what bf16 rollouters compute with: cast once per version, half the bytes to move).
enum class weight_dtype : uint8_t { float32, bf16 };
const char* to_string(weight_dtype d);
inline size_t element_size(weight_dtype d) {
  return d == weight_dtype::bf16 ? 2 : 4;
}

/// A snapshot's tensors as one flat tensor on the model's device, with the event its readers
/// wait for (defined in weight_sync.cpp, which holds the torch code): an in-process version on
/// a GPU never crosses to the host.
struct device_weights;

/// All parameters of a model as one contiguous buffer, tensors in a fixed order.
struct weight_blob {
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  weight_dtype dtype = weight_dtype::float32;
  byte_buffer data;  // tensors concatenated in `names` order, little-endian `dtype` elements
  // Instead of `data` (which stays empty): the same elements in a device tensor. Whatever
  // needs host bytes (packing for a node, a checkpoint) goes through host_snapshot() first.
  std::shared_ptr<const device_weights> device;
  int64_t device_numel = 0;

  bool on_device() const { return device != nullptr; }
  int64_t bytes() const {
    return on_device() ? device_numel * static_cast<int64_t>(element_size(dtype))
                       : static_cast<int64_t>(data.size());
  }
  int64_t numel() const { return bytes() / static_cast<int64_t>(element_size(dtype)); }
  /// Room for `numel` elements of `dtype`, uninitialized.
  void resize(int64_t numel) { data.resize(static_cast<size_t>(numel) * element_size(dtype)); }
  /// The elements of a float32 blob (std::logic_error for another dtype).
  float* floats();
  const float* floats() const;
};

struct weight_snapshot {
  int64_t version = 0;
  std::shared_ptr<const weight_blob> blob;
};

/// msgpack map {"version", "names", "shapes", "dtype" ("float32" or "bf16"), "data" (bin,
/// little-endian elements)}. A map without "dtype" is float32 (what older senders wrote).
/// A device snapshot must be copied to the host first (host_snapshot, weight_sync.hpp).
std::vector<char> pack_weights(const weight_snapshot& w);
/// Validates names, shapes and the data size; throws std::runtime_error on bad input.
weight_snapshot unpack_weights(const char* data, size_t size);

}  // namespace asyncrl
