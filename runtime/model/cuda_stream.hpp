#pragma once

// Each role's own CUDA stream, and events that order work between streams. Two roles on one GPU
// (the trainer, the rollouters of the process) each queue their kernels on a stream of their
// own, so a host wait of one role (a `.cpu()`, an `.item()`, a stream's synchronize) waits for
// that role's kernels only; a device snapshot carries an event that orders a reader after the
// trainer's copy (weight_sync.hpp). CUDA-aware only in CUDA builds of libtorch
// (ASYNCRL_TORCH_CUDA, cuda_stream.cpp); elsewhere, and for a CPU device, every call is a no-op.
// Pulls in nothing of torch.

#include <memory>
#include <string>

namespace asyncrl {

/// A CUDA stream that one user has to itself (a role, a graph capture), or none. The stream is
/// created for the process (non-blocking: it does not wait for the legacy default stream, nor
/// that one for it) and goes back to a free list when its last copy goes, never destroyed: the
/// caching allocator may still record events on it for blocks it read (recordStream). It is
/// not one of c10's pool streams, which are handed out round-robin: a pool stream could be
/// the one a generator is capturing a graph on, and a role's kernels would be captured.
class own_stream {
 public:
  /// None: a scope of it leaves the thread's current stream as it is.
  own_stream() = default;
  /// A stream of its own on `device` when that is a CUDA device ("cuda", "cuda:1") and this
  /// build has CUDA; none for "cpu" or any other device. Throws std::runtime_error for a CUDA
  /// device that this process cannot use.
  static own_stream for_device(const std::string& device);
  /// The same for CUDA device `index`; none for a negative index or in a build without CUDA.
  static own_stream on_device(int index);

  /// Whether there is a stream (false on the CPU).
  bool active() const { return claim_ != nullptr; }
  /// Its CUDA device's index; -1 when none.
  int device() const;
  /// Waits (host) for the work queued on this stream only, not the device's; a no-op when none.
  void synchronize() const;

  struct claim;

 private:
  friend class stream_scope;
  std::shared_ptr<const claim> claim_;
};

/// While alive, `s` (and its device) is the calling thread's current CUDA stream; the previous
/// ones come back after. A no-op for no stream. CAF runs an actor's handlers on whichever
/// scheduler thread is free, so a role opens one in every handler that queues GPU work.
class stream_scope {
 public:
  explicit stream_scope(const own_stream& s);
  ~stream_scope();
  stream_scope(const stream_scope&) = delete;
  stream_scope& operator=(const stream_scope&) = delete;

 private:
  struct guard;
  std::unique_ptr<guard> guard_;
};

/// A point in one stream's queued work (a CUDA event): what was queued on that stream before
/// record() is done when the event is. Empty on the CPU, where every wait is a no-op. Copies
/// share the one event.
class stream_event {
 public:
  /// Empty: waits for nothing, done.
  stream_event() = default;
  /// An event recorded now on the calling thread's current stream of CUDA device `index`; empty
  /// for a negative index or in a build without CUDA.
  static stream_event record(int index);

  bool empty() const { return impl_ == nullptr; }
  /// The calling thread's current stream on the event's device waits for it on the device (the
  /// host does not wait).
  void block_current() const;
  /// Waits (host) for the event: for the recording stream's work up to the record, nothing
  /// else of the device.
  void synchronize() const;
  /// Whether that work is done (true when empty).
  bool done() const;

  struct impl;

 private:
  std::shared_ptr<impl> impl_;
};

}  // namespace asyncrl
