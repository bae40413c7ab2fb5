#pragma once

// Moving weights between a model and a versioned snapshot. Torch-free header.
//
// Streams: on a GPU each role queues its work on a CUDA stream of its own (cuda_stream.hpp),
// so the trainer and the rollouters of one process are not ordered by a shared stream. A
// device snapshot therefore carries an event, recorded on the writer's stream after its copy;
// whoever reads it (a load, a cast, the copy to the host) first makes its stream wait for that
// event, and the caching allocator keeps the snapshot's memory until those reads are done.

#include <cstdint>

#include "runtime/model/weight_blob.hpp"

namespace asyncrl {

class CausalLMImpl;

/// Where a snapshot's elements live: host bytes (what checkpoints and nodes need) or one flat
/// tensor on the model's device. On a GPU the device snapshot is a device-to-device copy, and
/// a rollouter on the same GPU loads it with another; the host snapshot costs a copy to the
/// host and one back per version (PCIe, the end-to-end run's bottleneck: docs/benchmarks.md).
enum class snapshot_place : uint8_t { host, device };

/// Copies the model's parameters (ordered_parameters() order) into a new snapshot of `dtype`:
/// float32 for the trainer's master weights and checkpoints, bf16 for bf16 rollouters (the one
/// cast of a version, shared by every rollouter of the process). On a GPU the copy is queued on
/// the calling thread's current stream, which must be the one that wrote the parameters (the
/// trainer's, inside its stream_scope); a device snapshot records its event there.
weight_snapshot snapshot_weights(const CausalLMImpl& model, int64_t version,
                                 weight_dtype dtype = weight_dtype::float32,
                                 snapshot_place place = snapshot_place::host);

/// The same snapshot with host bytes (the same one when it has them already). From a GPU the
/// copy runs on a stream of its own after the snapshot's event: the host waits for the
/// writer's stream up to the snapshot and for the copy, never for the whole device.
weight_snapshot host_snapshot(const weight_snapshot& w);

/// True when the model's parameters are on a device other than the CPU: where a device
/// snapshot saves the round trip through the host.
bool on_accelerator(const CausalLMImpl& model);

/// The same snapshot in `dtype` (the same one, not a copy, when it already is). float32 ->
/// bf16 rounds to nearest even, as torch's casts do. A device snapshot is cast on the calling
/// thread's current stream, after the source's event; the cast gets its own.
weight_snapshot convert_snapshot(const weight_snapshot& w, weight_dtype dtype);

/// Loads a snapshot into the model, checking names and shapes. With `alias` on a CPU model
/// whose parameters have the snapshot's dtype, the parameters are pointed at the snapshot's
/// buffer (no copy; the caller keeps the snapshot alive and never writes the parameters:
/// rollouters; parameters packed by CausalLMImpl::pack_projections are copied); otherwise the
/// values are copied to the model's device and dtype (trainers, and GPU rollouters, whose captured
/// CUDA graphs read the parameters at fixed addresses). A device snapshot is read on the loading
/// thread's current stream (a rollouter's own), which first waits for the snapshot's event (the
/// trainer's copy; the host does not wait), and the snapshot's memory is not reused before the
/// reads are done, even if the trainer drops it. Throws std::runtime_error on a mismatch.
void load_snapshot(CausalLMImpl& model, const weight_snapshot& w, bool alias);

/// Sets torch's intra-op threads for the calling thread (for good: a later lazy init does not
/// override it) and records the OpenMP team's CPU clocks for compute regions
/// (runtime/common/cpu_time.hpp); n <= 0 leaves them.
void set_torch_threads(int n);

}  // namespace asyncrl
