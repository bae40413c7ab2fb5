#include "runtime/dist/weight_link.hpp"

#include <ATen/ATen.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "runtime/dist/dist_group.hpp"

namespace asyncrl {

struct weight_link::impl {
  weight_link_options o;
  std::unique_ptr<dist_group> group;
  std::string error;  // set once: the link is dead
  int port = 0;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> jobs;
  bool busy = true;  // the rendezvous runs first
  std::atomic<bool> stopping{false};
  std::thread thread;

  void run(done_fn joined, std::promise<int> listening);
  void loop();
  void post(std::function<void()> job);
  // Broadcasts [data, data + n) from rank 0 in buckets of o.bucket_bytes (views, no copy).
  void broadcast(char* data, int64_t n);
};

void weight_link::impl::run(done_fn joined, std::promise<int> listening) {
  bool told = false;
  try {
    dist_options d;
    d.host = o.host;
    d.port = o.sender ? 0 : o.port;
    d.rank = o.sender ? 0 : 1;
    d.world = 2;
    d.timeout = o.timeout;
    d.prefix = "weights";
    d.name = "weights link to " + o.peer + ",";
    d.abandoned = [this] { return stopping.load(); };
    group = dist_group::connect(d, [&](int p) {
      port = p;
      told = true;
      listening.set_value(p);
    });
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!told) listening.set_value(0);
  joined(error);
  loop();
}

void weight_link::impl::loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu);
      busy = false;
      cv.wait(lock, [&] { return stopping || !jobs.empty(); });
      if (jobs.empty()) return;  // stopping, nothing left
      job = std::move(jobs.front());
      jobs.pop_front();
      busy = true;
    }
    job();
  }
}

void weight_link::impl::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu);
    jobs.push_back(std::move(job));
  }
  cv.notify_one();
}

void weight_link::impl::broadcast(char* data, int64_t n) {
  std::vector<at::Tensor> buckets;
  const auto step = std::max<int64_t>(1, o.bucket_bytes);
  for (int64_t off = 0; off < n; off += step)
    buckets.push_back(at::from_blob(data + off, {std::min(step, n - off)}, at::kByte));
  group->broadcast(buckets, 0);
}

weight_link::weight_link(weight_link_options o, done_fn joined) : impl_(std::make_shared<impl>()) {
  impl_->o = std::move(o);
  std::promise<int> listening;
  auto port = listening.get_future();
  // The thread holds the state too: a callback may outlive nothing it needs.
  impl_->thread =
      std::thread([p = impl_, joined = std::move(joined), l = std::move(listening)]() mutable {
        p->run(std::move(joined), std::move(l));
      });
  if (impl_->o.sender) impl_->port = port.get();  // the store listens (or failed) at once
}

weight_link::~weight_link() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_one();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int weight_link::port() const {
  return impl_->port;
}

bool weight_link::idle() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return !impl_->busy && impl_->jobs.empty();
}

void weight_link::send(std::shared_ptr<const std::vector<char>> bytes, done_fn done) {
  impl_->post([p = impl_.get(), bytes = std::move(bytes), done = std::move(done)] {
    if (p->error.empty()) {
      try {
        // Rank 0 only reads the buckets: the const_cast never writes.
        p->broadcast(const_cast<char*>(bytes->data()), static_cast<int64_t>(bytes->size()));
      } catch (const std::exception& e) {
        p->error = e.what();
      }
    }
    done(p->error);
  });
}

void weight_link::receive(int64_t total, received_fn done) {
  impl_->post([p = impl_.get(), total, done = std::move(done)] {
    std::vector<char> bytes;
    if (p->error.empty()) {
      try {
        bytes.resize(static_cast<size_t>(total));
        p->broadcast(bytes.data(), total);
      } catch (const std::exception& e) {
        p->error = e.what();
        bytes.clear();
      }
    }
    done(p->error, std::move(bytes));
  });
}

}  // namespace asyncrl
