#pragma once

// One side of a weights link (cluster.weights_transport=collective, docs/cluster.md): a c10d
// group of two processes, the trainer's (rank 0, the sender) and one `asyncrl worker`'s (rank 1,
// the receiver), over which each weight version's packed bytes are broadcast in buckets.
//
// Why a group per worker rather than one group of every process: workers join and leave at any
// time (a kill, a partition, a rejoin), and a c10d group has a fixed size. A link of two forms
// when its worker joins and dies with it, without touching the others. Over Gloo the broadcast
// of a group of N is N-1 sends from the root anyway, so nothing is lost on CPUs; on GPUs a
// single NCCL group would pipeline (docs/scaling.md says so).
//
// Every blocking c10d call runs on the link's own thread, never on the caller's (an actor):
// calls are queued and their outcome comes back through a callback, on that thread. Every call
// is bounded by the link's timeout. After an error the link is dead and every later call fails
// with that error. The destructor waits for the call in progress (at most the timeout).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace asyncrl {

struct weight_link_options {
  std::string host = "127.0.0.1";  // the sender's address: its store listens there
  int port = 0;                    // the receiver: the sender's port
  bool sender = true;
  std::chrono::milliseconds timeout{30000};  // the rendezvous and every broadcast
  int64_t bucket_bytes = 4 << 20;            // bytes per broadcast (several in flight)
  std::string peer = "a worker";             // who is at the other end (errors name it)
};

class weight_link {
 public:
  /// "" or why not; called on the link's thread.
  using done_fn = std::function<void(const std::string& error)>;
  using received_fn = std::function<void(const std::string& error, std::vector<char> bytes)>;

  /// Starts forming the group on the link's thread; `joined` gets its outcome. The sender
  /// returns once its store listens (port()), or once that failed (then `joined` has the error).
  weight_link(weight_link_options o, done_fn joined);
  ~weight_link();
  weight_link(const weight_link&) = delete;
  weight_link& operator=(const weight_link&) = delete;

  /// The sender's store port (0 if it could not listen).
  int port() const;

  /// Sender: broadcasts `bytes` to the receiver, after the calls queued before.
  void send(std::shared_ptr<const std::vector<char>> bytes, done_fn done);
  /// Receiver: `total` bytes from the sender, after the calls queued before.
  void receive(int64_t total, received_fn done);

  /// No call in progress or queued: destroying the link does not wait.
  bool idle() const;

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace asyncrl
