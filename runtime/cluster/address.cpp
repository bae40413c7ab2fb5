#include "runtime/cluster/address.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
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

std::string join_host_port(const std::string& host, uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
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

std::vector<std::string> interface_addresses() {
  std::vector<std::string> v4, v6;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  for (auto* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || !(a->ifa_flags & IFF_UP)) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr->sa_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      if (inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf))) v4.push_back(buf);
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      const auto* in = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&in->sin6_addr)) continue;
      if (inet_ntop(AF_INET6, &in->sin6_addr, buf, sizeof(buf))) v6.push_back(buf);
    }
  }
  freeifaddrs(list);
  std::vector<std::string> out;
  for (auto* v : {&v4, &v6})
    for (auto& a : *v)
      if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  // Loopback last, in their order: stable_partition keeps the order within each part.
  std::stable_partition(out.begin(), out.end(),
                        [](const std::string& a) { return !is_loopback_host(a); });
  return out;
}

std::string join_host_for(const std::string& listen_host) {
  if (!is_wildcard_host(listen_host)) return listen_host;
  const bool v6 = listen_host == "::";
  for (const auto& a : interface_addresses())
    if (!is_loopback_host(a) && (a.find(':') != std::string::npos) == v6) return a;
  return v6 ? "::1" : "127.0.0.1";
}

}  // namespace asyncrl
