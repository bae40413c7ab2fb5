// The safetensors reader on arbitrary bytes: a model file from outside. Every offset, size and
// shape must be checked before it is used; a bad file is a safetensors_error, never a crash.

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "runtime/model/safetensors.hpp"

using namespace asyncrl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = safetensors_file::parse(std::vector<uint8_t>(data, data + size), "fuzz");
    for (const auto& t : f.tensors()) {
      (void)f.find(t.name);
      if (t.numel() <= (1 << 16)) {  // reads every element of small tensors
        try {
          (void)f.to_f32(t);
        } catch (const safetensors_error&) {  // integer dtypes
        }
      }
    }
  } catch (const safetensors_error&) {
  }
  return 0;
}
