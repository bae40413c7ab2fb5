#include "runtime/common/framed_child.hpp"

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
#include <climits>
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

// Waits until `fd` is ready for `events` or the deadline passes.
frame_io wait_for(int fd, short events, steady::time_point deadline) {
  for (;;) {
    const int ms = remaining_ms(deadline);
    if (ms == 0) return frame_io::timeout;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, ms);
    if (n > 0) return frame_io::ok;  // ready, or an error/hangup the next send/recv reports
    if (n < 0 && errno != EINTR) return frame_io::error;
  }
}

frame_io read_exact(int fd, char* p, size_t n, steady::time_point deadline, int* err) {
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k == 0) return frame_io::closed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (auto w = wait_for(fd, POLLIN, deadline); w != frame_io::ok) return w;
      continue;
    }
    if (errno == ECONNRESET) return frame_io::closed;
    *err = errno;
    return frame_io::error;
  }
  return frame_io::ok;
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

// Waits up to `grace_s` for process `pid` to exit, without reaping it (its pid, and so its
// process group id, stays reserved until waitpid): 1 when it exited, 0 when it is still
// running, -1 when the kernel has no pidfd_open (then the caller kills it at once).
int exited_within(pid_t pid, double grace_s) {
#ifdef SYS_pidfd_open
  const int pfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pfd < 0) return -1;
  const auto deadline = steady::now() + std::chrono::duration_cast<steady::duration>(
                                            std::chrono::duration<double>(grace_s));
  const bool done = wait_for(pfd, POLLIN, deadline) == frame_io::ok;
  ::close(pfd);
  return done ? 1 : 0;
#else
  (void)pid;
  (void)grace_s;
  return -1;
#endif
}

}  // namespace

std::string frame_header(uint32_t n) {
  std::string h(4, '\0');
  h[0] = static_cast<char>((n >> 24) & 0xff);
  h[1] = static_cast<char>((n >> 16) & 0xff);
  h[2] = static_cast<char>((n >> 8) & 0xff);
  h[3] = static_cast<char>(n & 0xff);
  return h;
}

uint32_t frame_length(const unsigned char* h) {
  return (uint32_t{h[0]} << 24) | (uint32_t{h[1]} << 16) | (uint32_t{h[2]} << 8) | uint32_t{h[3]};
}

std::vector<std::string> split_command(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string word; in >> word;)
    out.push_back(word);
  return out;
}

std::string seconds_text(double s) {
  std::ostringstream os;
  os << s << " s";
  return os.str();
}

framed_child::framed_child(std::vector<std::string> command, std::string socket, std::string noun)
    : command_(std::move(command)), socket_(std::move(socket)), noun_(std::move(noun)) {}

framed_child::~framed_child() {
  end(0);
}

std::string framed_child::describe() const {
  if (!socket_.empty()) return "socket '" + socket_ + "'";
  std::string cmd;
  for (const auto& w : command_)
    cmd += (cmd.empty() ? "" : " ") + w;
  return "command '" + cmd + "'";
}

bool framed_child::start(clock::time_point deadline, std::string* error) {
  if (fd_ >= 0) end(0);
  return socket_.empty() ? spawn(error) : connect_socket(deadline, error);
}

bool framed_child::connect_socket(clock::time_point deadline, std::string* error) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_.size() >= sizeof(addr.sun_path)) {
    *error = "cannot connect to " + describe() + ": the path is longer than " +
             std::to_string(sizeof(addr.sun_path) - 1) + " bytes";
    return false;
  }
  std::memcpy(addr.sun_path, socket_.c_str(), socket_.size() + 1);
  // A server being restarted has no socket file (ENOENT) or a stale one (ECONNREFUSED) for a
  // moment, and one with a full backlog answers EAGAIN: retry those with a doubling pause
  // (50 ms up to 1 s) until the call's deadline, so that a server back in time is rejoined by
  // the very call that found it gone. Retrying at once would burn through a start budget in
  // milliseconds.
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
      return true;
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
}

bool framed_child::spawn(std::string* error) {
  if (command_.empty()) {
    *error = "no " + noun_ + " command";
    return false;
  }
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls
  // until exec.
  std::vector<char*> argv;
  for (auto& w : command_)
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
    *error = "cannot run " + describe() + ": " + command_[0] + ": " + errno_text(e);
    return false;
  }
  fd_ = sv[0];
  pid_ = pid;
  if (!set_nonblocking(fd_)) {
    *error = "fcntl(): " + errno_text(errno);
    end(0);
    return false;
  }
  return true;
}

frame_io framed_child::write(std::string_view bytes, clock::time_point deadline, int* err) {
  const char* p = bytes.data();
  size_t n = bytes.size();
  if (fd_ < 0) return frame_io::closed;
  while (n > 0) {
    const ssize_t k = ::send(fd_, p, n, MSG_NOSIGNAL);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (auto w = wait_for(fd_, POLLOUT, deadline); w != frame_io::ok) return w;
      continue;
    }
    if (k < 0 && (errno == EPIPE || errno == ECONNRESET)) return frame_io::closed;
    *err = errno;
    return frame_io::error;
  }
  return frame_io::ok;
}

frame_read framed_child::read_frame(std::string* body, uint32_t max_bytes,
                                    clock::time_point deadline) {
  frame_read r;
  if (fd_ < 0) {
    r.io = frame_io::closed;
    return r;
  }
  unsigned char header[4];
  r.io = read_exact(fd_, reinterpret_cast<char*>(header), 4, deadline, &r.err);
  if (r.io != frame_io::ok) return r;
  r.in_body = true;
  r.length = frame_length(header);
  if (r.length > max_bytes) {
    r.io = frame_io::oversize;
    return r;
  }
  body->assign(r.length, '\0');
  r.io = read_exact(fd_, body->data(), r.length, deadline, &r.err);
  return r;
}

std::string framed_child::end(double grace_s) noexcept {
  std::string how;
  if (fd_ >= 0 && grace_s > 0) ::shutdown(fd_, SHUT_WR);  // EOF on the process's stdin
  if (pid_ > 0) {
    const int exited = grace_s > 0 ? exited_within(pid_, grace_s) : -1;
    // The whole group, also after a clean exit (helpers the process left behind). The leader
    // is not reaped yet, so the group id cannot have been reused.
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
  return how;
}

}  // namespace asyncrl
