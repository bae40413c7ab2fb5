// asyncrl_remote_echo: the far side of tests/test_remote_types.cpp. A separate process (CAF 0.17
// sends an unregistered type as an empty message, so only a real process boundary shows whether
// a type crosses). It publishes an actor that answers every message with the message itself on
// 127.0.0.1 (a free port), prints the port as one line on stdout, and lives until its stdin
// closes (the parent controls its lifetime) or 60 s pass.

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/message_view.hpp>
#include <caf/send.hpp>

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "messages/type_ids.hpp"

namespace {

caf::behavior echo(caf::event_based_actor* self) {
  // Whatever arrives (any type, any number of elements) goes back as the response.
  self->set_default_handler(
      [](caf::scheduled_actor*, caf::message_view& x) -> caf::result<caf::message> {
        return x.move_content_to_message();
      });
  // A behavior must not be empty, or the actor terminates at once.
  return {[](caf::ping_atom) { return caf::pong_atom::value; }};
}

// Returns when stdin reaches end of file (or fails) or after `limit`.
void wait_for_stdin_close(std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  char buf[256];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return;
    pollfd p{STDIN_FILENO, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return;
    const auto n = read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // closed (or broken)
  }
}

}  // namespace

int main() {
  caf::actor_system_config cfg;
  cfg.load<caf::io::middleman>();
  asyncrl::register_message_types(cfg);
  caf::actor_system sys{cfg};
  auto self = sys.spawn(echo);
  auto port = sys.middleman().publish(self, 0, "127.0.0.1");
  if (!port) {
    std::cerr << "asyncrl_remote_echo: publish failed: " << sys.render(port.error()) << std::endl;
    caf::anon_send_exit(self, caf::exit_reason::user_shutdown);
    return 1;
  }
  std::cout << *port << std::endl;  // endl flushes: the parent is waiting for this line
  wait_for_stdin_close(std::chrono::seconds(60));
  caf::anon_send_exit(self, caf::exit_reason::user_shutdown);
  return 0;
}
