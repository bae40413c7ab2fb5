// Usage: bench_cluster [--mb 100] [--groups 2000] [--reps 3] [--chunk-mb 4] [--window 4] [--out F]
//   --caf-threads N: CAF scheduler threads per process (default 1, as `asyncrl train`/`worker`)
//
// Loopback cost of the cluster paths (docs/cluster.md), parent process <-> a child process
// (fork + exec of this binary with the hidden --serve-tcp / --serve-caf flag, which prints its
// port on stdout):
//  1. Weight sync of a ~`--mb` MB weight_blob (a few large float tensors), packed once with
//     pack_weights:
//     a. raw TCP: the packed bytes over a plain loopback socket; the child reads them all and
//        acks;
//     b. CAF remote, chunked like the synchronizer: weight_chunk requests (`--window` in flight,
//        `--chunk-mb` MiB each) to an actor in the child that feeds weight_assembler
//        (SHA-256 check) and, when complete, unpack_weights; timed from the first chunk to the
//        final ack. The parent's pack_weights + sha256_hex are timed separately;
//     c. in-process: a local request carrying the weight_snapshot (shared by pointer) to a local
//        actor and back;
//     d. the weights link (cluster.weights_transport=collective, runtime/dist/weight_link.hpp):
//        the packed bytes broadcast over a c10d Gloo group of two (the parent sends, the child
//        receives in `--chunk-mb` buckets, checks the SHA-256 and unpacks, as node_agent does,
//        then prints "ok"); timed from the send until the child's "ok".
//  2. Per-group message overhead: a realistic scored_group (G=8, 48 response tokens, 16 prompt
//     tokens) to an actor that answers with an int64 ack, in-process vs in the child over the
//     middleman; sequential request/response and pipelined sends with one final ack.
// Each measurement is repeated `--reps` times (after one warm-up) and the median is reported.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/io/all.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>

#include "actors/weight_stage.hpp"
#include "bench/bench_util.hpp"
#include "messages/type_ids.hpp"
#include "runtime/cluster/weight_chunks.hpp"
#include "runtime/dist/weight_link.hpp"
#include "runtime/model/weight_blob.hpp"

using namespace asyncrl;
using namespace std::chrono_literals;

namespace {

constexpr auto kRequestTimeout = std::chrono::seconds(20);  // a dead peer's proxy fails this late

// Plain sockets -------------------------------------------------------------------------------

bool read_all(int fd, void* p, size_t n) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::recv(fd, b, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    b += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool write_all(int fd, const void* p, size_t n) {
  auto* b = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t r = ::send(fd, b, n, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    b += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// Child processes -----------------------------------------------------------------------------

/// A child running this binary in a serve mode. Its destructor kills and reaps it.
struct child_proc {
  pid_t pid = -1;
  int out_fd = -1;  // the child's stdout
  uint16_t port = 0;

  child_proc() = default;
  child_proc(const child_proc&) = delete;
  child_proc& operator=(const child_proc&) = delete;
  ~child_proc() { stop(0ms); }

  /// Gives the child `grace` to exit on its own, then SIGKILLs it; always reaps it.
  void stop(std::chrono::milliseconds grace) {
    if (pid > 0) {
      const auto deadline = std::chrono::steady_clock::now() + grace;
      int status = 0;
      pid_t r;
      for (;;) {
        r = ::waitpid(pid, &status, WNOHANG);
        if (r < 0 && errno == EINTR) continue;
        if (r != 0 || std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(5ms);
      }
      if (r == 0) {
        ::kill(pid, SIGKILL);
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
      }
      pid = -1;
    }
    if (out_fd >= 0) {
      ::close(out_fd);
      out_fd = -1;
    }
  }
};

/// The next line the child prints (without its newline), waiting at most `bound`; `pending`
/// holds what was read past a line.
std::string read_line(int fd, std::string& pending, std::chrono::milliseconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (pending.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) throw std::runtime_error("the child printed no line in time");
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno != EINTR) throw std::runtime_error("poll failed");
    if (r <= 0) continue;
    char buf[256];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("the child exited");
    pending.append(buf, static_cast<size_t>(n));
  }
  const auto eol = pending.find('\n');
  auto line = pending.substr(0, eol);
  pending.erase(0, eol + 1);
  return line;
}

/// Starts `/proc/self/exe mode --caf-threads N [extra...]` with its stdout on a pipe and reads
/// the port it prints (bounded).
void launch(child_proc& c, const char* mode, size_t threads, std::vector<std::string> extra = {}) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  const pid_t parent = ::getpid();
  char exe[4096] = "/proc/self/exe";  // resolved, so that the child's name is this binary's
  char real[sizeof exe];
  const ssize_t rl = ::readlink("/proc/self/exe", real, sizeof real - 1);
  if (rl > 0) {
    real[rl] = 0;
    std::memcpy(exe, real, static_cast<size_t>(rl) + 1);
  }
  std::string m = mode, t_flag = "--caf-threads", t = std::to_string(threads);
  std::vector<char*> args{exe, m.data(), t_flag.data(), t.data()};
  for (auto& x : extra)
    args.push_back(x.data());
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error("fork failed");
  }
  if (pid == 0) {
    // Async-signal-safe calls only until exec. The child dies with the parent.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(111);
    if (::dup2(fds[1], STDOUT_FILENO) < 0) ::_exit(112);
    ::execv(exe, args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  c.pid = pid;
  c.out_fd = fds[0];
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (line.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) throw std::runtime_error(std::string(mode) + ": no port within 20 s");
    pollfd p{c.out_fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno != EINTR) throw std::runtime_error("poll failed");
    if (r <= 0) continue;
    char buf[64];
    const ssize_t n = ::read(c.out_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(std::string(mode) + ": child exited before its port");
    line.append(buf, static_cast<size_t>(n));
  }
  const int port = std::stoi(line);
  if (port <= 0 || port > 65535) throw std::runtime_error("bad port line: " + line);
  c.port = static_cast<uint16_t>(port);
}

// --serve-tcp: one connection; per round an 8-byte size, that many bytes, then an 8-byte ack.
int serve_tcp() {
  const int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  auto addr = loopback(0);
  socklen_t len = sizeof addr;
  if (ls < 0 || ::bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(ls, 1) != 0 || ::getsockname(ls, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("serve-tcp: listen");
    return 1;
  }
  std::printf("%u\n", static_cast<unsigned>(ntohs(addr.sin_port)));
  std::fflush(stdout);
  const int s = ::accept(ls, nullptr, nullptr);
  ::close(ls);
  if (s < 0) return 1;
  set_nodelay(s);
  for (;;) {
    uint64_t n = 0;
    if (!read_all(s, &n, sizeof n) || n == 0) break;
    std::unique_ptr<char[]> buf(new char[n]);  // fresh, like a receiver's new buffer
    if (!read_all(s, buf.get(), n)) return 1;
    uint64_t ack = n;
    if (!write_all(s, &ack, sizeof ack)) return 1;
  }
  ::close(s);
  return 0;
}

// --serve-caf: the remote end of the weight chunks and of the groups.
struct serve_state {
  weight_assembler assembler;
  weight_snapshot staged;
  int64_t pipelined = 0;
};

caf::behavior serve_actor(caf::stateful_actor<serve_state>* self) {
  return {
      // As node_agent: assemble, check, and unpack the complete version.
      [self](stage_atom, weight_chunk& c) -> caf::result<int64_t> {
        auto& st = self->state;
        auto why = st.assembler.add(c.version, c.index, c.count, c.offset, c.total_bytes, c.digest,
                                    c.bytes);
        if (!why.empty()) return caf::make_error(caf::sec::invalid_argument, why);
        if (!st.assembler.complete()) return st.assembler.received();
        const auto bytes = st.assembler.take();
        try {
          st.staged = unpack_weights(bytes.data(), bytes.size());
        } catch (const std::exception& e) {
          return caf::make_error(caf::sec::invalid_argument, e.what());
        }
        return static_cast<int64_t>(bytes.size());
      },
      [](score_atom, scored_group& g) -> int64_t { return static_cast<int64_t>(g.group_id); },
      [self](put_atom, scored_group&) { ++self->state.pipelined; },
      [self](done_atom) -> int64_t {
        auto n = self->state.pipelined;
        self->state.pipelined = 0;
        return n;
      },
      // In-process only: what a local rollouter's load costs (the snapshot shared by pointer).
      [self](load_atom, weight_snapshot& w) -> int64_t {
        self->state.staged = w;
        return w.version;
      },
      [self](stop_atom) { self->quit(); },
  };
}

// As `asyncrl train` / `asyncrl worker` set up a node (plain TCP, no TLS).
void configure(caf::actor_system_config& cfg, size_t threads) {
  register_message_types(cfg);
  cfg.set("scheduler.max-threads", threads);
  cfg.load<caf::io::middleman>();
  cfg.set("middleman.heartbeat-interval", caf::timespan{std::chrono::seconds(1)});
  cfg.set("middleman.connection-timeout", caf::timespan{std::chrono::seconds(10)});
}

size_t caf_threads(int argc, char** argv) {
  return static_cast<size_t>(std::max(1, std::stoi(bench::arg(argc, argv, "--caf-threads", "1"))));
}

int serve_caf(size_t threads) {
  caf::actor_system_config cfg;
  configure(cfg, threads);
  caf::actor_system sys{cfg};
  auto srv = sys.spawn(serve_actor);
  auto port = sys.middleman().publish(srv, 0, "127.0.0.1", true);
  if (!port) {
    std::fprintf(stderr, "serve-caf: publish: %s\n", sys.render(port.error()).c_str());
    caf::anon_send_exit(srv, caf::exit_reason::user_shutdown);
    return 1;
  }
  std::printf("%u\n", static_cast<unsigned>(*port));
  std::fflush(stdout);
  caf::scoped_actor self{sys};
  self->wait_for(srv);
  return 0;
}

// --serve-link --port P --total N --digest D --rounds R: the receiving end of the weights link.
// Prints P once joined ("ready"), then per round "ok" or "bad: why".
int serve_link(int argc, char** argv) {
  weight_link_options o;
  o.sender = false;
  o.port = std::stoi(bench::arg(argc, argv, "--port", "0"));
  o.timeout = 60s;
  o.bucket_bytes = std::stoll(bench::arg(argc, argv, "--bucket", std::to_string(4 << 20)));
  o.peer = "the bench parent";
  const auto total = std::stoll(bench::arg(argc, argv, "--total", "0"));
  const auto digest = bench::arg(argc, argv, "--digest", "");
  const int rounds = std::stoi(bench::arg(argc, argv, "--rounds", "1"));
  std::promise<std::string> joined;
  weight_link link(o, [&](const std::string& e) { joined.set_value(e); });
  if (auto e = joined.get_future().get(); !e.empty()) {
    std::fprintf(stderr, "serve-link: %s\n", e.c_str());
    return 1;
  }
  std::printf("%d\n", o.port);
  std::fflush(stdout);
  for (int r = 0; r < rounds; ++r) {
    std::promise<std::pair<std::string, std::vector<char>>> got;
    link.receive(total, [&](const std::string& e, std::vector<char> b) {
      got.set_value({e, std::move(b)});
    });
    auto [e, bytes] = got.get_future().get();
    std::string why = e;
    if (why.empty() && sha256_hex(bytes.data(), bytes.size()) != digest) why = "digest mismatch";
    if (why.empty()) {
      try {
        auto w = unpack_weights(bytes.data(), bytes.size());
        if (!w.blob) why = "no weights";
      } catch (const std::exception& ex) {
        why = ex.what();
      }
    }
    std::printf("%s\n", why.empty() ? "ok" : ("bad: " + why).c_str());
    std::fflush(stdout);
    if (!why.empty()) return 1;
  }
  return 0;
}

// The parent's side ---------------------------------------------------------------------------

weight_snapshot make_weights(double mb) {
  // Four [rows x 1024] float32 tensors, ~mb * 1e6 bytes in all.
  const int64_t cols = 1024;
  const int64_t rows = std::max<int64_t>(1, static_cast<int64_t>(mb * 1e6 / 4 / 4 / cols));
  auto blob = std::make_shared<weight_blob>();
  for (int i = 0; i < 4; ++i) {
    blob->names.push_back("layers." + std::to_string(i) + ".weight");
    blob->shapes.push_back({rows, cols});
  }
  // The blob holds bytes (float32 elements here): 4 bytes per element. It held floats before
  // bf16 snapshots came, and sizing it in elements since then left it a quarter of the size its
  // shapes need (every chunked sync failed: "shapes need more elements than the data holds").
  const size_t n = static_cast<size_t>(4 * rows * cols);
  blob->data.resize(n * sizeof(float));
  uint32_t x = 12345;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    const float f = static_cast<float>(static_cast<int32_t>(x)) * 1e-11f;
    std::memcpy(blob->data.data() + i * sizeof(float), &f, sizeof f);
  }
  return {1, std::move(blob)};
}

scored_group make_group(int G, int prompt_tokens, int response_tokens) {
  scored_group g;
  g.group_id = 4242;
  g.prompt_index = 17;
  g.seq = 17;
  g.ground_truth = "72";
  g.worker = 1;
  for (int i = 0; i < G; ++i) {
    scored_sample s;
    s.group_id = g.group_id;
    s.index = static_cast<uint32_t>(i);
    s.uid = g.group_id * static_cast<uint64_t>(G) + s.index;
    for (int t = 0; t < prompt_tokens; ++t)
      s.prompt.push_back(3 + (t * 7) % 60);
    for (int t = 0; t < response_tokens; ++t) {
      s.response.push_back(3 + (t * 13 + i) % 60);
      s.logprobs.push_back(-0.01f * static_cast<float>(t + i + 1));
      s.versions.push_back(t < response_tokens / 2 ? 6 : 7);
    }
    s.reward = i % 2;
    s.advantage = i % 2 ? 0.9 : -0.9;
    g.samples.push_back(std::move(s));
  }
  return g;
}

/// What the chunk sender sends next; set by main before each publish request.
struct stage_job {
  caf::actor target;
  std::shared_ptr<const std::vector<char>> packed;
  std::string digest;
  int64_t chunk_bytes = 4 << 20;
  int32_t window = 4;
};

// Sends one version to `job->target` with the synchronizer's own stage_weights
// (actors/weight_stage.hpp); answers the nanoseconds from the first chunk to the last ack.
caf::behavior stager_actor(caf::event_based_actor* self, std::shared_ptr<stage_job> job) {
  return {[self, job](publish_atom, int64_t version) -> caf::response_promise {
    auto rp = self->make_response_promise();
    const auto t0 = std::chrono::steady_clock::now();
    stage_params sp;
    sp.version = version;
    sp.packed = job->packed;
    sp.digest = job->digest;
    sp.chunk_bytes = job->chunk_bytes;
    sp.window = job->window;
    sp.timeout = kRequestTimeout;
    stage_weights(self, job->target, std::move(sp), [rp, t0](const std::string& why) mutable {
      if (!why.empty()) {
        rp.deliver(caf::make_error(caf::sec::runtime_error, why));
        return;
      }
      rp.deliver(static_cast<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now() - t0)
                                          .count()));
    });
    return rp;
  }};
}

struct failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Raw TCP: one round of `bytes` to the --serve-tcp child; seconds until its ack.
double tcp_round(int fd, const std::vector<char>& bytes) {
  const double t0 = bench::now_s();
  const uint64_t n = bytes.size();
  uint64_t ack = 0;
  if (!write_all(fd, &n, sizeof n) || !write_all(fd, bytes.data(), bytes.size()) ||
      !read_all(fd, &ack, sizeof ack) || ack != n)
    throw failure("raw tcp: transfer failed");
  return bench::now_s() - t0;
}

// The requester of the round trips: a detached event-based actor, as a rollouter is. Each
// request answers the nanoseconds its `n` messages took.
//  (score_atom, target, n): n sequential (score, group) requests, each waiting for its ack;
//  (put_atom, target, n): n one-way (put, group) sends, then one (done) request for the count;
//  (load_atom, target, n): n sequential (load, weight_snapshot) requests.
struct driver_state {
  scored_group group;
  weight_snapshot weights;
};

caf::behavior driver_actor(caf::stateful_actor<driver_state>* self, scored_group g,
                           weight_snapshot w) {
  self->state.group = std::move(g);
  self->state.weights = std::move(w);
  using clock = std::chrono::steady_clock;
  auto elapsed_ns = [](clock::time_point t0) {
    return static_cast<int64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - t0).count());
  };
  // Runs `n` sequential requests made by `make` (one at a time), then delivers the time.
  auto sequential = [self, elapsed_ns](caf::actor target, int32_t n, auto make) {
    auto rp = std::make_shared<caf::response_promise>(self->make_response_promise());
    auto left = std::make_shared<int32_t>(n);
    auto t0 = clock::now();
    auto next = std::make_shared<std::function<void()>>();
    *next = [=]() {
      if (*left == 0) {
        rp->deliver(elapsed_ns(t0));
        *next = nullptr;
        return;
      }
      --*left;
      make(target).then([=](int64_t) { (*next)(); },
                        [=](const caf::error& e) {
                          rp->deliver(e);
                          *next = nullptr;
                        });
    };
    (*next)();
    return *rp;
  };
  return {
      [self, sequential](score_atom, caf::actor target, int32_t n) {
        return sequential(target, n, [self](const caf::actor& t) {
          return self->request(t, kRequestTimeout, score_atom::value, self->state.group);
        });
      },
      [self, sequential](load_atom, caf::actor target, int32_t n) {
        return sequential(target, n, [self](const caf::actor& t) {
          return self->request(t, kRequestTimeout, load_atom::value, self->state.weights);
        });
      },
      [self, elapsed_ns](put_atom, caf::actor target, int32_t n) -> caf::response_promise {
        auto rp = self->make_response_promise();
        auto t0 = clock::now();
        for (int32_t i = 0; i < n; ++i)
          self->send(target, put_atom::value, self->state.group);
        self->request(target, kRequestTimeout, done_atom::value)
            .then(
                [=](int64_t got) mutable {
                  if (got == n)
                    rp.deliver(elapsed_ns(t0));
                  else
                    rp.deliver(caf::make_error(caf::sec::runtime_error,
                                               "pipelined: " + std::to_string(got) + " of " +
                                                   std::to_string(n) + " arrived"));
                },
                [=](const caf::error& e) mutable { rp.deliver(e); });
        return rp;
      },
  };
}

/// Asks the driver for `n` messages of kind `Atom` to `target`; microseconds per message.
template <class Atom>
double per_message_us(caf::scoped_actor& self, const caf::actor& driver, const caf::actor& target,
                      int32_t n) {
  int64_t ns = -1;
  self->request(driver, kRequestTimeout * 4, Atom::value, target, n)
      .receive([&](int64_t x) { ns = x; },
               [&](caf::error& e) { throw failure("driver: " + self->system().render(e)); });
  return static_cast<double>(ns) * 1e-3 / n;
}

int run_parent(int argc, char** argv) {
  const double t_start = bench::now_s();
  const double mb = std::stod(bench::arg(argc, argv, "--mb", "100"));
  const int n_groups = std::stoi(bench::arg(argc, argv, "--groups", "2000"));
  const int reps = std::max(1, std::stoi(bench::arg(argc, argv, "--reps", "3")));
  const int64_t chunk_bytes = static_cast<int64_t>(
      std::stod(bench::arg(argc, argv, "--chunk-mb", "4")) * static_cast<double>(1 << 20));
  const int window = std::max(1, std::stoi(bench::arg(argc, argv, "--window", "4")));
  const size_t threads = caf_threads(argc, argv);
  const int G = 8, prompt_tokens = 16, response_tokens = 48;
  const int local_weight_requests = 1000;
  ::signal(SIGPIPE, SIG_IGN);

  auto snap = make_weights(mb);
  const auto packed0 = pack_weights(snap);
  const auto total = static_cast<int64_t>(packed0.size());
  const auto group = make_group(G, prompt_tokens, response_tokens);

  nlohmann::ordered_json j{{"benchmark", "cluster_loopback"}, {"machine", bench::machine()}};

  // 1a. Raw TCP ------------------------------------------------------------------------------
  std::vector<double> tcp_s;
  {
    child_proc child;
    launch(child, "--serve-tcp", threads);
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    auto addr = loopback(child.port);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      if (fd >= 0) ::close(fd);
      throw failure("raw tcp: connect failed");
    }
    set_nodelay(fd);
    try {
      tcp_round(fd, packed0);  // warm-up
      for (int r = 0; r < reps; ++r)
        tcp_s.push_back(tcp_round(fd, packed0));
      const uint64_t zero = 0;
      write_all(fd, &zero, sizeof zero);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
    child.stop(2000ms);
  }

  // 1d. The weights link: a c10d Gloo broadcast to the child ----------------------------------
  std::vector<double> link_s;
  {
    weight_link_options o;
    o.sender = true;
    o.timeout = 60s;
    o.bucket_bytes = chunk_bytes;
    o.peer = "the bench child";
    std::promise<std::string> joined;
    weight_link link(o, [&](const std::string& e) { joined.set_value(e); });
    if (link.port() <= 0) throw failure("weights link: cannot listen");
    auto packed = std::make_shared<const std::vector<char>>(packed0);
    const auto digest = sha256_hex(packed->data(), packed->size());
    child_proc child;
    launch(child, "--serve-link", threads,
           {"--port", std::to_string(link.port()), "--total", std::to_string(total), "--digest",
            digest, "--bucket", std::to_string(chunk_bytes), "--rounds", std::to_string(reps + 1)});
    if (auto e = joined.get_future().get(); !e.empty()) throw failure("weights link: " + e);
    std::string pending;
    for (int r = -1; r < reps; ++r) {  // r = -1: warm-up
      const double t0 = bench::now_s();
      std::promise<std::string> sent;
      link.send(packed, [&](const std::string& e) { sent.set_value(e); });
      if (auto e = sent.get_future().get(); !e.empty()) throw failure("weights link: " + e);
      const auto line = read_line(child.out_fd, pending, 120s);
      if (line != "ok") throw failure("weights link: the child says " + line);
      if (r >= 0) link_s.push_back(bench::now_s() - t0);
    }
    child.stop(3000ms);
  }

  caf::actor_system_config cfg;
  configure(cfg, threads);
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto job = std::make_shared<stage_job>();
  job->chunk_bytes = chunk_bytes;
  job->window = window;
  auto stager = sys.spawn(stager_actor, job);
  auto echo = sys.spawn(serve_actor);  // the in-process receiver of groups and weights
  auto driver = sys.spawn<caf::detached>(driver_actor, group, snap);
  struct local_guard {  // the actor system's destructor waits for these: stop them on every path
    caf::scoped_actor& self;
    std::vector<caf::actor> actors;
    ~local_guard() {
      for (auto& a : actors)
        self->send_exit(a, caf::exit_reason::user_shutdown);
    }
  } guard{self, {stager, echo, driver}};

  std::vector<double> pack_s, sha_s, caf_s, local_load_us;
  std::vector<double> seq_local, seq_remote, pipe_local, pipe_remote;
  int64_t group_bytes = 0;
  {
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    auto copy = group;
    if (auto err = sink(copy)) throw failure("serialize group: " + sys.render(err));
    group_bytes = static_cast<int64_t>(buf.size());
  }
  {
    child_proc child;
    launch(child, "--serve-caf", threads);
    auto remote = sys.middleman().remote_actor("127.0.0.1", child.port);
    if (!remote) throw failure("remote_actor: " + sys.render(remote.error()));
    job->target = *remote;

    // 1b. CAF remote, chunked -----------------------------------------------------------------
    for (int r = -1; r < reps; ++r) {  // r = -1: warm-up
      double t0 = bench::now_s();
      auto packed = std::make_shared<const std::vector<char>>(pack_weights(snap));
      double t1 = bench::now_s();
      auto digest = sha256_hex(packed->data(), packed->size());
      double t2 = bench::now_s();
      job->packed = std::move(packed);
      job->digest = std::move(digest);
      int64_t ns = -1;
      self->request(stager, kRequestTimeout, publish_atom::value, int64_t{r + 2})
          .receive([&](int64_t x) { ns = x; },
                   [&](caf::error& e) { throw failure("chunked sync: " + sys.render(e)); });
      job->packed.reset();
      if (r < 0) continue;
      pack_s.push_back(t1 - t0);
      sha_s.push_back(t2 - t1);
      caf_s.push_back(static_cast<double>(ns) * 1e-9);
    }

    // 2. Groups, local and remote, interleaved per rep ------------------------------------------
    for (int r = -1; r < reps; ++r) {  // r = -1: warm-up
      const int32_t n = r < 0 ? 200 : n_groups;
      auto sl = per_message_us<score_atom>(self, driver, echo, n);
      auto sr = per_message_us<score_atom>(self, driver, *remote, n);
      auto pl = per_message_us<put_atom>(self, driver, echo, n);
      auto pr = per_message_us<put_atom>(self, driver, *remote, n);
      if (r < 0) continue;
      seq_local.push_back(sl);
      seq_remote.push_back(sr);
      pipe_local.push_back(pl);
      pipe_remote.push_back(pr);
    }

    self->send(*remote, stop_atom::value);
    child.stop(3000ms);
  }

  // 1c. In-process: the snapshot by pointer to a local actor and back --------------------------
  for (int r = -1; r < reps; ++r) {
    auto us = per_message_us<load_atom>(self, driver, echo, local_weight_requests);
    if (r >= 0) local_load_us.push_back(us);
  }

  const double tcp_med = bench::median(tcp_s), caf_med = bench::median(caf_s);
  const double pack_med = bench::median(pack_s), sha_med = bench::median(sha_s);
  const double bytes = static_cast<double>(total);
  auto ms = [](std::vector<double> v) {
    for (auto& x : v)
      x *= 1e3;
    return v;
  };
  j["config"] = {{"mb", mb},
                 {"packed_bytes", total},
                 {"tensors", snap.blob->names.size()},
                 {"chunk_bytes", chunk_bytes},
                 {"chunks", chunk_count(total, chunk_bytes)},
                 {"window", window},
                 {"reps", reps},
                 {"groups", n_groups},
                 {"group_size", G},
                 {"prompt_tokens", prompt_tokens},
                 {"response_tokens", response_tokens},
                 {"group_serialized_bytes", group_bytes},
                 {"caf_scheduler_threads_per_process", threads}};
  j["weight_sync"] = {
      {"raw_tcp",
       {{"bytes_per_s", bytes / tcp_med}, {"ms", tcp_med * 1e3}, {"runs_ms", ms(tcp_s)}}},
      {"caf_remote_chunked",
       {{"bytes_per_s", bytes / caf_med},
        {"ms", caf_med * 1e3},
        {"runs_ms", ms(caf_s)},
        {"pack_weights_ms", pack_med * 1e3},
        {"sha256_ms", sha_med * 1e3},
        {"bytes_per_s_incl_pack_sha", bytes / (caf_med + pack_med + sha_med)}}},
      {"ratio_remote_to_raw_tcp", tcp_med / caf_med},
      {"collective_link",
       {{"bytes_per_s", bytes / bench::median(link_s)},
        {"ms", bench::median(link_s) * 1e3},
        {"runs_ms", ms(link_s)},
        {"ratio_to_caf_remote_chunked", caf_med / bench::median(link_s)}}},
      {"in_process",
       {{"us_per_request", bench::median(local_load_us)},
        {"runs_us", local_load_us},
        {"requests_per_run", local_weight_requests}}}};
  const double sl = bench::median(seq_local), sr = bench::median(seq_remote);
  const double pl = bench::median(pipe_local), pr = bench::median(pipe_remote);
  j["group_messages"] = {{"sequential",
                          {{"local_us_per_group", sl},
                           {"remote_us_per_group", sr},
                           {"ratio_remote_to_local", sr / sl},
                           {"local_runs_us", seq_local},
                           {"remote_runs_us", seq_remote}}},
                         {"pipelined",
                          {{"local_us_per_group", pl},
                           {"remote_us_per_group", pr},
                           {"ratio_remote_to_local", pr / pl},
                           {"local_runs_us", pipe_local},
                           {"remote_runs_us", pipe_remote}}}};
  j["method"] =
      "Parent and a fork+exec'd child of this binary on 127.0.0.1, both on the same cores, each "
      "an actor system set up as asyncrl's nodes (caf_scheduler_threads_per_process, "
      "middleman, no TLS). "
      "Weights: one packed (pack_weights, msgpack) blob of packed_bytes; bytes_per_s = "
      "packed_bytes / median time. raw_tcp: 8-byte size + the bytes over one TCP socket "
      "(TCP_NODELAY) into a fresh buffer in the child, until its 8-byte ack. "
      "caf_remote_chunked: weight_chunk requests (window in flight, chunk_bytes each, each "
      "chunk's bytes copied out of the packed buffer as the synchronizer does) to an actor in "
      "the child that runs weight_assembler (SHA-256 check of the whole) and unpack_weights; "
      "time from the first chunk until the last ack; pack_weights and sha256_hex are timed "
      "separately in the parent and included only in bytes_per_s_incl_pack_sha. "
      "ratio_remote_to_raw_tcp = caf bytes_per_s / raw bytes_per_s. collective_link: the "
      "weights link of cluster.weights_transport=collective: the packed bytes broadcast over a "
      "c10d Gloo group of two in chunk_bytes buckets; the child checks the SHA-256 and unpacks "
      "(as node_agent), then prints ok; time from the send until that line; "
      "ratio_to_caf_remote_chunked = caf ms / link ms (above 1: the link is faster). "
      "in_process: a local "
      "request (load, weight_snapshot) whose reply is the version, the snapshot shared by "
      "pointer; mean over requests_per_run. All group and in_process messages are sent by a "
      "detached event-based actor (as a rollouter) to a scheduled one, so local round trips "
      "include CAF's scheduler wake-up latency. Groups: one scored_group (group_size samples, "
      "prompt_tokens + response_tokens with logprobs and versions) copied into each message; "
      "sequential = request, wait for the int64 ack, repeat; pipelined = groups one-way sends "
      "then one request answered with the count received. Each figure is the median of reps "
      "runs after one warm-up.";
  j["ok"] = true;
  j["total_s"] = bench::now_s() - t_start;
  bench::emit(argc, argv, j);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (bench::flag(argc, argv, "--serve-tcp")) return serve_tcp();
  if (bench::flag(argc, argv, "--serve-caf")) return serve_caf(caf_threads(argc, argv));
  if (bench::flag(argc, argv, "--serve-link")) return serve_link(argc, argv);
  try {
    return run_parent(argc, argv);
  } catch (const std::exception& e) {
    nlohmann::ordered_json j{{"benchmark", "cluster_loopback"}, {"ok", false}, {"error", e.what()}};
    std::cout << j.dump(2) << std::endl;
    return 1;
  }
}
