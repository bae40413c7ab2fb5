#include "runtime/text/utf8_stream.hpp"

#include "runtime/text/utf8.hpp"

namespace asyncrl {

std::string utf8_stream::push(std::string_view bytes) {
  std::string out;
  if (held_.empty()) {
    size_t used = utf8::append_lossy(bytes, false, out);
    held_.assign(bytes.substr(used));
    return out;
  }
  // Re-examine the held bytes together with the new ones: the new bytes may complete the held
  // sequence, or show that it was invalid (then it becomes U+FFFD and the rest is decoded anew).
  held_.append(bytes);
  size_t used = utf8::append_lossy(held_, false, out);
  held_.erase(0, used);
  return out;
}

std::string utf8_stream::flush() {
  std::string out = utf8::lossy(held_);
  held_.clear();
  return out;
}

}  // namespace asyncrl
