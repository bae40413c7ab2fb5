#include "runtime/task/external_scorer.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <sstream>
#include <thread>

namespace asyncrl {

namespace {

using steady = std::chrono::steady_clock;

// Milliseconds left until `deadline`, rounded up (so that poll never spins on a 0 ms wait
// while time is left); 0 once it has passed.
int remaining_ms(steady::time_point deadline) {
  const auto left = deadline - steady::now();
  if (left <= steady::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

enum class io { ok, timeout, closed, error };

// Waits until `fd` is ready for `events` or the deadline passes.
io wait_for(int fd, short events, steady::time_point deadline) {
  for (;;) {
    const int ms = remaining_ms(deadline);
    if (ms == 0) return io::timeout;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, ms);
    if (n > 0) return io::ok;  // ready, or an error/hangup the next send/recv reports
    if (n < 0 && errno != EINTR) return io::error;
  }
}

io write_all(int fd, const char* p, size_t n, steady::time_point deadline, int* err) {
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (auto w = wait_for(fd, POLLOUT, deadline); w != io::ok) return w;
      continue;
    }
    if (k < 0 && (errno == EPIPE || errno == ECONNRESET)) return io::closed;
    *err = errno;
    return io::error;
  }
  return io::ok;
}

io read_exact(int fd, char* p, size_t n, steady::time_point deadline, int* err) {
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k == 0) return io::closed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (auto w = wait_for(fd, POLLIN, deadline); w != io::ok) return w;
      continue;
    }
    if (errno == ECONNRESET) return io::closed;
    *err = errno;
    return io::error;
  }
  return io::ok;
}

bool set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

std::string errno_text(int e) {
  return std::strerror(e);
}

std::string status_text(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);
    return "was killed by signal " + std::to_string(sig) +
           (name ? std::string(" (") + name + ")" : "");
  }
  return "ended (status " + std::to_string(status) + ")";
}

std::string seconds_text(double s) {
  std::ostringstream os;
  os << s << " s";
  return os.str();
}

// Waits up to `grace_s` for process `pid` to exit, without reaping it (its pid, and so its
// process group id, stays reserved until waitpid): 1 when it exited, 0 when it is still
// running, -1 when the kernel has no pidfd_open (then the caller kills it at once).
int exited_within(pid_t pid, double grace_s) {
#ifdef SYS_pidfd_open
  const int pfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pfd < 0) return -1;
  const auto deadline = steady::now() + std::chrono::duration_cast<steady::duration>(
                                            std::chrono::duration<double>(grace_s));
  const bool done = wait_for(pfd, POLLIN, deadline) == io::ok;
  ::close(pfd);
  return done ? 1 : 0;
#else
  (void)pid;
  (void)grace_s;
  return -1;
#endif
}

}  // namespace

const char* to_string(scorer_outcome o) {
  switch (o) {
    case scorer_outcome::ok:
      return "ok";
    case scorer_outcome::timeout:
      return "timeout";
    case scorer_outcome::crashed:
      return "crashed";
    case scorer_outcome::malformed:
      return "malformed";
    case scorer_outcome::unavailable:
      return "unavailable";
  }
  return "?";
}

std::vector<std::string> split_command(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string word; in >> word;)
    out.push_back(word);
  return out;
}

external_scorer::external_scorer(external_scorer_options opts) : opts_(std::move(opts)) {
  opts_.max_start_failures = std::max<int64_t>(1, opts_.max_start_failures);
}

external_scorer::~external_scorer() {
  stop();
}

std::string external_scorer::describe() const {
  if (!opts_.socket.empty()) return "socket '" + opts_.socket + "'";
  std::string cmd;
  for (const auto& w : opts_.command)
    cmd += (cmd.empty() ? "" : " ") + w;
  return "command '" + cmd + "'";
}

bool external_scorer::start(steady::time_point deadline, std::string* error) {
  if (!opts_.socket.empty()) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (opts_.socket.size() >= sizeof(addr.sun_path)) {
      *error = "cannot connect to " + describe() + ": the path is longer than " +
               std::to_string(sizeof(addr.sun_path) - 1) + " bytes";
      return false;
    }
    std::memcpy(addr.sun_path, opts_.socket.c_str(), opts_.socket.size() + 1);
    // A server being restarted has no socket file (ENOENT) or a stale one (ECONNREFUSED) for a
    // moment, and one with a full backlog answers EAGAIN: retry those with a doubling pause
    // (50 ms up to 1 s) until the call's deadline, so that a server back within timeout_s is
    // rejoined by the very call that found it gone. Retrying at once would burn through
    // max_start_failures in milliseconds.
    auto pause = std::chrono::milliseconds(50);
    const auto t0 = steady::now();
    for (int attempt = 1;; ++attempt) {
      // Non-blocking: a server whose backlog is full answers EAGAIN instead of blocking us.
      const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0) {
        *error = "socket(): " + errno_text(errno);
        return false;
      }
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
        fd_ = fd;
        break;
      }
      const int err = errno;
      ::close(fd);
      const bool transient = err == ENOENT || err == ECONNREFUSED || err == EAGAIN;
      if (!transient || steady::now() + pause >= deadline) {
        *error = "cannot connect to " + describe() + ": " + errno_text(err);
        if (attempt > 1)
          *error += " (" + std::to_string(attempt) + " attempts over " +
                    seconds_text(std::chrono::duration<double>(steady::now() - t0).count()) + ")";
        return false;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(1000));
    }
  } else {
    if (opts_.command.empty()) {
      *error = "no scorer command";
      return false;
    }
    // Everything the child needs is prepared before fork: after it, only async-signal-safe
    // calls until exec.
    std::vector<char*> argv;
    for (auto& w : opts_.command)
      argv.push_back(const_cast<char*>(w.c_str()));
    argv.push_back(nullptr);
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      *error = "socketpair(): " + errno_text(errno);
      return false;
    }
    int ep[2];  // exec error pipe: closed by a successful exec, else carries errno
    if (::pipe2(ep, O_CLOEXEC) != 0) {
      *error = "pipe2(): " + errno_text(errno);
      ::close(sv[0]);
      ::close(sv[1]);
      return false;
    }
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
      *error = "fork(): " + errno_text(errno);
      for (int fd : {sv[0], sv[1], ep[0], ep[1]})
        ::close(fd);
      return false;
    }
    if (pid == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the parent died before the prctl
      ::dup2(sv[1], STDIN_FILENO);              // dup2 clears FD_CLOEXEC on the copies
      ::dup2(sv[1], STDOUT_FILENO);
      sigset_t none;
      ::sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::signal(SIGPIPE, SIG_DFL);  // an ignored signal would stay ignored across exec
#ifdef SYS_close_range
      ::syscall(SYS_close_range, 3u, ~0u, 4u /* CLOSE_RANGE_CLOEXEC */);  // no leaked fds
#endif
      ::execvp(argv[0], argv.data());
      const int e = errno;
      [[maybe_unused]] auto n = ::write(ep[1], &e, sizeof e);
      ::_exit(127);
    }
    ::setpgid(pid, pid);  // also here, so that it holds before either side goes on
    ::close(sv[1]);
    ::close(ep[1]);
    int e = 0;
    ssize_t n;
    do {
      n = ::read(ep[0], &e, sizeof e);
    } while (n < 0 && errno == EINTR);
    ::close(ep[0]);
    if (n == static_cast<ssize_t>(sizeof e)) {
      ::close(sv[0]);
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      *error = "cannot run " + describe() + ": " + opts_.command[0] + ": " + errno_text(e);
      return false;
    }
    fd_ = sv[0];
    pid_ = pid;
    if (!set_nonblocking(fd_)) {
      *error = "fcntl(): " + errno_text(errno);
      end_process(0);
      return false;
    }
  }
  if (counts_.starts++ > 0) ++counts_.restarts;
  answered_ = false;
  return true;
}

std::string external_scorer::end_process(double grace_s) {
  std::string how;
  if (fd_ >= 0 && grace_s > 0) ::shutdown(fd_, SHUT_WR);  // EOF on the scorer's stdin
  if (pid_ > 0) {
    const int exited = grace_s > 0 ? exited_within(pid_, grace_s) : -1;
    // The whole group, also after a clean exit (helpers the scorer left behind). The leader is
    // not reaped yet, so the group id cannot have been reused.
    ::kill(-pid_, SIGKILL);
    int status = 0;
    pid_t r;
    do {
      r = ::waitpid(pid_, &status, 0);
    } while (r < 0 && errno == EINTR);
    how = r == pid_ ? status_text(status) : "could not be reaped: " + errno_text(errno);
    if (exited == 0) how = "did not exit within " + seconds_text(grace_s) + ", killed";
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  pid_ = -1;
  answered_ = false;
  return how;
}

void external_scorer::stop() noexcept {
  if (fd_ >= 0 || pid_ > 0) end_process(opts_.stop_grace_s);
}

void external_scorer::start_failed(const std::string& error) {
  ++counts_.start_failures;
  if (++failed_starts_in_a_row_ < opts_.max_start_failures) return;
  gave_up_ = true;
  give_up_reason_ = "external scorer " + describe() + ": " +
                    std::to_string(failed_starts_in_a_row_) +
                    " failed starts in a row (max_start_failures " +
                    std::to_string(opts_.max_start_failures) + "): giving up; last: " + error;
}

scorer_result external_scorer::fail(scorer_outcome o, std::string error) {
  switch (o) {
    case scorer_outcome::timeout:
      ++counts_.timeouts;
      break;
    case scorer_outcome::crashed:
      ++counts_.crashes;
      break;
    case scorer_outcome::malformed:
      ++counts_.malformed;
      break;
    case scorer_outcome::unavailable:
      ++counts_.unavailable;
      break;
    case scorer_outcome::ok:
      break;
  }
  scorer_result r;
  r.outcome = o;
  r.error = std::move(error);
  return r;
}

scorer_result external_scorer::score(const scorer_request& r) noexcept {
  try {
    ++counts_.calls;
    if (gave_up_) return fail(scorer_outcome::unavailable, give_up_reason_);
    const auto deadline = steady::now() + std::chrono::duration_cast<steady::duration>(
                                              std::chrono::duration<double>(opts_.timeout_s));
    const std::string frame = encode_scorer_request(r);
    if (frame.size() - 4 > kMaxScorerFrameBytes)
      return fail(scorer_outcome::malformed, "request for uid " + std::to_string(r.uid) + " is " +
                                                 std::to_string(frame.size() - 4) +
                                                 " bytes, over the frame cap; not sent");
    if (fd_ < 0) {
      std::string error;
      if (!start(deadline, &error)) {
        start_failed(error);
        return fail(scorer_outcome::unavailable, gave_up_ ? give_up_reason_ : error);
      }
    }
    const std::string who = "external scorer " + describe() +
                            (pid_ > 0 ? " (pid " + std::to_string(pid_) + ")" : std::string());
    const std::string uid = std::to_string(r.uid);
    // The stream ended before a whole answer: the process is gone (or leaving), the server
    // hung up. A process that never answered counts as a failed start.
    auto crashed = [&](const std::string& what) {
      const bool first = !answered_;
      const bool process = pid_ > 0;
      std::string how = end_process(opts_.stop_grace_s);
      std::string error =
          who + " " + (process ? how : "closed the connection") + " " + what + " uid " + uid;
      if (first) start_failed(error);
      return fail(scorer_outcome::crashed, error);
    };
    auto timed_out = [&](const char* what) {
      end_process(0);
      return fail(scorer_outcome::timeout,
                  who + " did not " + what + " uid " + uid + " within " +
                      seconds_text(opts_.timeout_s) + "; " +
                      (opts_.socket.empty() ? "killed it" : "closed the connection"));
    };
    auto malformed = [&](const std::string& why) {
      end_process(0);
      return fail(scorer_outcome::malformed,
                  who + " sent a malformed answer to uid " + uid + ": " + why + "; " +
                      (opts_.socket.empty() ? "killed it" : "closed the connection"));
    };
    int err = 0;
    switch (write_all(fd_, frame.data(), frame.size(), deadline, &err)) {
      case io::ok:
        break;
      case io::timeout:
        return timed_out("read the request for");
      case io::closed:
        return crashed("before reading the request for");
      case io::error:
        return crashed("(send: " + errno_text(err) + ") before reading the request for");
    }
    unsigned char header[4];
    switch (read_exact(fd_, reinterpret_cast<char*>(header), 4, deadline, &err)) {
      case io::ok:
        break;
      case io::timeout:
        return timed_out("answer");
      case io::closed:
        return crashed("before answering");
      case io::error:
        return crashed("(recv: " + errno_text(err) + ") before answering");
    }
    const uint32_t n = scorer_frame_length(header);
    if (n > kMaxScorerFrameBytes)
      return malformed("a frame of " + std::to_string(n) + " bytes, over the cap of " +
                       std::to_string(kMaxScorerFrameBytes));
    std::string body(n, '\0');
    switch (read_exact(fd_, body.data(), n, deadline, &err)) {
      case io::ok:
        break;
      case io::timeout:
        return timed_out("finish its answer to");
      case io::closed:
        return crashed("in the middle of its answer to");
      case io::error:
        return crashed("(recv: " + errno_text(err) + ") in its answer to");
    }
    auto decoded = decode_scorer_answer(body, r.uid);
    if (auto* why = std::get_if<std::string>(&decoded)) return malformed(*why);
    auto& a = std::get<scorer_answer>(decoded);
    answered_ = true;
    failed_starts_in_a_row_ = 0;
    ++counts_.ok;
    scorer_result out;
    out.score = a.score;
    out.info = std::move(a.info);
    return out;
  } catch (const std::exception& e) {  // bad_alloc: nothing else throws here
    end_process(0);
    return fail(scorer_outcome::crashed, std::string("external scorer: ") + e.what());
  }
}

}  // namespace asyncrl
