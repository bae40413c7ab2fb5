#include "runtime/text/chat_template.hpp"

#include <stdexcept>

namespace asyncrl {

namespace {

// Jinja's `trim` filter: Python's str.strip() without arguments (Unicode whitespace; the ASCII
// subset covers what prompts contain).
std::string trim(const std::string& s) {
  const char* ws = " \t\n\r\v\f";
  auto b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

}  // namespace

chat_format detect_chat_format(const std::string& jinja, const std::string& source) {
  if (jinja.empty()) return chat_format::none;
  if (jinja.find("<|im_start|>") != std::string::npos) return chat_format::qwen;
  if (jinja.find("<|start_header_id|>") != std::string::npos) return chat_format::llama3;
  throw std::runtime_error(source +
                           ": chat_template is neither the Qwen (<|im_start|>) nor the Llama-3 "
                           "(<|start_header_id|>) format, the ones asyncrl renders; set "
                           "data.chat_template=qwen, llama3 or none");
}

std::string default_system_prompt(const std::string& jinja) {
  // Qwen2 and Qwen2.5 write the default as a literal inside the template:
  //   '<|im_start|>system\nYou are Qwen, ... assistant.<|im_end|>\n'
  // (the \n is the two characters '\' 'n' in the Jinja source). Qwen3's has none.
  const std::string open = "<|im_start|>system\\n";
  for (size_t at = jinja.find(open); at != std::string::npos; at = jinja.find(open, at + 1)) {
    auto begin = at + open.size();
    auto end = jinja.find("<|im_end|>", begin);
    if (end == std::string::npos) break;
    auto text = jinja.substr(begin, end - begin);
    // The other occurrence is '<|im_start|>system\n' + messages[0]['content'] + ...
    if (text.find('\'') == std::string::npos && text.find('+') == std::string::npos) return text;
  }
  return "";
}

std::string render_chat(chat_format format, const std::vector<chat_message>& messages,
                        const std::string& bos_text) {
  std::string out;
  switch (format) {
    case chat_format::qwen:
      for (auto& m : messages)
        out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      out += "<|im_start|>assistant\n";
      return out;
    case chat_format::llama3:
      out = bos_text;
      for (auto& m : messages)
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) +
               "<|eot_id|>";
      out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return out;
    case chat_format::none:
    case chat_format::auto_detect:
      break;
  }
  throw std::logic_error("render_chat: format must be qwen or llama3");
}

}  // namespace asyncrl
