#include "apps/asyncrl/run_secret.hpp"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace asyncrl {

std::string random_hex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1)
    throw std::runtime_error("RAND_bytes failed");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char b : raw) {
    out.push_back(hex[b >> 4]);
    out.push_back(hex[b & 15]);
  }
  return out;
}

std::string write_run_secret(const std::string& run_dir) {
  const auto secret = random_hex(32);
  const auto path = run_dir + "/run.secret";
  const auto tmp = path + ".tmp";
  // Created 0600 (and forced to it: a leftover temporary may have had other bits), written,
  // then renamed over the old one: nobody but the owner can read it at any moment.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || ::fchmod(fd, 0600) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(err));
  }
  const std::string line = secret + "\n";
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  const int err = errno;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(ok ? errno : err));
  return secret;
}

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  if (!in || !std::getline(in, s))
    throw std::runtime_error("cannot read the run secret " + path + ": " +
                             std::strerror(errno ? errno : EACCES) +
                             " (only the run's owner can read it)");
  return s;
}

}  // namespace

std::string read_run_secret(const std::string& secret_file, const std::string& fallback_file) {
  if (!secret_file.empty()) return read_file(secret_file);
  if (const char* env = std::getenv("ASYNCRL_RUN_SECRET"); env && *env) return env;
  if (!fallback_file.empty() && ::access(fallback_file.c_str(), F_OK) == 0)
    return read_file(fallback_file);
  return "";
}

}  // namespace asyncrl
