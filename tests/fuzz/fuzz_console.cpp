// The console's command line: a script split at semicolons, each command parsed and checked as
// the client and the run both do. A bad command is a std::invalid_argument with the reason.

#include <cstdint>
#include <stdexcept>
#include <string>

#include "runtime/console/commands.hpp"

using namespace asyncrl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string script(reinterpret_cast<const char*>(data), size);
  try {
    for (const auto& line : split_script(script)) {
      try {
        auto c = parse_command(line);
        check_command(c.cmd, c.args);
        (void)help_text(c.args.empty() ? "" : c.args.front());
      } catch (const std::invalid_argument&) {
      }
    }
  } catch (const std::invalid_argument&) {  // an unterminated quote
  }
  return 0;
}
