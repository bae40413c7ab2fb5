#include "runtime/train/dp_follower.hpp"

#include <cstring>
#include <stdexcept>

#include "runtime/dist/dist_group.hpp"
#include "runtime/train/dp_commands.hpp"
#include "runtime/train/dp_leader.hpp"
#include "runtime/train/policy_trainer.hpp"
#include "runtime/train/sample_codec.hpp"

namespace asyncrl {

void follow_rank_zero(policy_trainer& pt, dist_group& group, const follower_options& o) {
  int64_t steps = 0;
  bool resumed = false;
  for (int64_t seq = 0;;) {
    auto bytes = group.fetch(dp_command_key(group.rank(), seq), o.poll);
    if (!bytes) continue;
    ++seq;
    if (bytes->empty())
      throw std::runtime_error("data-parallel command " + std::to_string(seq) + " is empty");
    const auto c = static_cast<dp_command>(static_cast<uint8_t>((*bytes)[0]));
    const std::string payload = bytes->substr(1);
    switch (c) {
      case dp_command::micro_batch:
      case dp_command::micro_batch_last: {
        const auto samples = decode_samples(payload);
        std::vector<const scored_sample*> micro;
        for (const auto& s : samples)
          micro.push_back(&s);
        pt.accumulate(micro, c == dp_command::micro_batch_last);
        break;
      }
      case dp_command::close:
        pt.close_gradients();
        break;
      case dp_command::begin_batch:
        pt.begin_batch();
        break;
      case dp_command::step:
        ++steps;
        if (o.before_step) o.before_step(steps, resumed);
        pt.step();
        break;
      case dp_command::save:
        pt.save_state();  // the collective gather; rank 0 keeps the bytes
        break;
      case dp_command::load: {
        std::string state;
        group.broadcast_bytes(state, 0);
        pt.load_state(state);
        resumed = true;
        break;
      }
      case dp_command::set_lr: {
        double lr = 0;
        if (payload.size() != sizeof lr)
          throw std::runtime_error("data-parallel set_lr: bad payload");
        std::memcpy(&lr, payload.data(), sizeof lr);
        pt.set_lr(lr);
        break;
      }
      case dp_command::discard:
        pt.discard_pending();
        break;
      case dp_command::stop:
        return;
      default:
        throw std::runtime_error("data-parallel command " + std::to_string(seq) +
                                 " has unknown kind " + std::to_string(int((*bytes)[0])));
    }
  }
}

}  // namespace asyncrl
