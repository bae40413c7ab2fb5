// tokenizer.json from outside, then encode and decode of arbitrary bytes. The input's first
// byte picks the case: even, the input after it is a tokenizer.json to load (a bad one is a
// std::runtime_error naming the file); odd, it is text for the fixture tokenizer
// (tests/fixtures/hf_tiny: byte-level BPE with added tokens), encoded, decoded, and its bytes
// read back as token ids and decoded.

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/text/hf_tokenizer.hpp"
#include "tests/fuzz/fuzz_util.hpp"

#ifndef ASYNCRL_SOURCE_DIR
#error "ASYNCRL_SOURCE_DIR must be defined"
#endif

using namespace asyncrl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    const auto& path = fuzz::input_file(data + 1, size - 1, ".json");
    try {
      auto t = hf_tokenizer::load_files(path, "");
      auto ids = t->encode("Hello, world! 12 + 30 = 42\n");
      (void)t->decode(ids);
    } catch (const std::runtime_error&) {
    }
    return 0;
  }
  static const auto tok =
      hf_tokenizer::load_dir(std::string(ASYNCRL_SOURCE_DIR) + "/tests/fixtures/hf_tiny");
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto ids = tok->encode(text);
  (void)tok->decode(ids, true);
  (void)tok->decode(ids, false);
  std::vector<int32_t> raw((size - 1) / 4);
  if (!raw.empty()) std::memcpy(raw.data(), data + 1, raw.size() * 4);
  (void)tok->decode(raw, false);
  for (auto id : raw)
    (void)tok->token_bytes(id, false);
  return 0;
}
