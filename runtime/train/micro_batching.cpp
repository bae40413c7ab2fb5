#include "runtime/train/micro_batching.hpp"

#include <set>
#include <stdexcept>

namespace asyncrl {

namespace {

// Tokens sample `s` adds to a micro-batch whose groups so far are `groups`.
int64_t added_tokens(const scored_sample& s, bool shared_prompt, std::set<uint64_t>& groups) {
  const auto response = static_cast<int64_t>(s.response.size());
  const auto prompt = static_cast<int64_t>(s.prompt.size());
  if (!shared_prompt) return prompt + response;
  return groups.insert(s.group_id).second ? prompt + response : response;
}

}  // namespace

int64_t packed_tokens(const std::vector<const scored_sample*>& samples, bool shared_prompt) {
  std::set<uint64_t> groups;
  int64_t n = 0;
  for (const auto* s : samples)
    n += added_tokens(*s, shared_prompt, groups);
  return n;
}

size_t full_micro_batch(const std::vector<const scored_sample*>& samples, int64_t budget,
                        bool shared_prompt) {
  if (budget <= 0) throw std::invalid_argument("full_micro_batch: the budget must be > 0");
  std::set<uint64_t> groups;
  int64_t n = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    n += added_tokens(*samples[i], shared_prompt, groups);
    if (n > budget) return i == 0 ? 1 : i;
  }
  return 0;
}

std::vector<std::vector<const scored_sample*>> split_by_tokens(
    const std::vector<const scored_sample*>& samples, int64_t budget, bool shared_prompt) {
  std::vector<std::vector<const scored_sample*>> out;
  std::vector<const scored_sample*> rest(samples);
  while (!rest.empty()) {
    size_t n = full_micro_batch(rest, budget, shared_prompt);
    if (n == 0) n = rest.size();
    out.emplace_back(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(n));
    rest.erase(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(n));
  }
  return out;
}

}  // namespace asyncrl
