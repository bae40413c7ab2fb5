#pragma once

// Moving weights between a model and a versioned snapshot. Torch-free header.

#include <cstdint>

#include "runtime/model/weight_blob.hpp"

namespace asyncrl {

class CausalLMImpl;

/// Copies the model's parameters (ordered_parameters() order) into a new snapshot of `dtype`:
/// float32 for the trainer's master weights and checkpoints, bf16 for bf16 rollouters (the one
/// cast of a version, shared by every rollouter of the process).
weight_snapshot snapshot_weights(const CausalLMImpl& model, int64_t version,
                                 weight_dtype dtype = weight_dtype::float32);

/// The same snapshot in `dtype` (the same one, not a copy, when it already is). float32 ->
/// bf16 rounds to nearest even, as torch's casts do.
weight_snapshot convert_snapshot(const weight_snapshot& w, weight_dtype dtype);

/// Loads a snapshot into the model, checking names and shapes. With `alias` on a CPU model
/// whose parameters have the snapshot's dtype, the parameters are pointed at the snapshot's
/// buffer (no copy; the caller keeps the snapshot alive and never writes the parameters:
/// rollouters); otherwise the values are copied to the model's device and dtype (trainers).
/// Throws std::runtime_error on a mismatch.
void load_snapshot(CausalLMImpl& model, const weight_snapshot& w, bool alias);

/// Sets torch's intra-op threads for the calling thread (for good: a later lazy init does not
/// override it) and records the OpenMP team's CPU clocks for compute regions
/// (runtime/common/cpu_time.hpp); n <= 0 leaves them.
void set_torch_threads(int n);

}  // namespace asyncrl
