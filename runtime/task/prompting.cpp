#include "runtime/task/prompting.hpp"

#include <stdexcept>

#include "runtime/text/chat_template.hpp"
#include "runtime/text/hf_tokenizer.hpp"
#include "runtime/tools/builtin_env.hpp"

namespace asyncrl {

namespace {

int32_t need_special(const tokenizer& tok, const std::string& content, chat_format f) {
  auto id = tok.special_id(content);
  if (id < 0)
    throw std::runtime_error(std::string("data.chat_template=") + to_string(f) +
                             " needs the token " + content +
                             ", which the tokenizer does not have; set data.chat_template");
  return id;
}

}  // namespace

prompt_format make_prompt_format(const tokenizer& tok, chat_format requested,
                                 const std::string& system_prompt) {
  const auto* hf = dynamic_cast<const hf_tokenizer*>(&tok);
  const std::string jinja = hf != nullptr ? hf->chat_template() : std::string();
  prompt_format f;
  f.chat = requested;
  if (requested == chat_format::auto_detect)
    f.chat = detect_chat_format(jinja, "tokenizer_config.json");
  f.system_prompt = system_prompt;
  switch (f.chat) {
    case chat_format::none:
      f.stop_id = tok.eos_id();
      if (f.stop_id < 0)
        throw std::runtime_error(
            "the tokenizer has no eos_token (tokenizer_config.json), so a plain prompt's response "
            "cannot end; set data.chat_template=qwen or llama3");
      break;
    case chat_format::qwen:
    case chat_format::qwen3:
      f.stop_id = need_special(tok, "<|im_end|>", f.chat);
      need_special(tok, "<|im_start|>", f.chat);
      if (f.system_prompt.empty()) f.system_prompt = default_system_prompt(jinja);
      break;
    case chat_format::llama3:
    case chat_format::llama3_1:
      f.stop_id = need_special(tok, "<|eot_id|>", f.chat);
      need_special(tok, "<|start_header_id|>", f.chat);
      need_special(tok, "<|end_header_id|>", f.chat);
      if (tok.bos_id() >= 0) f.bos_text = tok.decode({tok.bos_id()}, /*skip_special=*/false);
      break;
    case chat_format::auto_detect:
      break;
  }
  return f;
}

std::vector<int32_t> encode_prompt(const tokenizer& tok, const prompt_format& f,
                                   const qa_example& ex) {
  if (f.chat == chat_format::none) {
    std::vector<int32_t> ids;
    if (tok.bos_id() >= 0) ids.push_back(tok.bos_id());
    auto q = tok.encode(ex.question + "\n");
    ids.insert(ids.end(), q.begin(), q.end());
    return ids;
  }
  std::vector<chat_message> msgs;
  const bool has_system = !ex.messages.empty() && ex.messages.front().role == "system";
  if (!has_system && !f.system_prompt.empty()) msgs.push_back({"system", f.system_prompt});
  if (ex.messages.empty())
    msgs.push_back({"user", ex.question});
  else
    msgs.insert(msgs.end(), ex.messages.begin(), ex.messages.end());
  return tok.encode(render_chat(f.chat, msgs, f.bos_text));
}

std::vector<int32_t> encode_prompt(const tokenizer& tok, const prompt_format& f,
                                   const std::string& question) {
  qa_example ex;
  ex.question = question;
  return encode_prompt(tok, f, ex);
}

std::vector<int32_t> encode_response(const tokenizer& tok, const prompt_format& f,
                                     const std::string& answer) {
  auto ids = tok.encode(answer);
  ids.push_back(f.stop_id);
  return ids;
}

encoded_response encode_trace_response(const tokenizer& tok, const prompt_format& f,
                                       const std::string& answer) {
  encoded_response out;
  for (const auto& span : split_calculator_trace(answer)) {
    auto ids = tok.encode(span.text);
    if (span.model) ids.push_back(f.stop_id);
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    out.mask.insert(out.mask.end(), ids.size(), span.model ? 1 : 0);
  }
  return out;
}

}  // namespace asyncrl
