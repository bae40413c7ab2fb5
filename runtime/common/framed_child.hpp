#pragma once

// A peer that speaks length-prefixed frames over one byte stream: a process started from a
// command line (its stdin and stdout are the two directions of one socketpair) or a server
// listening on a Unix socket. A frame is a 4-byte big-endian unsigned length, then that many
// bytes. The external scorer (runtime/task/external_scorer.hpp) and the external environment
// (runtime/tools/external_env.hpp) are both built on it; what the bytes mean is theirs.
//
// A started process runs in its own process group, gets SIGKILL when the thread that started it
// ends (PR_SET_PDEATHSIG: we never leave one behind), inherits no file descriptor but its
// standard streams, and is always reaped. Writes use send(MSG_NOSIGNAL), so a dead peer is an
// EPIPE, never a SIGPIPE, and the process's signal dispositions are untouched. Every read and
// write is bounded by a deadline. Torch-free and CAF-free. Not thread-safe.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace asyncrl {

/// How one read or write on the stream ended.
enum class frame_io {
  ok,
  timeout,   // the deadline passed first
  closed,    // end of stream, EPIPE or ECONNRESET: the peer is gone
  error,     // another errno (in frame_read::err / the err out-parameter)
  oversize,  // a frame header announced more than the cap; the body was not read
};

/// What read_frame got.
struct frame_read {
  frame_io io = frame_io::ok;
  bool in_body = false;  // the header had arrived when it stopped (not ok)
  uint32_t length = 0;   // the length the header announced (when it arrived)
  int err = 0;           // errno, for frame_io::error
};

/// The 4-byte big-endian header of a body of `n` bytes.
std::string frame_header(uint32_t n);

/// The body length a 4-byte header announces.
uint32_t frame_length(const unsigned char* header);

/// Splits a command line on whitespace (no quoting, no shell).
std::vector<std::string> split_command(const std::string& line);

/// "0.3 s": a duration for messages.
std::string seconds_text(double s);

class framed_child {
 public:
  using clock = std::chrono::steady_clock;

  /// `noun` names the peer in messages ("no scorer command"). Exactly one of `command` (argv,
  /// argv[0] looked up in PATH) and `socket` (a path) is used; `socket` wins when both are set.
  framed_child(std::vector<std::string> command, std::string socket, std::string noun);
  ~framed_child();  // ends the peer at once (no grace)
  framed_child(const framed_child&) = delete;
  framed_child& operator=(const framed_child&) = delete;

  /// Starts the process, or connects to the socket. Socket mode retries a missing socket file,
  /// a refused connect and a full backlog with a pause doubling from 50 ms to 1 s until
  /// `deadline`. False with `*error` set ("cannot run command '...': x: No such file or
  /// directory") when it could not.
  bool start(clock::time_point deadline, std::string* error);

  /// Whether a stream is open (a process started or a connection made, and not ended).
  bool running() const { return fd_ >= 0; }

  /// Writes all of `bytes` (typically a whole frame) before `deadline`. `*err` gets the errno
  /// of frame_io::error.
  frame_io write(std::string_view bytes, clock::time_point deadline, int* err);

  /// Reads one frame's body into `*body` before `deadline`. A header announcing more than
  /// `max_bytes` is frame_io::oversize and its body is left unread (so the stream is out of
  /// step: end the peer).
  frame_read read_frame(std::string* body, uint32_t max_bytes, clock::time_point deadline);

  /// Ends the peer: with grace_s > 0, shuts down our writing side (EOF on the process's stdin)
  /// and waits up to grace_s for it to exit; then SIGKILLs its process group and reaps it. A
  /// connection is just closed. Returns how the process ended ("exited with status 3", "did not
  /// exit within 1 s, killed"); "" for a connection or when nothing ran.
  std::string end(double grace_s) noexcept;

  /// The running process, or -1 (none, or socket mode).
  pid_t pid() const { return pid_; }
  bool socket_mode() const { return !socket_.empty(); }
  /// "command '...'" or "socket '...'".
  std::string describe() const;

 private:
  bool connect_socket(clock::time_point deadline, std::string* error);
  bool spawn(std::string* error);

  std::vector<std::string> command_;
  std::string socket_;
  std::string noun_;
  int fd_ = -1;     // our end of the stream
  pid_t pid_ = -1;  // command mode: the process (and its process group)
};

}  // namespace asyncrl
