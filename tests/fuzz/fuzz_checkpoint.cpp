// The checkpoint reader on arbitrary bytes, twice per input: as a whole file (magic, version,
// lengths, checksum) and as a payload behind a valid header with its true SHA-256, so that the
// section decoder is reached too (a checksum would stop nearly every random payload).

#include <openssl/evp.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "runtime/checkpoint/checkpoint_file.hpp"
#include "tests/fuzz/fuzz_util.hpp"

using namespace asyncrl;

namespace {

void read(const std::string& bytes) {
  const auto& path =
      fuzz::input_file(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), ".ckpt");
  try {
    auto c = read_checkpoint(path);
    for (const auto& [name, data] : c.sections)
      (void)data.size();
  } catch (const checkpoint_error&) {
  } catch (const std::runtime_error&) {  // unreadable, as documented
  }
}

void put_le(std::string& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  read(input);
  std::string file = "ASYNCRLC";
  put_le(file, kCheckpointFormat, 4);
  put_le(file, 0, 4);
  put_le(file, 12, 8);  // the step; the file name is not canonical, so it is not compared
  put_le(file, size, 8);
  std::array<unsigned char, 32> md{};
  unsigned len = 0;
  EVP_Digest(data, size, md.data(), &len, EVP_sha256(), nullptr);
  file.append(reinterpret_cast<const char*>(md.data()), md.size());
  file += input;
  read(file);
  return 0;
}
