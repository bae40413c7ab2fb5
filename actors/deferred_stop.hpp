#pragma once

// A stop that waits for the messages sent before it. The controller's stop carries how many
// groups the role was sent in all; a group still in a mailbox (or on the wire) when the stop
// arrives must not be lost to it, so the reply waits until that many have arrived. The reward
// actor, the queue and the trainer share this.

#include <caf/typed_response_promise.hpp>

#include <cstdint>
#include <optional>
#include <utility>

namespace asyncrl {

template <class Result>
class deferred_stop {
 public:
  /// Called from the stop handler: remembers the count and returns the promise to answer with.
  template <class Self>
  caf::typed_response_promise<Result> arm(Self* self, int64_t expected) {
    expected_ = expected;
    promise_ = self->template make_response_promise<Result>();
    return *promise_;
  }
  /// A stop was asked for and `arrived` covers everything sent before it.
  bool ready(int64_t arrived) const { return promise_.has_value() && arrived >= expected_; }
  bool armed() const { return promise_.has_value(); }
  void deliver(Result r) {
    promise_->deliver(std::move(r));
    promise_.reset();
  }

 private:
  int64_t expected_ = -1;
  std::optional<caf::typed_response_promise<Result>> promise_;
};

}  // namespace asyncrl
