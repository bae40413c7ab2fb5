#pragma once

// How a step's micro-batches are split over the data-parallel ranks. Torch-free.

#include <cstdint>
#include <vector>

namespace asyncrl {

/// The rank of each micro-batch, from their token counts: largest first (ties: lower index),
/// each to the rank with the fewest tokens so far (ties: lower rank). Deterministic, so every
/// rank computes the same assignment; the heaviest rank carries at most the mean plus the
/// largest micro-batch. The update does not depend on it (the gradients are summed).
std::vector<int> assign_by_tokens(const std::vector<int64_t>& tokens, int world);

}  // namespace asyncrl
