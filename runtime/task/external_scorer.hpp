#pragma once

// A client of an external scorer: a process started from a command line that reads request
// frames on its stdin and writes answer frames on its stdout, or a server listening on a Unix
// socket. The protocol (frames, keys, types) is in runtime/task/scorer_frames.hpp and
// docs/reward-protocol.md. Every call is bounded by a timeout; a scorer that times out, dies or
// answers something malformed scores 0 with that outcome, and is replaced at the next call (a
// process is killed, a connection closed, so the stream can never go out of sync).
//
// The process, the stream and their hygiene (process group, PR_SET_PDEATHSIG, MSG_NOSIGNAL,
// always reaped) are runtime/common/framed_child.hpp's, shared with the external environment
// client. Torch-free and CAF-free. Not thread-safe: one instance per thread.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/common/framed_child.hpp"
#include "runtime/task/scorer_frames.hpp"

namespace asyncrl {

/// How one call ended.
enum class scorer_outcome {
  ok,           // answered in time with a well-formed answer
  timeout,      // no whole answer within the timeout: the process was killed / connection closed
  crashed,      // the process exited or closed the stream before answering
  malformed,    // an answer that is not a valid answer frame, or for another uid
  unavailable,  // no scorer: it could not be started (or connected to), or the scorer gave up
};
const char* to_string(scorer_outcome o);

struct scorer_result {
  double score = 0.0;  // 0 unless ok
  scorer_outcome outcome = scorer_outcome::ok;
  std::string info;   // the answer's `info`, rendered as text
  std::string error;  // what went wrong; empty when ok
};

/// Counters of one scorer client, from its construction.
struct scorer_counts {
  int64_t calls = 0;
  int64_t ok = 0;
  int64_t timeouts = 0;
  int64_t crashes = 0;
  int64_t malformed = 0;
  int64_t unavailable = 0;
  int64_t starts = 0;          // processes started or connections opened
  int64_t restarts = 0;        // starts after the first
  int64_t start_failures = 0;  // starts that failed (exec or connect error, or the process
                               // ended before its first answer)
};

struct external_scorer_options {
  std::vector<std::string> command;  // argv of the scorer process (argv[0] is looked up in PATH)
  std::string socket;                // or: the path of a scorer server's Unix socket
  double timeout_s = 30;             // per call, start-up of a new process included
  int64_t max_start_failures = 3;    // failed starts in a row before the client gives up
  double stop_grace_s = 1;           // at stop: how long the process may take to exit on EOF
};

class external_scorer {
 public:
  explicit external_scorer(external_scorer_options opts);
  ~external_scorer();
  external_scorer(const external_scorer&) = delete;
  external_scorer& operator=(const external_scorer&) = delete;

  /// Sends `r` and waits up to timeout_s for its answer; never throws. Starts (or connects to)
  /// the scorer first when none is running. After max_start_failures failed starts in a row
  /// every call answers `unavailable` at once (gave_up()): no retry loop can spin.
  scorer_result score(const scorer_request& r) noexcept;

  /// Changes timeout_s from the next call on.
  void set_timeout(double seconds) { opts_.timeout_s = seconds; }

  const scorer_counts& counts() const { return counts_; }
  bool gave_up() const { return gave_up_; }
  /// Why it gave up (names the scorer and the last start error).
  const std::string& give_up_reason() const { return give_up_reason_; }
  /// The running scorer process, or -1 (none, or socket mode).
  pid_t pid() const { return child_.pid(); }
  /// "command '...'" or "socket '...'".
  std::string describe() const { return child_.describe(); }

  /// Ends the current scorer: closes its stdin (EOF) and gives it stop_grace_s to exit, then
  /// SIGKILLs its process group; always reaps it. A socket connection is just closed.
  void stop() noexcept;

 private:
  // Socket mode retries a refused connect with a growing pause until `deadline`.
  bool start(std::chrono::steady_clock::time_point deadline, std::string* error);
  // Kills the process group at once (grace 0) or after waiting up to `grace_s` for an exit;
  // reaps; closes the stream. Returns how the process ended ("exited with status 3").
  std::string end_process(double grace_s);
  void start_failed(const std::string& error);
  scorer_result fail(scorer_outcome o, std::string error);

  external_scorer_options opts_;
  framed_child child_;
  bool answered_ = false;  // the current process answered at least once
  int64_t failed_starts_in_a_row_ = 0;
  bool gave_up_ = false;
  std::string give_up_reason_;
  scorer_counts counts_;
};

}  // namespace asyncrl
