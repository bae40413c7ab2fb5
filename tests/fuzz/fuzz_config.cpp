// The YAML config loader with overrides: the input up to the first NUL byte is the file, each
// NUL-separated part after it one key=value override. Bad input is a config_error naming the
// place; nothing else may escape.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/config/run_config.hpp"
#include "runtime/config/schema.hpp"

using namespace asyncrl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  size_t b = 0;
  for (size_t e; (e = input.find('\0', b)) != std::string::npos; b = e + 1)
    parts.push_back(input.substr(b, e - b));
  parts.push_back(input.substr(b));
  const std::string yaml = parts.front();
  parts.erase(parts.begin());
  if (parts.size() > 8) parts.resize(8);
  try {
    auto lc = load_config_text(yaml, "fuzz.yaml", parts);
    (void)lc->schema.dump_yaml();
  } catch (const config_error&) {
  }
  return 0;
}
