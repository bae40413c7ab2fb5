#include "messages/errors.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/message.hpp>

#include <string>

namespace asyncrl {

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
