#include "runtime/serve/openai_request.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <set>

namespace asyncrl {

namespace {

using json = nlohmann::json;

api_error bad(std::string param, std::string message, std::string code = "") {
  api_error e;
  e.param = std::move(param);
  e.message = std::move(message);
  e.code = std::move(code);
  return e;
}

// A number in [lo, hi] or null (the default); the error names the key and the range.
std::optional<api_error> read_number(const json& j, const char* key, double lo, double hi,
                                     double& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return bad(key, std::string(key) + " must be a number");
  double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi)
    return bad(key, std::string(key) + " must be between " + json(lo).dump() + " and " +
                        json(hi).dump() + ", got " + json(v).dump());
  out = v;
  return std::nullopt;
}

std::optional<api_error> read_int(const json& j, const char* key, int64_t lo, int64_t hi,
                                  std::optional<int64_t>& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer())
    return bad(key, std::string(key) + " must be an integer, got " + it->dump());
  auto v = it->get<int64_t>();
  if (v < lo || v > hi)
    return bad(key, std::string(key) + " must be between " + std::to_string(lo) + " and " +
                        std::to_string(hi) + ", got " + std::to_string(v));
  out = v;
  return std::nullopt;
}

std::optional<api_error> read_bool(const json& j, const char* key, bool& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return bad(key, std::string(key) + " must be a boolean");
  out = it->get<bool>();
  return std::nullopt;
}

// OpenAI's content: a string, or an array of {"type": "text", "text": ...} parts (joined).
std::optional<api_error> read_content(const json& c, const std::string& param, std::string& out) {
  if (c.is_string()) {
    out = c.get<std::string>();
    return std::nullopt;
  }
  if (!c.is_array()) return bad(param, param + " must be a string or an array of text parts");
  for (size_t i = 0; i < c.size(); ++i) {
    const auto& part = c[i];
    auto p = param + "[" + std::to_string(i) + "]";
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part["text"].is_string())
      return bad(p, p + ": only {\"type\": \"text\", \"text\": ...} parts are supported");
    out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

std::optional<api_error> read_tool_calls(const json& calls, const std::string& param,
                                         std::vector<tool_call>& out) {
  if (!calls.is_array()) return bad(param, param + " must be an array");
  for (size_t i = 0; i < calls.size(); ++i) {
    auto p = param + "[" + std::to_string(i) + "]";
    const auto& c = calls[i];
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
      return bad(p, p + " must be {\"type\": \"function\", \"function\": {...}}");
    const auto& f = c["function"];
    if (!f.contains("name") || !f["name"].is_string())
      return bad(p + ".function.name", p + ".function.name must be a string");
    tool_call t;
    t.name = f["name"].get<std::string>();
    auto args = f.find("arguments");
    if (args == f.end() || !args->is_string())
      return bad(p + ".function.arguments", p + ".function.arguments must be a JSON string");
    auto parsed = json::parse(args->get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_object())
      return bad(p + ".function.arguments", p + ".function.arguments is not a JSON object");
    t.arguments_json = args->get<std::string>();
    out.push_back(std::move(t));
  }
  return std::nullopt;
}

std::optional<api_error> read_messages(const json& j, std::vector<chat_message>& out) {
  auto it = j.find("messages");
  if (it == j.end()) return bad("messages", "messages is required");
  if (!it->is_array() || it->empty()) return bad("messages", "messages must be a non-empty array");
  static const std::set<std::string> roles = {"system", "developer", "user", "assistant", "tool"};
  for (size_t i = 0; i < it->size(); ++i) {
    const auto& m = (*it)[i];
    auto p = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return bad(p, p + " must be an object");
    if (!m.contains("role") || !m["role"].is_string() || !roles.count(m["role"].get<std::string>()))
      return bad(p + ".role", p + ".role must be one of system, developer, user, assistant, tool");
    chat_message msg;
    msg.role = m["role"].get<std::string>();
    if (msg.role == "developer") msg.role = "system";  // the newer name of the same turn
    auto c = m.find("content");
    const bool has_calls = m.contains("tool_calls") && !m["tool_calls"].is_null();
    if (c == m.end() || c->is_null()) {
      if (!(msg.role == "assistant" && has_calls))
        return bad(p + ".content", p + ".content is required");
    } else if (auto e = read_content(*c, p + ".content", msg.content)) {
      return e;
    }
    if (has_calls) {
      if (msg.role != "assistant")
        return bad(p + ".tool_calls", p + ".tool_calls: only assistant messages make calls");
      if (auto e = read_tool_calls(m["tool_calls"], p + ".tool_calls", msg.tool_calls)) return e;
    }
    out.push_back(std::move(msg));
  }
  return std::nullopt;
}

std::optional<api_error> read_stop(const json& j, const serve_limits& limits,
                                   std::vector<std::string>& out) {
  auto it = j.find("stop");
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) {
    out.push_back(it->get<std::string>());
  } else if (it->is_array()) {
    for (const auto& s : *it) {
      if (!s.is_string()) return bad("stop", "stop must be a string or an array of strings");
      out.push_back(s.get<std::string>());
    }
  } else {
    return bad("stop", "stop must be a string or an array of strings");
  }
  if (static_cast<int32_t>(out.size()) > limits.max_stop)
    return bad("stop", "at most " + std::to_string(limits.max_stop) + " stop strings");
  for (const auto& s : out)
    if (s.empty()) return bad("stop", "stop strings must not be empty");
  return std::nullopt;
}

// Parameters that change nothing here at their default value, and are refused at any other:
// we do not implement them, and ignoring them would answer a different request.
std::optional<api_error> only_default(const json& j, const char* key, const json& neutral) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null() || *it == neutral) return std::nullopt;
  return bad(key,
             std::string(key) + " is not supported by asyncrl serve (only " + neutral.dump() + ")");
}

std::optional<api_error> parse_fields(api_endpoint ep, const json& j, const serve_limits& limits,
                                      api_request& r) {
  static const std::set<std::string> common = {"model",
                                               "temperature",
                                               "top_p",
                                               "max_tokens",
                                               "stop",
                                               "n",
                                               "seed",
                                               "stream",
                                               "stream_options",
                                               "user",
                                               "logprobs",
                                               "presence_penalty",
                                               "frequency_penalty",
                                               "logit_bias"};
  static const std::set<std::string> chat = {"messages", "top_logprobs", "max_completion_tokens",
                                             "tools",    "tool_choice",  "parallel_tool_calls"};
  static const std::set<std::string> completions = {"prompt", "echo", "best_of", "suffix"};
  for (const auto& [key, value] : j.items()) {
    const auto& own = ep == api_endpoint::chat ? chat : completions;
    if (!common.count(key) && !own.count(key))
      return bad(key, "Unrecognized request argument supplied: " + key);
  }
  auto model = j.find("model");
  if (model == j.end() || !model->is_string()) return bad("model", "model must be a string");
  r.model = model->get<std::string>();

  if (auto e = read_number(j, "temperature", 0.0, 2.0, r.temperature)) return e;
  if (auto e = read_number(j, "top_p", 0.0, 1.0, r.top_p)) return e;
  if (r.top_p <= 0) return bad("top_p", "top_p must be > 0");
  std::optional<int64_t> v;
  if (auto e = read_int(j, "n", 1, limits.max_n, v)) return e;
  if (v) r.n = static_cast<int32_t>(*v);
  v.reset();
  if (auto e = read_int(j, "seed", INT64_MIN, INT64_MAX, v)) return e;
  r.seed = v;
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    v.reset();
    if (auto e = read_int(j, key, 1, limits.max_tokens, v)) return e;
    if (v) r.max_tokens = static_cast<int32_t>(*v);
  }
  if (auto e = read_stop(j, limits, r.stop)) return e;
  if (auto e = read_bool(j, "stream", r.stream)) return e;
  if (auto so = j.find("stream_options"); so != j.end() && !so->is_null()) {
    if (!r.stream) return bad("stream_options", "stream_options needs stream: true");
    if (!so->is_object()) return bad("stream_options", "stream_options must be an object");
    if (auto e = read_bool(*so, "include_usage", r.include_usage)) return e;
  }
  if (auto u = j.find("user"); u != j.end() && !u->is_null() && !u->is_string())
    return bad("user", "user must be a string");
  for (const char* key : {"presence_penalty", "frequency_penalty"})
    if (auto e = only_default(j, key, 0)) return e;
  if (auto e = only_default(j, "logit_bias", json::object())) return e;

  if (ep == api_endpoint::chat) {
    if (auto e = read_messages(j, r.messages)) return e;
    if (auto e = read_bool(j, "logprobs", r.logprobs)) return e;
    // Only the sampled token's log-probability is known to the generator, not the top k.
    if (auto e = only_default(j, "top_logprobs", 0)) return e;
    if (auto t = j.find("tools"); t != j.end() && !t->is_null()) {
      if (!t->is_array()) return bad("tools", "tools must be an array");
      if (!t->empty()) r.tools_json = t->dump();
    }
    if (auto e = only_default(j, "tool_choice", "auto")) return e;
    if (auto p = j.find("parallel_tool_calls"); p != j.end() && !p->is_null() && !p->is_boolean())
      return bad("parallel_tool_calls", "parallel_tool_calls must be a boolean");
  } else {
    auto p = j.find("prompt");
    if (p == j.end()) return bad("prompt", "prompt is required");
    if (p->is_array() && p->size() == 1 && (*p)[0].is_string())
      r.prompt = (*p)[0].get<std::string>();
    else if (p->is_string())
      r.prompt = p->get<std::string>();
    else
      return bad("prompt",
                 "prompt must be a string (token-id and multi-prompt arrays are not "
                 "supported)");
    if (r.prompt.empty()) return bad("prompt", "prompt must not be empty");
    // The legacy API's logprobs is how many alternatives to list per token. Only the sampled
    // token's log-probability is known here: 0 turns that on, more is refused.
    std::optional<int64_t> lp;
    if (auto e = read_int(j, "logprobs", 0, 0, lp)) return e;
    r.logprobs = lp.has_value();
    if (auto e = only_default(j, "echo", false)) return e;
    if (auto e = only_default(j, "suffix", nullptr)) return e;
    if (auto b = j.find("best_of"); b != j.end() && !b->is_null() && *b != r.n)
      return bad("best_of", "best_of must equal n (asyncrl serve does not rank choices)");
  }
  return std::nullopt;
}

}  // namespace

std::variant<api_request, api_error> parse_api_request(api_endpoint endpoint, std::string_view body,
                                                       const serve_limits& limits) {
  auto j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return bad("", "We could not parse the JSON body of your request: it is not valid JSON");
  if (!j.is_object()) return bad("", "the request body must be a JSON object");
  api_request r;
  r.endpoint = endpoint;
  if (auto e = parse_fields(endpoint, j, limits, r)) return *e;
  return r;
}

std::string error_body(const api_error& e) {
  json err = {{"message", e.message},
              {"type", e.type},
              {"param", e.param.empty() ? json(nullptr) : json(e.param)},
              {"code", e.code.empty() ? json(nullptr) : json(e.code)}};
  return json{{"error", err}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace asyncrl
