#include "runtime/cluster/address.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace asyncrl {

std::pair<std::string, uint16_t> split_host_port(const std::string& s) {
  const auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0)
    throw std::invalid_argument("expected host:port, got '" + s + "'");
  std::string host = s.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  else if (host.find(':') != std::string::npos)
    throw std::invalid_argument("an IPv6 address needs brackets: [" + host + "]:port");
  const auto port = s.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    throw std::invalid_argument("port of '" + s + "' is not a number");
  const auto n = std::stol(port);
  if (n > 65535) throw std::invalid_argument("port " + port + " is over 65535");
  return {host, static_cast<uint16_t>(n)};
}

std::string check_host_port(const std::string& s) {
  try {
    split_host_port(s);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return {};
}

bool is_loopback_host(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

bool is_wildcard_host(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::";
}

std::string local_address_toward(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const auto service = std::to_string(port == 0 ? 9 : port);
  if (getaddrinfo(host.c_str(), service.c_str(), &hints, &found) != 0 || !found) return {};
  std::string out;
  for (auto* a = found; a && out.empty(); a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    // connect() on a datagram socket only picks the route and the source address.
    sockaddr_storage mine{};
    socklen_t len = sizeof(mine);
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &len) == 0) {
      char buf[INET6_ADDRSTRLEN] = {};
      const void* raw =
          mine.ss_family == AF_INET
              ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(&mine)->sin_addr)
              : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(&mine)->sin6_addr);
      if (inet_ntop(mine.ss_family, raw, buf, sizeof(buf))) out = buf;
    }
    close(fd);
  }
  freeaddrinfo(found);
  return out;
}

}  // namespace asyncrl
