#include "runtime/train/grad_reducer.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <stdexcept>

namespace asyncrl {

grad_reducer::grad_reducer(dist_group& group, const std::vector<at::Tensor>& params,
                           at::ScalarType sum_dtype, int64_t bucket_bytes)
    : group_(group), slots_(params.size()) {
  const auto elem = static_cast<int64_t>(c10::elementSize(sum_dtype));
  for (size_t k = params.size(); k-- > 0;) {
    const auto& p = params[k];
    const int64_t bytes = p.numel() * elem;
    const bool fits = !buckets_.empty() && buckets_.back().device == p.device() &&
                      (buckets_.back().numel * elem + bytes <= bucket_bytes);
    if (!fits) {
      bucket b;
      b.dtype = sum_dtype;
      b.device = p.device();
      buckets_.push_back(std::move(b));
    }
    auto& b = buckets_.back();
    slots_[k] = {buckets_.size() - 1, b.numel, p.numel(), p.sizes().vec(), false};
    b.params.push_back(k);
    b.numel += p.numel();
    ++b.waiting;
  }
}

void grad_reducer::ready(size_t i, const at::Tensor& sum) noexcept {
  if (failure_) return;
  try {
    auto& s = slots_.at(i);
    // A second gradient for one parameter in one reduction would mean its bucket went out
    // before its sum was whole: refuse loudly rather than sum a partial gradient.
    if (s.ready)
      throw std::logic_error("grad_reducer: parameter " + std::to_string(i) +
                             " was final twice in one step");
    if (sum.numel() != s.numel)
      throw std::logic_error("grad_reducer: parameter " + std::to_string(i) + " has " +
                             std::to_string(s.numel) + " elements, its sum " +
                             std::to_string(sum.numel()));
    at::NoGradGuard ng;
    auto& b = buckets_[s.bucket];
    if (!b.flat.defined())
      b.flat = at::empty({b.numel}, at::TensorOptions().dtype(b.dtype).device(b.device));
    b.flat.narrow(0, s.offset, sum.numel()).copy_(sum.reshape({-1}));
    s.ready = true;
    started_ = true;
    --b.waiting;
    issue_in_order();
  } catch (...) {
    failure_ = std::current_exception();
  }
}

void grad_reducer::issue_in_order() {
  while (next_ < buckets_.size() && buckets_[next_].waiting == 0) {
    auto& b = buckets_[next_++];
    b.work = group_.allreduce_start(b.flat, reduce_kind::sum);
  }
}

void grad_reducer::ready_rest(const std::function<at::Tensor(size_t)>& sum_of) {
  // In bucket order, so that each bucket is issued as soon as it is whole.
  for (const auto& b : buckets_)
    for (size_t i : b.params)
      if (!slots_[i].ready) ready(i, sum_of(i));
  if (failure_) std::rethrow_exception(failure_);
}

void grad_reducer::finish(const std::function<void(size_t, const at::Tensor&)>& dest) {
  auto reset = [&] {
    for (auto& s : slots_)
      s.ready = false;
    for (auto& b : buckets_) {
      b.work = dist_work();  // waits for any transfer still reading the buffer
      b.flat = at::Tensor();
      b.waiting = b.params.size();
    }
    next_ = 0;
    started_ = false;
    failure_ = nullptr;
  };
  try {
    if (failure_) std::rethrow_exception(failure_);
    if (next_ != buckets_.size())
      throw std::logic_error("grad_reducer: finish() before every parameter was ready");
    for (auto& b : buckets_) {
      b.work.wait();
      for (size_t i : b.params)
        dest(i, b.flat.narrow(0, slots_[i].offset, slots_[i].numel).view(slots_[i].shape));
      b.flat = at::Tensor();
    }
  } catch (...) {
    reset();
    throw;
  }
  reset();
}

std::vector<std::vector<size_t>> grad_reducer::buckets() const {
  std::vector<std::vector<size_t>> out;
  for (const auto& b : buckets_)
    out.push_back(b.params);
  return out;
}

}  // namespace asyncrl
