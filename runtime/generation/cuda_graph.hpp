#pragma once

// One captured CUDA graph: a fixed sequence of kernels replayed with one launch, for the decode
// step (hundreds of small kernels per token, launch-bound when run one by one). Captured and
// replayed only in CUDA builds of libtorch (ASYNCRL_TORCH_CUDA); elsewhere capture() reports
// that graphs are unavailable and callers run the same work eagerly. Pulls in nothing of torch.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace asyncrl {

class cuda_graph {
 public:
  ~cuda_graph();
  cuda_graph(const cuda_graph&) = delete;
  cuda_graph& operator=(const cuda_graph&) = delete;

  /// A memory pool for the graphs of one owner (a generator): its graphs share their
  /// workspaces, so they must be replayed one at a time, by that owner. Each owner takes its
  /// own: two generators' graphs never share memory, and a pool is not reused after its graphs
  /// are gone (libtorch refuses that).
  struct pool_id {
    uint64_t first = 0, second = 0;
  };
  static pool_id new_pool();

  /// Whether this build can capture graphs at all (a CUDA libtorch).
  static bool available();
  /// Runs `work` once eagerly on a side stream (warm-up: kernels loaded, workspaces allocated),
  /// then captures it into `pool`. Returns nullptr with `why` set when capture fails (the work
  /// must then run eagerly); tensors `work` allocates during capture stay valid for the replays.
  static std::unique_ptr<cuda_graph> capture(const std::function<void()>& work, pool_id pool,
                                             std::string& why);
  /// Launches the captured kernels on the current stream.
  void replay();

 private:
  cuda_graph();
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace asyncrl
