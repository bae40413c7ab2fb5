#pragma once

// host:port strings of cluster.listen and `asyncrl worker --connect`. Plain C++.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace asyncrl {

/// "host:port" (or "[v6]:port") -> host, port. Throws std::invalid_argument naming what is wrong.
std::pair<std::string, uint16_t> split_host_port(const std::string& s);

/// host, port -> "host:port", or "[host]:port" for an IPv6 address (split_host_port's inverse).
std::string join_host_port(const std::string& host, uint16_t port);

/// Empty if `s` is a valid host:port, else why not (for the config schema).
std::string check_host_port(const std::string& s);

/// 127.0.0.0/8, ::1 and "localhost": only this machine can connect.
bool is_loopback_host(const std::string& host);

/// "", 0.0.0.0 and ::: every interface, an address nobody else can connect to.
bool is_wildcard_host(const std::string& host);

/// This machine's address on the route to host:port (what the kernel would use as the source
/// of a packet sent there; nothing is sent), for a peer to reach us back. A host name is
/// resolved first. "" when there is no route or the name does not resolve. Why not the host
/// name's address: Debian maps the machine's own name to 127.0.1.1 in /etc/hosts, which no
/// other machine can reach.
std::string local_address_toward(const std::string& host, uint16_t port);

/// The addresses of this machine's interfaces that are up, IPv4 then IPv6 (link-local IPv6
/// left out: it needs a scope to be usable), loopback last.
std::vector<std::string> interface_addresses();

/// The host to print in "join with: ... --connect HOST:PORT" for a listener on `listen_host`:
/// itself, unless it is a wildcard (0.0.0.0 or ::), which no other machine can connect to; then
/// this machine's first non-loopback address of that family ("" or 0.0.0.0: IPv4 first), or
/// the loopback address when it has no other.
std::string join_host_for(const std::string& listen_host);

}  // namespace asyncrl
