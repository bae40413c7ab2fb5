#include "runtime/task/prompting.hpp"

namespace asyncrl {

std::vector<int32_t> encode_prompt(const char_tokenizer& tok, const std::string& question) {
  std::vector<int32_t> ids{tok.bos_id()};
  auto q = tok.encode(question + "\n");
  ids.insert(ids.end(), q.begin(), q.end());
  return ids;
}

std::vector<int32_t> encode_response(const char_tokenizer& tok, const std::string& answer) {
  auto ids = tok.encode(answer);
  ids.push_back(tok.eos_id());
  return ids;
}

}  // namespace asyncrl
