#pragma once

// What rank 0's policy_trainer tells the other ranks of a multi-process data-parallel group, so
// that they replay its calls (dp_leader.hpp posts them; dp_follower.hpp replays them). The
// trainer actor drives rank 0 exactly as it drives a single trainer. Torch-free.

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/train/samples.hpp"

namespace asyncrl {

/// The commands, in the order rank 0 posts them to each other rank.
enum class dp_command : uint8_t {
  micro_batch,       // payload: sample_codec bytes; the rank accumulates it
  begin_batch,       // old <- policy
  step,              // the collective step
  save,              // a sharded save_state (collective: the shards are gathered)
  load,              // load_state; the bytes follow by broadcast
  set_lr,            // payload: 8 bytes, a double
  discard,           // discard_pending
  stop,              // the run is over: exit
  micro_batch_last,  // payload as micro_batch; the step's last: the rank sums during its backward
  close,             // the step's last micro-batch went elsewhere: start summing the gradients
};

class dp_commands {
 public:
  virtual ~dp_commands() = default;
  /// The rank that accumulates this micro-batch; when it is not 0 the micro-batch is sent there
  /// now, so the ranks work on their shares while rank 0 works on its own. `last`: the step's
  /// last micro-batch; every rank other than 0 and the one it goes to is told to close its
  /// gradients (policy_trainer::close_gradients) now.
  virtual int route(const std::vector<const scored_sample*>& micro, bool last) = 0;
  virtual void begin_batch() = 0;
  virtual void step() = 0;
  virtual void save() = 0;
  virtual void load(std::string& state) = 0;
  virtual void set_lr(double lr) = 0;
  virtual void discard() = 0;
  /// After a collective failed: which rank is gone, and how (", trainer rank 1 (pid 42) was
  /// killed by signal 9"), or "" when nothing more is known.
  virtual std::string diagnosis() = 0;
};

}  // namespace asyncrl
