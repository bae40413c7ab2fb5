#pragma once

// The order in which a run visits its examples, epoch by epoch: a Fisher-Yates shuffle drawn
// from our own counter-based stream (rng_stream), so it is the same on every machine, in every
// mode, and a pure function of (n, seed, epoch).

#include <cstddef>
#include <cstdint>
#include <vector>

namespace asyncrl {

/// Which draws of the stream an epoch's shuffle uses. The RL prompt order and the SFT batch
/// order were written separately and number their draws differently; both are kept, so that
/// seeded runs keep their orders.
struct epoch_stream {
  uint64_t salt;          // the stream's second key: one per consumer
  bool stream_per_epoch;  // true: stream (seed, salt, epoch), the swap into slot i-1 draws i;
                          // false: stream (seed, salt, 0), draws numbered on across epochs
};

/// The controller's prompt order (`asyncrl train`).
inline constexpr epoch_stream kPromptOrder{0x10ade5, true};
/// The batch order of `asyncrl sft`.
inline constexpr epoch_stream kSftBatchOrder{0x5f7, false};

/// The order of n examples in epoch `epoch` (0, 1, ...): a permutation of 0 .. n-1 by
/// Fisher-Yates from the identity, for i = n .. 2 swapping slot i-1 with slot draw % i.
std::vector<size_t> epoch_order(size_t n, uint64_t seed, int64_t epoch,
                                const epoch_stream& stream = kPromptOrder);

}  // namespace asyncrl
