#pragma once

// One captured CUDA graph: a fixed sequence of kernels replayed with one launch, for the decode
// step (hundreds of small kernels per token, launch-bound when run one by one). Captured and
// replayed only in CUDA builds of libtorch (ASYNCRL_TORCH_CUDA); elsewhere capture() reports
// that graphs are unavailable and callers run the same work eagerly. Pulls in nothing of torch.

#include <functional>
#include <memory>
#include <string>

namespace asyncrl {

class cuda_graph {
 public:
  ~cuda_graph();
  cuda_graph(const cuda_graph&) = delete;
  cuda_graph& operator=(const cuda_graph&) = delete;

  /// Whether this build can capture graphs at all (a CUDA libtorch).
  static bool available();
  /// Runs `work` once eagerly on a side stream (warm-up: kernels loaded, workspaces allocated),
  /// then captures it. Every graph of one process shares one memory pool, so they must be
  /// replayed one at a time. Returns nullptr with `why` set when capture fails (the work must
  /// then run eagerly); tensors `work` allocates during capture stay valid for the replays.
  static std::unique_ptr<cuda_graph> capture(const std::function<void()>& work, std::string& why);
  /// Launches the captured kernels on the current stream.
  void replay();

 private:
  cuda_graph();
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace asyncrl
