#include "runtime/serve/choice_text.hpp"

#include <algorithm>

#include "runtime/text/tokenizer.hpp"

namespace asyncrl {

choice_text::choice_text(std::vector<std::string> stop, std::vector<int32_t> stop_ids)
    : stop_(std::move(stop)), stop_ids_(std::move(stop_ids)) {
  for (const auto& s : stop_)
    hold_ = std::max(hold_, s.size() - 1);
}

bool choice_text::push(int32_t id, float logprob, const tokenizer& tok) {
  if (ended_) return true;
  tokens_.push_back(id);
  logprobs_.push_back(logprob);
  if (std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end()) {
    text_ += utf8_.flush();
    find_stop();  // held bytes may complete a stop string too
    stopped_ = ended_ = true;
    return true;
  }
  text_ += utf8_.push(tok.token_bytes(id, /*skip_special=*/true));
  if (find_stop()) {
    stopped_ = ended_ = true;
    return true;
  }
  return false;
}

void choice_text::finish() {
  if (ended_) return;
  text_ += utf8_.flush();
  stopped_ = find_stop();
  ended_ = true;
}

// Searches only where a match could begin that was not ruled out before: a stop string that
// ends in new text begins at most hold_ bytes before it.
bool choice_text::find_stop() {
  if (stop_.empty()) return false;
  size_t best = std::string::npos;
  for (const auto& s : stop_) {
    auto at = text_.find(s, scanned_);
    if (at != std::string::npos) best = std::min(best, at);
  }
  if (best != std::string::npos) {
    text_.resize(best);
    text_taken_ = std::min(text_taken_, text_.size());
    return true;
  }
  scanned_ = text_.size() > hold_ ? text_.size() - hold_ : 0;
  return false;
}

std::string choice_text::take_text() {
  size_t safe = text_.size();
  if (!ended_) {
    safe = text_.size() > hold_ ? text_.size() - hold_ : 0;
    // Never split a character: back up to the start of the one `safe` falls in.
    while (safe > text_taken_ && safe < text_.size() &&
           (static_cast<unsigned char>(text_[safe]) & 0xC0) == 0x80)
      --safe;
  }
  if (safe <= text_taken_) return {};
  auto out = text_.substr(text_taken_, safe - text_taken_);
  text_taken_ = safe;
  return out;
}

}  // namespace asyncrl
