#include "apps/asyncrl/signals.hpp"

#include <unistd.h>
#include <chrono>
#include <csignal>
#include <cstdlib>

namespace asyncrl {

namespace {

std::atomic<int> g_count{0};
std::atomic<int> g_last{0};
struct sigaction g_old_int, g_old_term;

extern "C" void on_signal(int sig) {
  g_last.store(sig);
  if (g_count.fetch_add(1) + 1 >= 3) {  // the third: the user really wants out
    const char msg[] = "\nasyncrl: third signal, exiting without cleanup\n";
    (void)!write(2, msg, sizeof msg - 1);
    std::_Exit(128 + sig);
  }
}

}  // namespace

interrupt_watch::interrupt_watch(std::function<void(int)> on_signal_fn)
    : on_signal_(std::move(on_signal_fn)) {
  g_count.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
  watcher_ = std::thread([this] {
    int seen = 0;
    while (!stop_.load()) {
      const int n = g_count.load();
      while (seen < n)
        on_signal_(++seen);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
}

interrupt_watch::~interrupt_watch() {
  stop_.store(true);
  watcher_.join();
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

int interrupt_watch::count() {
  return g_count.load();
}

int interrupt_watch::last_signal() {
  return g_last.load();
}

}  // namespace asyncrl
