#pragma once

// Sums the data-parallel ranks' gradient sums in fixed buckets (docs/scaling.md). A bucket is
// issued as soon as every parameter in it is final, so during a rank's last backward of a step
// the reduction of the layers the backward has finished runs on Gloo's threads while it
// computes the earlier layers' gradients (DDP's overlap). The buckets are fixed at
// construction, the same on every rank: consecutive parameters in reverse order (the backward
// finishes the last layers first; a tied embedding, final only at the very end, sits in the
// last bucket), of one dtype, up to bucket_bytes each. They are issued strictly in bucket
// order, because Gloo matches each rank's collectives by the order they were issued: a bucket
// that is ready waits for the ones before it. Whether a step overlaps or reduces after its
// backward, the same buckets sum the same sums, so the result is bitwise the same.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <vector>

#include "runtime/dist/dist_group.hpp"

namespace asyncrl {

class grad_reducer {
 public:
  /// `params`: the parameters whose gradients are reduced, in the trainer's order (their
  /// dtype, size and device; sums of another dtype, such as float64 accumulators, are given
  /// by `sum_dtype`). `group` must outlive the reducer.
  grad_reducer(dist_group& group, const std::vector<at::Tensor>& params, at::ScalarType sum_dtype,
               int64_t bucket_bytes);

  /// Parameter i's sum on this rank is final: copies it into its bucket, then issues every
  /// bucket that is now complete and next in order. Called from the autograd engine's thread
  /// during a backward: it never throws; a failure is kept and thrown by finish().
  void ready(size_t i, const at::Tensor& sum) noexcept;
  /// Every parameter not yet ready, with its sum from `sum_of(i)`; every bucket is then issued.
  void ready_rest(const std::function<at::Tensor(size_t)>& sum_of);
  /// Some bucket holds a sum (this step's reduction has begun and finish() is due).
  bool started() const { return started_; }
  /// Waits for every bucket, then copies each parameter's reduced sum into `dest(i)` (a tensor
  /// of the parameter's shape). Throws dist_error when a collective failed. Resets for the next
  /// step.
  void finish(const std::function<void(size_t, const at::Tensor&)>& dest);
  /// The buckets' parameters, in issue order (for tests).
  std::vector<std::vector<size_t>> buckets() const;

 private:
  struct slot {
    size_t bucket = 0;
    int64_t offset = 0;  // elements into the bucket's flat buffer
    int64_t numel = 0;
    std::vector<int64_t> shape;  // the parameter's, for the sum handed back
    bool ready = false;
  };
  struct bucket {
    std::vector<size_t> params;
    int64_t numel = 0;
    at::ScalarType dtype;
    at::Device device = at::kCPU;
    at::Tensor flat;  // allocated at the bucket's first ready parameter
    size_t waiting = 0;
    dist_work work;
  };
  void issue_in_order();

  dist_group& group_;
  std::vector<slot> slots_;
  std::vector<bucket> buckets_;
  size_t next_ = 0;  // the next bucket to issue
  bool started_ = false;
  std::exception_ptr failure_;
};

}  // namespace asyncrl
