#pragma once

// How `asyncrl repl` shows the run's answers to a person: tables for status, metrics and
// workers, `key: value` lines for the rest, and the one-line summary `watch` refreshes. The
// answers are the JSON objects the controller sends (actors/controller_console.cpp); --json
// prints those unchanged.

#include <nlohmann/json.hpp>

#include <string>

#include "runtime/console/commands.hpp"

namespace asyncrl {

/// The text for the answer `result` to `cmd`.
std::string render_reply(console_cmd cmd, const nlohmann::ordered_json& result);

/// One line: step, state, versions, queue, staleness, in flight, rollouter states.
std::string status_line(const nlohmann::ordered_json& status);

}  // namespace asyncrl
