// An external scorer's frames as the trainer reads them: the 4-byte length, then the answer
// body (uid 7 expected), and the request decoder the scorer side uses. Malformed is a reason,
// never a crash or an exception.

#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "runtime/task/scorer_frames.hpp"

using namespace asyncrl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= 4) (void)scorer_frame_length(data);
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  (void)decode_scorer_answer(body, 7);
  (void)decode_scorer_request(body);
  return 0;
}
