// Weights as they arrive from another node: chunks into the assembler (version, index, count,
// offset, total, digest drawn from the input), then the packed snapshot decoder on the input
// itself. A bad chunk is refused with a reason; a bad blob is a std::runtime_error.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/cluster/weight_chunks.hpp"
#include "runtime/model/weight_blob.hpp"

using namespace asyncrl;

namespace {

// Reads n bytes of the input as a little-endian integer (0 past its end).
struct reader {
  const uint8_t* p;
  size_t left;
  uint64_t take(int n) {
    uint64_t v = 0;
    for (int i = 0; i < n && left > 0; ++i, --left)
      v |= static_cast<uint64_t>(*p++) << (8 * i);
    return v;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto w = unpack_weights(reinterpret_cast<const char*>(data), size);
    (void)w.blob->bytes();
  } catch (const std::runtime_error&) {
  }
  // Up to 8 chunks: a header of 1+1+1+2+2 bytes each, then its bytes (at most 64).
  reader r{data, size};
  weight_assembler a;
  for (int k = 0; k < 8 && r.left > 0; ++k) {
    const auto version = static_cast<int64_t>(r.take(1)) - 1;
    const auto index = static_cast<int32_t>(r.take(1)) - 1;
    const auto count = static_cast<int32_t>(r.take(1));
    const auto offset = static_cast<int64_t>(r.take(2)) - 8;
    const auto total = static_cast<int64_t>(r.take(2));
    const size_t n = std::min<size_t>(r.left, r.take(1) % 65);
    std::vector<char> bytes(r.p, r.p + n);
    r.p += n;
    r.left -= n;
    // The digest of the whole, when the input says so, lets a consistent series complete.
    const std::string digest = (version & 1) ? sha256_hex(bytes.data(), bytes.size()) : "x";
    (void)a.add(version, index, count, offset, total, digest, bytes);
    if (a.complete()) (void)a.take();
  }
  return 0;
}
