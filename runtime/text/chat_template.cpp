#include "runtime/text/chat_template.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>

#include "runtime/text/tool_calls.hpp"

namespace asyncrl {

namespace {

using ojson = nlohmann::ordered_json;

// The templates' fixed text, each written once. Qwen2.5's and Qwen3's tool blocks are the same.
const std::string kQwenToolsIntro =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are "
    "provided with function signatures within <tools></tools> XML tags:\n<tools>";
const std::string kQwenToolsOutro =
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
    "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";
const std::string kQwenGeneration = "<|im_start|>assistant\n";
// Llama-3.1's template prints date_string, "26 Jul 2024" unless the caller passes one, and
// transformers' apply_chat_template passes none.
const std::string kLlama31Dates =
    "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";
const std::string kLlama31ToolsIntro =
    "Given the following functions, please respond with a JSON for a function call with its "
    "proper arguments that best answers the given prompt.\n\nRespond in the format {\"name\": "
    "function name, \"parameters\": dictionary of argument name and its value}.Do not use "
    "variables.\n\n";
const std::string kLlamaGeneration = "<|start_header_id|>assistant<|end_header_id|>\n\n";

// Jinja's `trim` filter: Python's str.strip() without arguments (Unicode whitespace; the ASCII
// subset covers what prompts contain).
std::string trim(const std::string& s) {
  const char* ws = " \t\n\r\v\f";
  auto b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// Python's str.lstrip('\n'), rstrip('\n') and strip('\n'), which Qwen3's template applies.
std::string lstrip_nl(const std::string& s) {
  auto b = s.find_first_not_of('\n');
  return b == std::string::npos ? "" : s.substr(b);
}
std::string rstrip_nl(const std::string& s) {
  auto e = s.find_last_not_of('\n');
  return e == std::string::npos ? "" : s.substr(0, e + 1);
}
std::string strip_nl(const std::string& s) {
  return lstrip_nl(rstrip_nl(s));
}

bool starts_with(const std::string& s, const std::string& p) {
  return s.compare(0, p.size(), p) == 0;
}
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

ojson parse_json(const std::string& text, const std::string& what) {
  try {
    return ojson::parse(text);
  } catch (const std::exception& e) {
    throw std::invalid_argument("render_chat: " + what + " is not JSON: " + e.what());
  }
}

// The tools as the template sees them: nullopt for "" (tools=None), else a JSON array.
std::optional<ojson> parse_tools(const std::string& tools_json) {
  if (tools_json.empty()) return std::nullopt;
  auto j = parse_json(tools_json, "tools");
  if (!j.is_array()) throw std::invalid_argument("render_chat: tools must be a JSON array");
  return j;
}

std::string arguments_text(const tool_call& c) {
  return to_python_json(parse_json(c.arguments_json, "the arguments of tool call " + c.name));
}

// Qwen's calls after a turn's text: a '\n' before each call but a first one with no text.
std::string qwen_calls(const std::vector<tool_call>& calls, bool after_text) {
  std::string out;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (i > 0 || after_text) out += "\n";
    out += "<tool_call>\n{\"name\": \"" + calls[i].name +
           "\", \"arguments\": " + arguments_text(calls[i]) + "}\n</tool_call>";
  }
  return out;
}

// Qwen3 splits an assistant turn's <think>...</think> reasoning from its answer.
struct think_split {
  std::string reasoning;
  std::string content;
};

think_split split_think(const std::string& content) {
  const std::string close = "</think>", open = "<think>";
  auto first_close = content.find(close);
  if (first_close == std::string::npos) return {"", content};
  auto before = rstrip_nl(content.substr(0, first_close));
  auto last_open = before.rfind(open);
  if (last_open != std::string::npos) before = before.substr(last_open + open.size());
  return {lstrip_nl(before), lstrip_nl(content.substr(content.rfind(close) + close.size()))};
}

// A Qwen3 assistant turn after its generation prompt. The template keeps the reasoning only in
// turns after the last user query (a tool loop), and always writes a <think> block in the
// conversation's final turn.
std::string qwen3_turn(const chat_message& m, bool after_last_query, bool last) {
  auto t = split_think(m.content);
  std::string out;
  if (after_last_query && (last || !t.reasoning.empty()))
    out = "<think>\n" + strip_nl(t.reasoning) + "\n</think>\n\n" + lstrip_nl(t.content);
  else
    out = t.content;
  return out + qwen_calls(m.tool_calls, !t.content.empty());
}

std::string qwen_tool_response(const std::string& content) {
  return "\n<tool_response>\n" + content + "\n</tool_response>";
}

std::string render_qwen(chat_format format, const std::vector<chat_message>& messages,
                        const std::optional<ojson>& tools) {
  std::string out;
  const bool first_system = !messages.empty() && messages[0].role == "system";
  if (tools && !tools->empty()) {
    out = "<|im_start|>system\n";
    if (first_system) out += messages[0].content + "\n\n";
    out += kQwenToolsIntro;
    for (const auto& t : *tools)
      out += "\n" + to_python_json(t);
    out += kQwenToolsOutro;
  } else if (first_system) {
    out = "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n";
  }
  // Qwen3: the last user turn that is not tool responses pasted as text.
  int64_t last_query = static_cast<int64_t>(messages.size()) - 1;
  for (int64_t i = last_query; i >= 0; --i) {
    const auto& m = messages[static_cast<size_t>(i)];
    if (m.role == "user" &&
        !(starts_with(m.content, "<tool_response>") && ends_with(m.content, "</tool_response>"))) {
      last_query = i;
      break;
    }
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    const bool last = i + 1 == messages.size();
    if (m.role == "user" || (m.role == "system" && i > 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      out += "<|im_start|>assistant\n";
      out += format == chat_format::qwen3
                 ? qwen3_turn(m, static_cast<int64_t>(i) > last_query, last)
                 : m.content + qwen_calls(m.tool_calls, !m.content.empty());
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += qwen_tool_response(m.content);
      if (last || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    }
    // The templates render no other role.
  }
  return out + kQwenGeneration;
}

std::string llama31_call(const tool_call& c) {
  return "{\"name\": \"" + c.name + "\", \"parameters\": " + arguments_text(c) + "}";
}

// The template JSON-encodes a tool's response: a string is iterable in Jinja, so it gets quotes.
std::string llama31_tool_response(const std::string& content) {
  return "<|start_header_id|>ipython<|end_header_id|>\n\n" + to_python_json(ojson(content)) +
         "<|eot_id|>";
}

std::string render_llama31(const std::vector<chat_message>& messages, const std::string& bos_text,
                           const std::optional<ojson>& tools) {
  size_t i = 0;
  std::string system;
  if (!messages.empty() && messages[0].role == "system") system = trim(messages[i++].content);
  std::string out = bos_text + "<|start_header_id|>system<|end_header_id|>\n\n";
  if (tools) out += "Environment: ipython\n";
  out += kLlama31Dates + system + "<|eot_id|>";
  if (tools) {
    // The tools go into the first turn after the system turn, whatever its role.
    if (i == messages.size())
      throw std::invalid_argument(
          "render_chat: Llama-3.1's template puts the tools in the first user turn, and there is "
          "none");
    out += "<|start_header_id|>user<|end_header_id|>\n\n" + kLlama31ToolsIntro;
    for (const auto& t : *tools)
      out += to_python_json(t, 4) + "\n\n";
    out += trim(messages[i++].content) + "<|eot_id|>";
  }
  for (; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (!m.tool_calls.empty())
      out += kLlamaGeneration + render_assistant_turn(chat_format::llama3_1, m) + "<|eot_id|>";
    else if (m.role == "tool" || m.role == "ipython")
      out += llama31_tool_response(m.content);
    else
      out +=
          "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
  }
  return out + kLlamaGeneration;
}

}  // namespace

chat_format detect_chat_format(const std::string& jinja, const std::string& source) {
  auto has = [&](const char* text) { return jinja.find(text) != std::string::npos; };
  if (jinja.empty()) return chat_format::none;
  if (has("<|im_start|>")) {
    // Qwen3-Thinking-2507 and QwQ open a <think> block in the generation prompt itself
    // ('<|im_start|>assistant\n<think>\n' in the Jinja source), which no family here does.
    if (has("<|im_start|>assistant\\n<think>"))
      throw std::runtime_error(source +
                               ": chat_template opens a <think> block in its generation prompt "
                               "(Qwen3-Thinking-2507, QwQ), which asyncrl does not render; set "
                               "data.chat_template=qwen3, qwen or none");
    return has("<think>") ? chat_format::qwen3 : chat_format::qwen;
  }
  if (has("<|start_header_id|>")) {
    if (!has("Cutting Knowledge Date")) return chat_format::llama3;
    // Llama-3.2's template dates its system turn with the day it is rendered (strftime_now).
    if (has("strftime_now"))
      throw std::runtime_error(source +
                               ": chat_template writes today's date into the system turn "
                               "(Llama-3.2); asyncrl renders Llama-3.1's fixed date (26 Jul "
                               "2024): set data.chat_template=llama3.1 to accept that, or none");
    return chat_format::llama3_1;
  }
  throw std::runtime_error(source +
                           ": chat_template is neither the Qwen (<|im_start|>) nor the Llama-3 "
                           "(<|start_header_id|>) format, the ones asyncrl renders; set "
                           "data.chat_template=qwen, qwen3, llama3, llama3.1 or none");
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
                        const std::string& bos_text, const std::string& tools_json) {
  const auto tools = parse_tools(tools_json);
  switch (format) {
    case chat_format::qwen:
    case chat_format::qwen3:
      return render_qwen(format, messages, tools);
    case chat_format::llama3_1:
      return render_llama31(messages, bos_text, tools);
    case chat_format::llama3: {
      // Llama-3-Instruct's template knows no tools: it prints every turn's role and content.
      std::string out = bos_text;
      for (auto& m : messages)
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) +
               "<|eot_id|>";
      return out + kLlamaGeneration;
    }
    case chat_format::none:
    case chat_format::auto_detect:
      break;
  }
  throw std::logic_error("render_chat: format must be a chat family, not none or auto");
}

std::string render_assistant_turn(chat_format format, const chat_message& m) {
  switch (format) {
    case chat_format::qwen:
      return m.content + qwen_calls(m.tool_calls, !m.content.empty());
    case chat_format::qwen3:
      return qwen3_turn(m, /*after_last_query=*/true, /*last=*/false);
    case chat_format::llama3_1:
      if (m.tool_calls.size() > 1)
        throw std::invalid_argument(
            "render_chat: Llama-3.1's template takes one tool call per assistant turn, not " +
            std::to_string(m.tool_calls.size()));
      // A turn with a call is the call alone: the template drops its text.
      if (m.tool_calls.size() == 1) return llama31_call(m.tool_calls[0]);
      return trim(m.content);
    case chat_format::llama3:
      return trim(m.content);
    case chat_format::none:
    case chat_format::auto_detect:
      break;
  }
  throw std::logic_error("render_assistant_turn: format must be a chat family");
}

std::string render_tool_responses(chat_format format, const std::vector<std::string>& responses) {
  std::string out;
  switch (format) {
    case chat_format::qwen:
    case chat_format::qwen3:
      // The '\n' that follows the turn's <|im_end|>, then one user turn holding every response.
      out = "\n";
      if (!responses.empty()) {
        out += "<|im_start|>user";
        for (const auto& r : responses)
          out += qwen_tool_response(r);
        out += "<|im_end|>\n";
      }
      return out + kQwenGeneration;
    case chat_format::llama3_1:
      for (const auto& r : responses)
        out += llama31_tool_response(r);
      return out + kLlamaGeneration;
    case chat_format::llama3:
      for (const auto& r : responses)
        out += "<|start_header_id|>tool<|end_header_id|>\n\n" + trim(r) + "<|eot_id|>";
      return out + kLlamaGeneration;
    case chat_format::none:
    case chat_format::auto_detect:
      break;
  }
  throw std::logic_error("render_tool_responses: format must be a chat family");
}

}  // namespace asyncrl
