// CAF 0.17's openssl module accepts TLS connections with SSL_accept and closes those whose
// handshake fails without a trace (its logging is compiled out in Debian's build). A refused
// peer is a security event the operator must see, so this file puts a thin wrapper in front of
// OpenSSL's SSL_accept: the executable exports it (see CMakeLists.txt), the dynamic linker
// binds libcaf_openssl's calls to it, and it forwards to the real function, logging failures.

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <atomic>
#include <string>

#include "apps/asyncrl/cluster_setup.hpp"

namespace {

std::atomic<bool> enabled{false};

std::string peer_of(SSL* ssl) {
  sockaddr_storage sa{};
  socklen_t len = sizeof(sa);
  if (getpeername(SSL_get_fd(ssl), reinterpret_cast<sockaddr*>(&sa), &len) != 0)
    return "unknown peer";
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&sa);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
    return std::string(buf) + ":" + std::to_string(ntohs(a->sin_port));
  }
  auto* a = reinterpret_cast<sockaddr_in6*>(&sa);
  inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
  return "[" + std::string(buf) + "]:" + std::to_string(ntohs(a->sin6_port));
}

}  // namespace

extern "C" int SSL_accept(SSL* ssl) {
  using fn = int (*)(SSL*);
  static fn real = reinterpret_cast<fn>(dlsym(RTLD_NEXT, "SSL_accept"));
  // The peer's address is read before the handshake: a refused peer often closes its end at
  // once, after which getpeername fails with ENOTCONN.
  const std::string peer = enabled.load() ? peer_of(ssl) : std::string();
  const int ret = real(ssl);
  if (ret <= 0 && enabled.load()) {
    const int err = SSL_get_error(ssl, ret);
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
      char reason[256] = "connection closed during the handshake";
      if (auto e = ERR_peek_error()) ERR_error_string_n(e, reason, sizeof(reason));
      spdlog::warn("cluster: refused a connection from {}: TLS handshake failed: {}", peer, reason);
    }
  }
  return ret;
}

namespace asyncrl {

void log_tls_refusals() {
  enabled = true;
}

}  // namespace asyncrl
