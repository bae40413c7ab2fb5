#include "runtime/dist/dist_group.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>

#include "runtime/cluster/address.hpp"

namespace asyncrl {

struct dist_group::impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  std::chrono::milliseconds timeout{0};
  std::string name;
};

namespace {

// c10::Error's what() carries a C++ backtrace; the message alone is what a user needs.
template <class F>
auto guarded(const std::string& name, const std::string& what, int rank, int world, F&& f)
    -> decltype(f()) {
  const auto where = name + " rank " + std::to_string(rank) + " of " + std::to_string(world) +
                     ": " + what + " failed: ";
  try {
    return f();
  } catch (const dist_error&) {
    throw;
  } catch (const c10::Error& e) {
    throw dist_error(where + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw dist_error(where + e.what());
  }
}

std::string joined_key(const std::string& prefix, int r) {
  return prefix + "/joined/" + std::to_string(r);
}

// libtorch 2.x's ProcessGroupGloo notes each collective it issues in a flight recorder shared by
// the whole process, whose table of groups it writes without a lock (pytorch/pytorch#179313).
// Two groups issuing their first collectives at once from two threads corrupted it: the
// data-parallel tests crashed in std::map's rebalance, and the train process does the same when
// its data-parallel group and a weights link issue together. Issuing only queues the work for
// Gloo's threads, so every issue in the process takes this one lock; the waits do not.
template <class F>
auto issue(F&& f) -> decltype(f()) {
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  return f();
}

}  // namespace

dist_group::dist_group(std::unique_ptr<impl> p, int rank, int world, int port)
    : impl_(std::move(p)), rank_(rank), world_(world), port_(port) {}

dist_group::~dist_group() = default;

struct dist_rendezvous::impl {
  dist_options o;
  std::unique_ptr<dist_group::impl> group;  // the store so far
};

dist_rendezvous::dist_rendezvous(std::unique_ptr<impl> p, int port)
    : impl_(std::move(p)), port_(port) {}

dist_rendezvous::~dist_rendezvous() = default;

std::unique_ptr<dist_rendezvous> dist_rendezvous::open(const dist_options& o) {
  if (o.world < 1 || o.rank < 0 || o.rank >= o.world)
    throw std::invalid_argument(o.name + " group: rank " + std::to_string(o.rank) +
                                " is not in [0, " + std::to_string(o.world) + ")");
  if (o.rank != 0 && o.port <= 0)
    throw std::invalid_argument(o.name + " group: rank " + std::to_string(o.rank) +
                                " needs rank 0's port");
  auto r = std::make_unique<impl>();
  r->o = o;
  r->group = std::make_unique<dist_group::impl>();
  auto& p = *r->group;
  p.timeout = o.timeout;
  p.name = o.name;
  guarded(o.name, "joining the store at " + o.host + ":" + std::to_string(o.port), o.rank, o.world,
          [&] {
            c10d::TCPStoreOptions so;
            so.port = static_cast<std::uint16_t>(o.port);
            so.isServer = o.rank == 0;
            so.waitWorkers = false;  // we wait for named ranks below, to say which are missing
            // libtorch 1.13's store client counts its connect timeout in whole seconds: below 1 s
            // it gives up at once. The rendezvous below keeps the group's own timeout.
            so.timeout = std::max<std::chrono::milliseconds>(o.timeout, std::chrono::seconds(2));
            p.store = c10::make_intrusive<c10d::TCPStore>(o.host, so);
          });
  guarded(o.name, "registering", o.rank, o.world,
          [&] { p.store->set(joined_key(o.prefix, o.rank), std::vector<uint8_t>{1}); });
  const int port = p.store->getPort();
  return std::unique_ptr<dist_rendezvous>(new dist_rendezvous(std::move(r), port));
}

std::unique_ptr<dist_group> dist_rendezvous::form() {
  if (!impl_->group) throw std::logic_error("dist_rendezvous::form called twice");
  const auto& o = impl_->o;
  auto p = std::move(impl_->group);
  const auto ms = std::to_string(o.timeout.count());
  guarded(o.name, "the rendezvous", o.rank, o.world, [&] {
    std::vector<std::string> keys;
    for (int r = 0; r < o.world; ++r)
      keys.push_back(joined_key(o.prefix, r));
    // Polled with check(), as in fetch(): a timed-out store wait() leaves libtorch 1.13's client
    // out of step, and polling lets an owner that goes away abandon the wait.
    const auto deadline = std::chrono::steady_clock::now() + o.timeout;
    auto pause = std::chrono::microseconds(200);
    while (!p->store->check(keys)) {
      if (o.abandoned && o.abandoned())
        throw dist_error(o.name + " rank " + std::to_string(o.rank) + " of " +
                         std::to_string(o.world) + ": abandoned while waiting for the others");
      if (std::chrono::steady_clock::now() >= deadline) {
        std::string missing;
        for (int r = 0; r < o.world; ++r)
          if (!p->store->check({joined_key(o.prefix, r)}))
            missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        throw dist_error(o.name + " rank " + std::to_string(o.rank) + " of " +
                         std::to_string(o.world) + ": rank(s) " + missing +
                         " did not join the group at " + o.host + ":" + std::to_string(port_) +
                         " within " + ms + " ms");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(20000));
    }
  });
  guarded(o.name, "forming the Gloo group", o.rank, o.world, [&] {
    auto go = c10d::ProcessGroupGloo::Options::create(o.timeout);
    // The other ranks connect to the address this endpoint advertises in the store: the one on
    // the route to the store, which they reach too (not the host name's, see address.hpp).
    auto self = is_loopback_host(o.host)
                    ? std::string("127.0.0.1")
                    : local_address_toward(o.host, static_cast<uint16_t>(port_));
    go->devices.push_back(self.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                                       : c10d::ProcessGroupGloo::createDeviceForHostname(self));
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>(o.prefix + "/gloo", p->store);
    // Gloo's constructor connects to each peer at the address the peer advertised. One we
    // cannot reach (a peer that advertised its host name's 127.0.1.1) was retried far past the
    // group's timeout: minutes, with libtorch 1.13. So it runs on a thread of its own, waited
    // for up to the timeout and a margin; past that this rank fails naming the group, and the
    // thread is left behind (it holds its own references; the process is about to fail).
    using pg_ptr = c10::intrusive_ptr<c10d::ProcessGroupGloo>;
    auto task = std::make_shared<std::packaged_task<pg_ptr()>>(
        [prefixed, rank = o.rank, world = o.world, go] {
          return c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, rank, world, go);
        });
    auto formed = task->get_future();
    std::thread([task] { (*task)(); }).detach();
    if (formed.wait_for(o.timeout + std::chrono::seconds(5)) != std::future_status::ready)
      throw dist_error(o.name + " rank " + std::to_string(o.rank) + " of " +
                       std::to_string(o.world) + ": the Gloo group did not form within " + ms +
                       " ms (this rank's endpoint: " + (self.empty() ? "default" : self) +
                       "); can every rank reach every other at its address?");
    p->pg = formed.get();
  });
  return std::unique_ptr<dist_group>(new dist_group(std::move(p), o.rank, o.world, port_));
}

std::unique_ptr<dist_group> dist_group::connect(const dist_options& o,
                                                const std::function<void(int)>& on_listening) {
  auto r = dist_rendezvous::open(o);
  if (o.rank == 0 && on_listening) on_listening(r->port());
  return r->form();
}

void dist_group::allreduce(std::vector<at::Tensor>& tensors, reduce_kind op) {
  std::vector<dist_work> works;
  for (auto& t : tensors)
    works.push_back(allreduce_start(t, op));
  for (auto& w : works)
    w.wait();
}

struct dist_work::state {
  c10::intrusive_ptr<c10d::Work> work;
  at::Tensor tensor;       // kept alive until the transfer is done
  std::string name, what;  // for guarded()'s message: "data-parallel rank 1 of 2: allreduce"
  int rank = 0, world = 1;
};

dist_work::dist_work() = default;
dist_work::dist_work(std::unique_ptr<state> s) : s_(std::move(s)) {}
dist_work::dist_work(dist_work&&) noexcept = default;
dist_work& dist_work::operator=(dist_work&& o) noexcept {
  if (this != &o) {
    settle();  // this one's transfer first
    s_ = std::move(o.s_);
  }
  return *this;
}

dist_work::~dist_work() {
  settle();
}

void dist_work::settle() noexcept {
  if (!s_) return;
  try {
    s_->work->wait();
  } catch (...) {  // the owner is going away (usually after another error): nothing to report to
  }
  s_.reset();
}

void dist_work::wait() {
  if (!s_) return;
  auto s = std::move(s_);
  guarded(s->name, s->what, s->rank, s->world, [&] { s->work->wait(); });
}

dist_work dist_group::allreduce_start(at::Tensor flat, reduce_kind op) {
  return guarded(impl_->name, "allreduce", rank_, world_, [&] {
    c10d::AllreduceOptions ao;
    ao.reduceOp = op == reduce_kind::sum ? c10d::ReduceOp::SUM : c10d::ReduceOp::MAX;
    ao.timeout = impl_->timeout;
    auto s = std::make_unique<dist_work::state>();
    s->tensor = flat;
    s->name = impl_->name, s->what = "allreduce", s->rank = rank_, s->world = world_;
    std::vector<at::Tensor> one{std::move(flat)};
    s->work = issue([&] { return impl_->pg->allreduce(one, ao); });
    return dist_work(std::move(s));
  });
}

void dist_group::broadcast(std::vector<at::Tensor>& tensors, int root) {
  guarded(impl_->name, "broadcast", rank_, world_, [&] {
    c10d::BroadcastOptions bo;
    bo.rootRank = root;
    bo.timeout = impl_->timeout;
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (auto& t : tensors) {
      std::vector<at::Tensor> one{t};
      works.push_back(issue([&] { return impl_->pg->broadcast(one, bo); }));
    }
    for (auto& w : works)
      w->wait();
  });
}

std::vector<at::Tensor> dist_group::allgather(const at::Tensor& mine) {
  return guarded(impl_->name, "allgather", rank_, world_, [&] {
    std::vector<at::Tensor> in{mine.contiguous()};
    std::vector<std::vector<at::Tensor>> out(1);
    for (int r = 0; r < world_; ++r)
      out[0].push_back(at::empty_like(in[0]));
    issue([&] { return impl_->pg->allgather(out, in); })->wait();
    return out[0];
  });
}

void dist_group::broadcast_bytes(std::string& bytes, int root) {
  guarded(impl_->name, "broadcast", rank_, world_, [&] {
    c10d::BroadcastOptions bo;
    bo.rootRank = root;
    bo.timeout = impl_->timeout;
    std::vector<at::Tensor> len{at::full({1}, static_cast<int64_t>(bytes.size()), at::kLong)};
    issue([&] { return impl_->pg->broadcast(len, bo); })->wait();
    const auto n = len[0].item<int64_t>();
    std::vector<at::Tensor> data{at::empty({std::max<int64_t>(n, 1)}, at::kByte)};
    if (rank_ == root && n > 0) std::memcpy(data[0].data_ptr(), bytes.data(), n);
    issue([&] { return impl_->pg->broadcast(data, bo); })->wait();
    if (rank_ != root) bytes.assign(static_cast<const char*>(data[0].data_ptr()), n);
  });
}

void dist_group::post(const std::string& key, const std::string& bytes) {
  guarded(impl_->name, "posting " + key, rank_, world_,
          [&] { impl_->store->set(key, std::vector<uint8_t>(bytes.begin(), bytes.end())); });
}

std::optional<std::string> dist_group::fetch(const std::string& key,
                                             std::chrono::milliseconds wait) {
  return guarded(impl_->name, "reading " + key, rank_, world_, [&]() -> std::optional<std::string> {
    // Polled with check(), which answers at once: a store wait() that times out leaves its
    // answer pending on the connection in libtorch 1.13, and the next request would read it.
    const auto deadline = std::chrono::steady_clock::now() + wait;
    auto pause = std::chrono::microseconds(200);
    while (!impl_->store->check({key})) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return std::nullopt;
      std::this_thread::sleep_for(
          std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
      pause = std::min(pause * 2, std::chrono::microseconds(5000));
    }
    const auto v = impl_->store->get(key);
    return std::string(v.begin(), v.end());
  });
}

void dist_group::erase(const std::string& key) {
  guarded(impl_->name, "erasing " + key, rank_, world_, [&] { impl_->store->deleteKey(key); });
}

void dist_group::barrier() {
  guarded(impl_->name, "barrier", rank_, world_,
          [&] { issue([&] { return impl_->pg->barrier(); })->wait(); });
}

}  // namespace asyncrl
