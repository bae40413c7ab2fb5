#pragma once

// Weights on their way to another node: cut into chunks, reassembled in order and checked
// against the SHA-256 of the whole before anything may use them. A node never loads a partial
// or damaged version. Plain C++ (no CAF, no torch); messages/cluster.hpp carries the pieces.

#include <cstdint>
#include <string>
#include <vector>

namespace asyncrl {

/// SHA-256 of `n` bytes, lower-case hex.
std::string sha256_hex(const char* data, size_t n);

/// Where chunk `index` of `total` bytes starts and how long it is, for chunks of `chunk_bytes`.
struct chunk_span {
  int64_t offset = 0;
  int64_t size = 0;
};
int32_t chunk_count(int64_t total, int64_t chunk_bytes);
chunk_span chunk_at(int64_t total, int64_t chunk_bytes, int32_t index);

/// Collects the chunks of one version at a time. A chunk of a newer version starts over (the
/// sender moved on); one of an older version, out of order, or inconsistent is an error.
class weight_assembler {
 public:
  /// Adds a chunk. Returns "" or why it was refused (the caller answers the sender with it).
  std::string add(int64_t version, int32_t index, int32_t count, int64_t offset, int64_t total,
                  const std::string& digest, const std::vector<char>& bytes);
  /// The version being assembled, and whether all of it arrived and its digest matched.
  int64_t version() const { return version_; }
  bool complete() const { return complete_; }
  int64_t received() const { return static_cast<int64_t>(data_.size()); }
  /// The complete bytes (empties the assembler).
  std::vector<char> take();

 private:
  int64_t version_ = -1;
  int32_t next_ = 0, count_ = 0;
  int64_t total_ = 0;
  std::string digest_;
  std::vector<char> data_;
  bool complete_ = false;
};

}  // namespace asyncrl
