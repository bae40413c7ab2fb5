#pragma once

// A client of an external environment (env.kind=external, docs/env-protocol.md): a process
// started from a command line that reads request frames on its stdin and writes answer frames
// on its stdout, or a server listening on a Unix socket. Every call is bounded by a timeout; an
// environment that times out, dies, answers garbage or floods is counted, and is replaced at the
// next call (a process is killed, a connection closed, so the stream can never go out of step).
// A replaced process has lost the state of every episode it held: the caller replays an
// episode whose process changed (knows() says) by re-issuing reset and its recorded steps.
//
// The process and stream hygiene is runtime/common/framed_child.hpp's. Torch-free and CAF-free.
// Not thread-safe: one instance per thread.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "runtime/common/framed_child.hpp"
#include "runtime/tools/env_frames.hpp"

namespace asyncrl {

/// How one call ended.
enum class env_outcome {
  ok,           // a well-formed answer for this episode arrived in time
  timeout,      // no whole answer within the timeout: the process was killed / connection closed
  crashed,      // the process exited or closed the stream before answering
  malformed,    // an answer that is not a valid answer frame, or for another episode
  flood,        // an observation over max_observation_bytes, or a frame over its cap
  unavailable,  // no environment: it could not be started (or connected to), or the client
                // gave up
};
const char* to_string(env_outcome o);

/// One call's result. Everything but `outcome` and `error` is the answer's, when ok.
struct env_result {
  env_outcome outcome = env_outcome::ok;
  std::string observation;  // step: the environment's turn; reset: its optional first one
  bool done = false;        // step: the episode is over
  bool has_reward = false;
  double reward = 0;
  std::string info;   // the answer's `info`, rendered as text
  std::string error;  // what went wrong; empty when ok
};

/// Counters of one client, from its construction. close() is not a call.
struct env_counts {
  int64_t calls = 0;
  int64_t ok = 0;
  int64_t timeouts = 0;
  int64_t crashes = 0;
  int64_t malformed = 0;
  int64_t floods = 0;
  int64_t unavailable = 0;
  int64_t starts = 0;          // processes started or connections opened
  int64_t restarts = 0;        // starts after the first
  int64_t start_failures = 0;  // starts that failed (exec or connect error, or the process
                               // ended before its first answer)
};

struct external_env_options {
  std::vector<std::string> command;  // argv of the environment (argv[0] is looked up in PATH)
  std::string socket;                // or: the path of an environment server's Unix socket
  double timeout_s = 30;             // per call, start-up of a new process included
  int64_t max_start_failures = 3;    // failed starts in a row before the client gives up
  double stop_grace_s = 1;           // at stop: how long the process may take to exit on EOF
  int64_t max_observation_bytes = kDefaultMaxObservationBytes;  // longer: flood
};

class external_env {
 public:
  explicit external_env(external_env_options opts);
  ~external_env();
  external_env(const external_env&) = delete;
  external_env& operator=(const external_env&) = delete;

  /// Starts episode `episode` (or starts it over). Starts (or connects to) the environment
  /// first when none is running. Never throws.
  env_result reset(uint64_t episode, const std::string& task, const std::string& ground_truth,
                   uint64_t seed) noexcept;

  /// Sends model turn `turn` (1-based) of `episode` and waits for the environment's answer.
  /// Never throws.
  env_result step(uint64_t episode, int32_t turn, const std::string& text) noexcept;

  /// Tells the environment that `episode` is over (finished or abandoned); no answer. Sent only
  /// to a running environment that knows the episode; a failed send ends the process (the next
  /// call starts another) and is not counted.
  void close(uint64_t episode) noexcept;

  /// Whether the running process (connection) has reset `episode` and not closed it since:
  /// false after any restart, so the caller knows to replay the episode.
  bool knows(uint64_t episode) const { return known_.count(episode) > 0; }

  /// Changes timeout_s from the next call on.
  void set_timeout(double seconds) { opts_.timeout_s = seconds; }

  const env_counts& counts() const { return counts_; }
  /// After max_start_failures failed starts in a row every call answers `unavailable` at once:
  /// no retry loop can spin.
  bool gave_up() const { return gave_up_; }
  /// Why it gave up (names the environment and the last start error).
  const std::string& give_up_reason() const { return give_up_reason_; }
  /// "command '...'" or "socket '...'".
  std::string describe() const { return child_.describe(); }
  /// The running environment process, or -1 (none, or socket mode).
  pid_t pid() const { return child_.pid(); }

  /// Ends the current environment: closes its stdin (EOF), gives it stop_grace_s to exit, then
  /// SIGKILLs its process group; always reaps it. A socket connection is just closed.
  void stop() noexcept;

 private:
  env_result call(const env_request& r) noexcept;
  std::string end_process(double grace_s);
  void start_failed(const std::string& error);
  env_result fail(env_outcome o, std::string error);

  external_env_options opts_;
  framed_child child_;
  bool answered_ = false;               // the current process answered at least once
  std::unordered_set<uint64_t> known_;  // episodes the current process has reset
  int64_t failed_starts_in_a_row_ = 0;
  bool gave_up_ = false;
  std::string give_up_reason_;
  env_counts counts_;
};

}  // namespace asyncrl
