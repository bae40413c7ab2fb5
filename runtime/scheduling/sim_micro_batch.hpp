#pragma once

// The trainer's micro-batches as the simulator charges them: every response is padded to the
// longest in its micro-batch, so a long tail costs padded tokens.

#include <algorithm>
#include <cstdint>
#include <vector>

namespace asyncrl {

/// The open micro-batch of the simulated trainer.
class sim_micro_batch {
 public:
  /// `size` responses per micro-batch; 0: no padding (cost per generated token).
  explicit sim_micro_batch(int64_t size) : size_(size) {}

  /// Adds one response; returns the padded tokens of the micro-batch it completes (count x
  /// longest response), else 0. Without micro-batches, the response's own length.
  double add(int64_t len) {
    if (size_ <= 0) return double(len);
    lens_.push_back(len);
    return int64_t(lens_.size()) >= size_ ? flush() : 0.0;
  }

  /// Closes the open micro-batch, however full; returns its padded tokens.
  double flush() {
    if (lens_.empty()) return 0.0;
    const auto longest = *std::max_element(lens_.begin(), lens_.end());
    const double padded = double(longest) * double(lens_.size());
    lens_.clear();
    return padded;
  }

 private:
  int64_t size_;
  std::vector<int64_t> lens_;  // response lengths in the open micro-batch
};

}  // namespace asyncrl
