#include "runtime/text/tool_calls.hpp"

#include <algorithm>
#include <exception>

namespace asyncrl {

namespace {

using ojson = nlohmann::ordered_json;

const char* const kWhitespace = " \t\n\r\v\f";
const std::string kCallOpen = "<tool_call>";
const std::string kCallClose = "</tool_call>";
// Llama-3.1 may open a call with this token when it is decoded with special tokens kept.
const std::string kPythonTag = "<|python_tag|>";
// JSON nested deeper is refused before it is parsed: to_python_json recurses, and no tool needs
// it.
constexpr int kMaxDepth = 64;

std::string strip(const std::string& s) {
  auto b = s.find_first_not_of(kWhitespace);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(kWhitespace) - b + 1);
}

std::string invalid(const std::string& why) {
  return "invalid tool call: " + why;
}

// Whether JSON text nests objects and arrays deeper than kMaxDepth (brackets inside strings do
// not count). A scan of the text, so that no recursion ever sees the deep value.
bool too_deep(const std::string& text) {
  int level = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++level > kMaxDepth) return true;
    } else if (c == '}' || c == ']') {
      level = std::max(0, level - 1);
    }
  }
  return false;
}

// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
std::string parse_error_text(const std::exception& e) {
  std::string what = e.what();
  auto at = what.find("] ");
  return at == std::string::npos ? what : what.substr(at + 2);
}

// One call's JSON text: {"name": ..., <args_key>: {...}}. Appends to calls or errors.
void parse_call(const std::string& text, const char* args_key, parsed_turn& out) {
  if (too_deep(text)) {
    out.errors.push_back(
        invalid("JSON nested deeper than " + std::to_string(kMaxDepth) + " levels"));
    return;
  }
  ojson j;
  try {
    j = ojson::parse(text);
  } catch (const std::exception& e) {
    out.errors.push_back(invalid("unparseable JSON (" + parse_error_text(e) + ")"));
    return;
  }
  if (!j.is_object()) {
    out.errors.push_back(invalid("not a JSON object"));
    return;
  }
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) {
    out.errors.push_back(invalid("missing \"name\""));
    return;
  }
  auto args = j.find(args_key);
  ojson arguments = ojson::object();  // a tool without parameters may leave them out
  if (args != j.end()) {
    if (!args->is_object()) {
      out.errors.push_back(invalid(std::string("\"") + args_key + "\" is not a JSON object"));
      return;
    }
    arguments = *args;
  }
  out.calls.push_back({name->get<std::string>(), arguments.dump()});
}

// Qwen2.5 / Qwen3: <tool_call>\n{json}\n</tool_call> blocks, any number, after optional text.
parsed_turn parse_qwen(const std::string& text) {
  parsed_turn out;
  size_t at = 0;
  std::string rest;  // non-blank text between or after the calls
  for (;;) {
    auto open = text.find(kCallOpen, at);
    if (open == std::string::npos) {
      if (out.calls.empty() && out.errors.empty())
        out.content = text;
      else
        rest += text.substr(at);
      break;
    }
    if (at == 0) {
      out.content = text.substr(0, open);
      // The template puts one '\n' between the text and the first call.
      if (!out.content.empty() && out.content.back() == '\n') out.content.pop_back();
    } else {
      rest += text.substr(at, open - at);
    }
    auto body = open + kCallOpen.size();
    auto close = text.find(kCallClose, body);
    if (close == std::string::npos) {
      out.errors.push_back(invalid(kCallOpen + " is not closed by " + kCallClose));
      break;
    }
    parse_call(strip(text.substr(body, close - body)), "arguments", out);
    at = close + kCallClose.size();
  }
  rest = strip(rest);
  if (!rest.empty()) out.content += (out.content.empty() ? "" : "\n") + rest;
  return out;
}

// Llama-3.1: the whole turn is one {"name": ..., "parameters": {...}} object; a turn that does
// not start with '{' is a final answer.
parsed_turn parse_llama3_1(const std::string& text) {
  parsed_turn out;
  auto body = strip(text);
  if (body.compare(0, kPythonTag.size(), kPythonTag) == 0)
    body = strip(body.substr(kPythonTag.size()));
  if (body.empty() || body.front() != '{') {
    out.content = text;
    return out;
  }
  parse_call(body, "parameters", out);
  return out;
}

void write_string(const std::string& s, std::string& out) {
  // nlohmann escapes exactly what json.dumps(ensure_ascii=False) does: '"', '\\', the C0
  // controls (\n, \t, ... or \u00XX in lower-case hex); invalid UTF-8 becomes U+FFFD.
  out += ojson(s).dump(-1, ' ', false, ojson::error_handler_t::replace);
}

void write_json(const ojson& j, int indent, int level, std::string& out) {
  const bool pretty = indent >= 0;
  auto newline = [&](int lvl) {
    out += '\n';
    out.append(static_cast<size_t>(indent * lvl), ' ');
  };
  switch (j.type()) {
    case ojson::value_t::object: {
      if (j.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!first) out += pretty ? "," : ", ";
        first = false;
        if (pretty) newline(level + 1);
        write_string(it.key(), out);
        out += ": ";
        write_json(it.value(), indent, level + 1, out);
      }
      if (pretty) newline(level);
      out += '}';
      return;
    }
    case ojson::value_t::array: {
      if (j.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      bool first = true;
      for (const auto& v : j) {
        if (!first) out += pretty ? "," : ", ";
        first = false;
        if (pretty) newline(level + 1);
        write_json(v, indent, level + 1, out);
      }
      if (pretty) newline(level);
      out += ']';
      return;
    }
    case ojson::value_t::string:
      write_string(j.get_ref<const std::string&>(), out);
      return;
    default:
      // null, true, false, integers and floats (shortest round-trip digits, as Python's repr)
      out += j.dump();
      return;
  }
}

}  // namespace

parsed_turn parse_tool_calls(chat_format format, const std::string& assistant_text) {
  try {
    switch (format) {
      case chat_format::qwen:
      case chat_format::qwen3:
        return parse_qwen(assistant_text);
      case chat_format::llama3_1:
        return parse_llama3_1(assistant_text);
      case chat_format::llama3:
      case chat_format::none:
      case chat_format::auto_detect:
        break;
    }
    parsed_turn out;
    out.content = assistant_text;
    return out;
  } catch (const std::exception& e) {
    // Only allocation can fail here; a turn is still answered, never lost to an exception.
    parsed_turn out;
    out.errors.push_back(invalid(e.what()));
    return out;
  }
}

std::string to_python_json(const nlohmann::ordered_json& j, int indent) {
  std::string out;
  write_json(j, indent, 0, out);
  return out;
}

}  // namespace asyncrl
