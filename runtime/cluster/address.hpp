#pragma once

// host:port strings of cluster.listen and `asyncrl worker --connect`. Plain C++.

#include <cstdint>
#include <string>
#include <utility>

namespace asyncrl {

/// "host:port" (or "[v6]:port") -> host, port. Throws std::invalid_argument naming what is wrong.
std::pair<std::string, uint16_t> split_host_port(const std::string& s);

/// Empty if `s` is a valid host:port, else why not (for the config schema).
std::string check_host_port(const std::string& s);

/// 127.0.0.0/8, ::1 and "localhost": only this machine can connect.
bool is_loopback_host(const std::string& host);

}  // namespace asyncrl
