#include "messages/errors.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/message.hpp>

#include <string>

namespace asyncrl {

const char* to_string(errc x) {
  switch (x) {
    case errc::none:
      return "none";
    case errc::role_failed:
      return "role_failed";
    case errc::run_over:
      return "run_over";
    case errc::unauthorized:
      return "unauthorized";
    case errc::bad_request:
      return "bad_request";
    case errc::bad_weights:
      return "bad_weights";
    case errc::join_failed:
      return "join_failed";
    case errc::not_ready:
      return "not_ready";
    case errc::scorer_failed:
      return "scorer_failed";
    case errc::scorer_gave_up:
      return "scorer_gave_up";
    case errc::reward_gave_up:
      return "reward_gave_up";
    case errc::injected_fault:
      return "injected_fault";
    case errc::interrupted:
      return "interrupted";
  }
  return "unknown";
}

bool is(const caf::error& e, errc c) {
  return e.category() == caf::atom("asyncrl") && e.code() == static_cast<uint8_t>(c);
}

void register_error_category(caf::actor_system_config& cfg) {
  cfg.add_error_category(
      caf::atom("asyncrl"), [](uint8_t code, caf::atom_value, const caf::message& ctx) {
        std::string out = std::string("asyncrl.") + to_string(static_cast<errc>(code));
        // The sentence (and nothing else: the Reward's give-up also carries its counts).
        for (size_t i = 0; i < ctx.size(); ++i)
          if (ctx.match_element<std::string>(i)) out += ": " + ctx.get_as<std::string>(i);
        return out;
      });
}

}  // namespace asyncrl
