#pragma once

// Exceptions never cross an actor boundary: each role turns one into an error value that ends
// the actor, which its supervisor (the controller) sees and reports.

#include <spdlog/spdlog.h>
#include <caf/error.hpp>
#include <caf/scheduled_actor.hpp>
#include <caf/sec.hpp>

#include "messages/errors.hpp"

#include <exception>
#include <string>

namespace asyncrl {

inline void install_exception_handler(caf::scheduled_actor* self, std::string role) {
  self->set_exception_handler([role](std::exception_ptr& ep) -> caf::error {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::error("{}: {}", role, what);
    return caf::make_error(errc::role_failed, role + ": " + what);
  });
}

}  // namespace asyncrl
