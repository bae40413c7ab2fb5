#pragma once

// Which part of the flattened parameters each data-parallel rank owns when the optimizer state
// is sharded (ZeRO-1/2 style). Torch-free.
//
// The parameters, flattened in order, are one vector of T elements. Rank r owns about
// [T*r/W, T*(r+1)/W), with each inner boundary moved down to a multiple of kShardAlign
// elements from its parameter's start, so that a shard's elementwise AdamW kernels group the
// elements into SIMD lanes as the unsharded kernels do.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace asyncrl {

inline constexpr int64_t kShardAlign = 64;

/// One piece of a rank's shard: `length` elements of parameter `param` (flattened) from `begin`.
struct shard_segment {
  size_t param = 0;
  int64_t begin = 0;
  int64_t length = 0;
};

struct shard_layout {
  std::vector<std::vector<shard_segment>> ranks;  // per rank, in parameter order
  std::vector<int64_t> elements;                  // per rank: the sum of its segments' lengths
  int64_t max_elements() const;
};

/// The layout of parameters with `numels` elements over `world` ranks. Every element is in
/// exactly one segment; a rank may own nothing (more ranks than elements).
shard_layout make_shard_layout(const std::vector<int64_t>& numels, int world);

}  // namespace asyncrl
