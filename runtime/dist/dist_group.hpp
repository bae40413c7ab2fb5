#pragma once

// A data-parallel process group over PyTorch's c10d: a TCPStore at rank 0's host for the
// rendezvous and a Gloo group for the collectives (CPU tensors). c10d is the data plane only;
// who is in the run, versions and faults stay with CAF. Every operation is bounded by the
// group's timeout: a rank that never joins, dies or stops answering turns into a dist_error
// naming the operation, never a hang. After any error the group is dead (c10d cannot resume a
// failed Gloo group): callers fail the run or rebuild every rank's group.

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace asyncrl {

/// A collective or the rendezvous failed: a peer is missing, dead, or too slow.
struct dist_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct dist_options {
  std::string host = "127.0.0.1";  // rank 0's address: the TCPStore listens there
  int port = 0;                    // 0 (rank 0 only): any free port, reported by on_listening
  int rank = 0;
  int world = 1;
  std::chrono::milliseconds timeout{60000};  // the rendezvous and every collective
  std::string prefix = "asyncrl";            // keys of this group in the store
  std::string name = "data-parallel";  // what its errors call it ("data-parallel rank 1 of 2")
  /// Polled while the rendezvous waits for the other ranks: true gives up at once (the owner
  /// is going away). Empty: wait for the timeout.
  std::function<bool()> abandoned;
};

enum class reduce_kind { sum, max };

/// A collective issued and not yet waited for (dist_group::allreduce_start). wait() blocks until
/// it is done, bounded by the group's timeout, and throws dist_error naming the group and the
/// operation. A work that is destroyed unwaited waits first: its tensor must outlive the
/// transfer. Move-only.
class dist_work {
 public:
  struct state;
  dist_work();
  explicit dist_work(std::unique_ptr<state> s);
  dist_work(dist_work&&) noexcept;
  dist_work& operator=(dist_work&&) noexcept;
  ~dist_work();
  bool pending() const { return s_ != nullptr; }
  void wait();

 private:
  void settle() noexcept;  // waits, ignoring errors
  std::unique_ptr<state> s_;
};

class dist_group;

/// The first half of joining a group: the store is up (rank 0) or reached (the others) and this
/// rank registered; the group is not formed. Rank 0 can start or admit the other ranks between
/// the two halves, knowing the port.
class dist_rendezvous {
 public:
  /// Throws dist_error when the store cannot be started or reached.
  static std::unique_ptr<dist_rendezvous> open(const dist_options& o);
  ~dist_rendezvous();
  dist_rendezvous(const dist_rendezvous&) = delete;
  dist_rendezvous& operator=(const dist_rendezvous&) = delete;
  int port() const { return port_; }
  /// Waits for every rank to register, then forms the Gloo group: its endpoint on this
  /// machine's address toward the store (loopback when the store is on loopback). Throws
  /// dist_error naming the ranks that did not join within the timeout. Once.
  std::unique_ptr<dist_group> form();

 private:
  struct impl;
  explicit dist_rendezvous(std::unique_ptr<impl> p, int port);
  std::unique_ptr<impl> impl_;
  int port_ = 0;
};

class dist_group {
 public:
  /// Joins the group: rank 0 starts the store (calling on_listening with its port before it
  /// waits for the others), every rank registers, then the Gloo group forms. Throws dist_error
  /// naming the ranks that did not join within the timeout. dist_rendezvous::open, then form().
  static std::unique_ptr<dist_group> connect(
      const dist_options& o, const std::function<void(int port)>& on_listening = {});
  ~dist_group();
  dist_group(const dist_group&) = delete;
  dist_group& operator=(const dist_group&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }
  int port() const { return port_; }

  /// In place over contiguous tensors, one collective each, all issued before the first wait.
  /// For a few small tensors (the step's counts); gradients go in grad_reducer's buckets.
  void allreduce(std::vector<at::Tensor>& tensors, reduce_kind op);
  /// Issues an in-place allreduce of one contiguous tensor and returns without waiting, so that
  /// the caller can go on computing while Gloo's threads move it (grad_reducer.hpp overlaps
  /// the gradients' reduction with the backward this way). Every rank must issue the same
  /// collectives in the same order.
  dist_work allreduce_start(at::Tensor flat, reduce_kind op);
  /// Every tensor from `root` into the same tensors of the other ranks (shapes must agree).
  void broadcast(std::vector<at::Tensor>& tensors, int root);
  /// Each rank's `mine` (1-D, the same length on every rank), in rank order.
  std::vector<at::Tensor> allgather(const at::Tensor& mine);
  void barrier();
  /// `bytes` from `root` to every rank (resized on the others). Collective.
  void broadcast_bytes(std::string& bytes, int root);

  /// The rendezvous store as a small key-value channel (rank 0 holds it): commands from rank 0
  /// to the others. fetch waits up to `wait` and returns nothing if the key is still absent;
  /// it throws dist_error when the store is gone (rank 0's process ended).
  void post(const std::string& key, const std::string& bytes);
  std::optional<std::string> fetch(const std::string& key, std::chrono::milliseconds wait);
  void erase(const std::string& key);

 private:
  friend class dist_rendezvous;
  struct impl;
  dist_group(std::unique_ptr<impl> p, int rank, int world, int port);
  std::unique_ptr<impl> impl_;
  int rank_ = 0, world_ = 1, port_ = 0;
};

}  // namespace asyncrl
