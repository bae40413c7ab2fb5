#pragma once

// Message payloads with every field set, for the tests that send them through CAF's
// serialization (test_messages.cpp) and to another process and back (test_remote_types.cpp):
// a field that a round trip loses comes back as its default and fails the comparison.

#include <cstdint>
#include <type_traits>

#include "messages/payloads.hpp"
#include "runtime/common/fields.hpp"

namespace asyncrl::test {

/// The queue's counters, each a distinct value, the window vectors and strings non-empty.
inline queue_stats make_queue_stats() {
  return {101, 102, 103, 104, 105, 106, 107, 119, 120, 121,   108,  109,        110,
          111, 112, 113, 122, 123, 124, 114, 115, 125, "eta", true, {116, 117}, {0, 118}};
}

/// Every field a distinct non-default value, so a field that inspect() leaves out comes back
/// as its default and fails the comparison.
inline update_stats make_update_stats() {
  update_stats u;
  double next = 1.5;
  for_each_field(u, [&](const char*, auto& v) {
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<T, bool>)
      v = true;
    else
      v = static_cast<T>(next);
    next += 1.0;
  });
  return u;
}

/// The fields of make_step_report that the two tests set to values of their own. The defaults
/// are test_remote_types.cpp's: fractions exact in binary, a byte count past 32 bits, a
/// negative checksum, and the step's timings left unset (-1).
struct step_report_values {
  double accuracy = 0.25;
  double partial_ratio = 0.125;
  int64_t sync_bytes = 1LL << 34;
  double params_checksum = -16.5;
  double eval_accuracy = 0.5;
  double first_group_ms = -1, last_group_ms = -1, first_train_ms = -1;
};

/// A step report with make_update_stats() and make_queue_stats() inside, every other field
/// non-default: the values in `v`, and the same ones in every test for the rest.
inline step_report make_step_report(const step_report_values& v = {}) {
  step_report r;
  r.step = 1, r.policy_version = 2, r.update = make_update_stats(), r.reward_mean = 3.5;
  r.accuracy = v.accuracy, r.samples = 5, r.stale_samples = 6, r.partial_ratio = v.partial_ratio;
  r.max_partial_span = 8, r.groups_trained = 9, r.filtered_groups = 10, r.reward_failures = 11;
  r.refilled_groups = 22, r.refill_exhausted = true;
  r.step_ms = 12.5, r.trainer_idle_ms = 13.5, r.first_group_ms = v.first_group_ms;
  r.last_group_ms = v.last_group_ms, r.first_train_ms = v.first_train_ms, r.sync_time_ms = 14.5;
  r.sync_bytes = v.sync_bytes, r.params_checksum = v.params_checksum;
  r.queue = make_queue_stats(), r.prox_version = 17, r.out_of_order_groups = 18;
  r.eval_accuracy = v.eval_accuracy, r.eval_time_s = 20.5, r.group_ids = {21, 1ULL << 50};
  r.rewards = {0.25, -1.5}, r.response_lengths = {23, 1 << 20};
  return r;
}

}  // namespace asyncrl::test
