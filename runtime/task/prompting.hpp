#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model/tokenizer.hpp"

namespace asyncrl {

/// The chat-free template every command shares: the prompt is <bos> question '\n', and the
/// response is the worked answer followed by <eos>. SFT, RL and eval must agree on it.
std::vector<int32_t> encode_prompt(const char_tokenizer& tok, const std::string& question);
std::vector<int32_t> encode_response(const char_tokenizer& tok, const std::string& answer);

}  // namespace asyncrl
