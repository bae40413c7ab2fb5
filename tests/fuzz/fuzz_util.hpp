#pragma once

// Helpers shared by the fuzz targets: the readers under test take paths, so each target writes
// its input to one temporary file of its own (in /dev/shm when there is one) and reads it back.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace asyncrl::fuzz {

/// A file of this process holding the bytes of the current input.
inline const std::string& input_file(const uint8_t* data, size_t size, const char* suffix = "") {
  static std::string path = [suffix] {
    const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string p = std::string(dir) + "/asyncrl-fuzz-" + std::to_string(getpid()) + suffix;
    std::atexit([] { std::remove(path.c_str()); });
    return p;
  }();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace asyncrl::fuzz
