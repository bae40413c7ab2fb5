#include "runtime/serve/openai_api.hpp"

#include <nlohmann/json.hpp>

#include "runtime/text/chat_template.hpp"
#include "runtime/text/tool_calls.hpp"

namespace asyncrl {

namespace {

using json = nlohmann::ordered_json;

std::string dump(const json& j) {
  // Token bytes may be a cut UTF-8 character: replaced (U+FFFD), never an exception.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The weights version a response came from, where OpenAI puts its backend's identity.
std::string fingerprint(int64_t version) {
  return "asyncrl-v" + std::to_string(version);
}

std::vector<int32_t> chat_prompt(const api_request& r, const served_model& m) {
  if (r.tools_json.empty() || m.format.chat == chat_format::none) {
    qa_example ex;
    ex.messages = r.messages;
    for (const auto& msg : r.messages)
      if (msg.role == "user") ex.question = msg.content;
    if (m.format.chat == chat_format::none) ex.messages.clear();  // <bos> question '\n'
    return encode_prompt(*m.tok, m.format, ex);
  }
  std::vector<chat_message> msgs;
  const bool has_system = r.messages.front().role == "system";
  if (!has_system && !m.format.system_prompt.empty())
    msgs.push_back({"system", m.format.system_prompt, {}});
  msgs.insert(msgs.end(), r.messages.begin(), r.messages.end());
  return m.tok->encode(render_chat(m.format.chat, msgs, m.format.bos_text, r.tools_json));
}

json chat_logprobs(const served_model& m, const std::vector<int32_t>& tokens,
                   const std::vector<float>& logprobs) {
  json content = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    auto bytes = m.tok->token_bytes(tokens[i], /*skip_special=*/false);
    json b = json::array();
    for (unsigned char c : bytes)
      b.push_back(c);
    content.push_back({{"token", bytes},
                       {"logprob", logprobs[i]},
                       {"bytes", b},
                       {"top_logprobs", json::array()}});
  }
  return {{"content", content}};
}

json completion_logprobs(const served_model& m, const std::vector<int32_t>& tokens,
                         const std::vector<float>& logprobs, size_t& text_offset) {
  json toks = json::array(), lps = json::array(), offsets = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    auto bytes = m.tok->token_bytes(tokens[i], /*skip_special=*/false);
    toks.push_back(bytes);
    lps.push_back(logprobs[i]);
    offsets.push_back(text_offset);
    text_offset += m.tok->token_bytes(tokens[i], /*skip_special=*/true).size();
  }
  return {{"tokens", toks},
          {"token_logprobs", lps},
          {"top_logprobs", nullptr},
          {"text_offset", offsets}};
}

// A chat choice's message: tool calls parsed out of the text when the request has tools.
json chat_message_json(const api_request& r, const served_model& m, const std::string& text,
                       std::string& finish_reason) {
  json msg = {{"role", "assistant"}, {"content", text}};
  if (r.tools_json.empty()) return msg;
  auto turn = parse_tool_calls(m.format.chat, text);
  if (turn.calls.empty()) return msg;
  json calls = json::array();
  for (size_t i = 0; i < turn.calls.size(); ++i)
    calls.push_back(
        {{"id", "call_" + std::to_string(i)},
         {"type", "function"},
         {"function",
          {{"name", turn.calls[i].name}, {"arguments", turn.calls[i].arguments_json}}}});
  msg["content"] = turn.content.empty() ? json(nullptr) : json(turn.content);
  msg["tool_calls"] = calls;
  if (finish_reason == "stop") finish_reason = "tool_calls";
  return msg;
}

json usage(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

json envelope(const api_request& r, const served_model& m, const std::string& id, int64_t created,
              int64_t version, bool chunk) {
  const char* object = r.endpoint == api_endpoint::chat
                           ? (chunk ? "chat.completion.chunk" : "chat.completion")
                           : "text_completion";
  return {{"id", id},
          {"object", object},
          {"created", created},
          {"model", m.id},
          {"system_fingerprint", fingerprint(version)}};
}

std::string sse(const json& j) {
  return "data: " + dump(j) + "\n\n";
}

}  // namespace

std::variant<serve_job, api_error> make_job(const api_request& r, const served_model& m,
                                            int64_t max_seq_len, const serve_limits& limits) {
  if (r.model != m.id) {
    api_error e;
    e.status = 404;
    e.param = "model";
    e.code = "model_not_found";
    e.message = "The model `" + r.model + "` does not exist: this server serves `" + m.id + "`";
    return e;
  }
  serve_job j;
  try {
    j.prompt = r.endpoint == api_endpoint::chat ? chat_prompt(r, m) : m.tok->encode(r.prompt);
  } catch (const std::exception& ex) {  // what the template refuses (tools that are not JSON)
    api_error e;
    e.param = r.endpoint == api_endpoint::chat ? "messages" : "prompt";
    e.message = ex.what();
    return e;
  }
  if (r.endpoint == api_endpoint::chat)
    j.stop_ids = {m.format.stop_id};
  else if (m.tok->eos_id() >= 0)
    j.stop_ids = {m.tok->eos_id()};
  const auto room = max_seq_len - static_cast<int64_t>(j.prompt.size());
  if (room < 1 || (r.max_tokens && *r.max_tokens > room)) {
    api_error e;
    e.param = "messages";
    if (r.endpoint == api_endpoint::completions) e.param = "prompt";
    e.code = "context_length_exceeded";
    e.message = "This model's maximum context length is " + std::to_string(max_seq_len) +
                " tokens. However, you requested " +
                std::to_string(j.prompt.size() + (r.max_tokens ? *r.max_tokens : 1)) + " tokens (" +
                std::to_string(j.prompt.size()) + " in the prompt, " +
                std::to_string(r.max_tokens ? *r.max_tokens : 1) +
                " for the completion). Please reduce the prompt or max_tokens.";
    return e;
  }
  j.max_tokens = r.max_tokens ? *r.max_tokens
                              : static_cast<int32_t>(std::min<int64_t>(limits.max_tokens, room));
  j.n = r.n;
  j.sampling.temperature = r.temperature;
  j.sampling.top_p = r.top_p;
  j.seed = r.seed;
  j.stop = r.stop;
  return j;
}

std::string response_body(const api_request& r, const served_model& m, const std::string& id,
                          int64_t created, const std::vector<choice_result>& choices,
                          int64_t prompt_tokens, int64_t version) {
  json out = envelope(r, m, id, created, version, false);
  json list = json::array();
  int64_t completion_tokens = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    const auto& c = choices[i];
    completion_tokens += static_cast<int64_t>(c.tokens.size());
    std::string finish = c.finish_reason;
    json item = {{"index", i}};
    if (r.endpoint == api_endpoint::chat) {
      item["message"] = chat_message_json(r, m, c.text, finish);
      item["logprobs"] = r.logprobs ? chat_logprobs(m, c.tokens, c.logprobs) : json(nullptr);
    } else {
      item["text"] = c.text;
      size_t offset = 0;
      item["logprobs"] =
          r.logprobs ? completion_logprobs(m, c.tokens, c.logprobs, offset) : json(nullptr);
    }
    item["finish_reason"] = finish;
    list.push_back(std::move(item));
  }
  out["choices"] = list;
  out["usage"] = usage(prompt_tokens, completion_tokens);
  return dump(out);
}

std::string stream_chunks(const api_request& r, const served_model& m, const std::string& id,
                          int64_t created, const job_update& u, stream_state& s) {
  const auto n = static_cast<size_t>(r.n);
  s.role_sent.resize(n, false);
  s.held.resize(n);
  s.tokens.resize(n);
  s.text_offset.resize(n, 0);
  std::string out;
  for (const auto& d : u.deltas) {
    const auto i = static_cast<size_t>(d.index);
    auto& toks = s.tokens[i];
    toks.insert(toks.end(), d.tokens.begin(), d.tokens.end());
    json chunk = envelope(r, m, id, created, u.version, true);
    json item = {{"index", d.index}};
    std::string finish = d.finish_reason;
    if (r.endpoint == api_endpoint::chat) {
      json delta = json::object();
      if (!s.role_sent[i]) {
        delta["role"] = "assistant";
        s.role_sent[i] = true;
      }
      if (!r.tools_json.empty()) {
        s.held[i] += d.text;
        if (!finish.empty()) {
          auto msg = chat_message_json(r, m, s.held[i], finish);
          if (!msg["content"].is_null()) delta["content"] = msg["content"];
          if (msg.contains("tool_calls")) {
            json calls = msg["tool_calls"];
            for (size_t k = 0; k < calls.size(); ++k)
              calls[k]["index"] = k;
            delta["tool_calls"] = calls;
          }
        }
      } else if (!d.text.empty() || delta.contains("role")) {
        delta["content"] = d.text;
      }
      item["delta"] = delta;
      item["logprobs"] = r.logprobs ? chat_logprobs(m, d.tokens, d.logprobs) : json(nullptr);
    } else {
      item["text"] = d.text;
      item["logprobs"] = r.logprobs ? completion_logprobs(m, d.tokens, d.logprobs, s.text_offset[i])
                                    : json(nullptr);
    }
    item["finish_reason"] = finish.empty() ? json(nullptr) : json(finish);
    chunk["choices"] = json::array({item});
    if (r.include_usage) chunk["usage"] = nullptr;
    out += sse(chunk);
  }
  return out;
}

std::string stream_end(const api_request& r, const served_model& m, const std::string& id,
                       int64_t created, int64_t prompt_tokens, int64_t completion_tokens,
                       int64_t version) {
  std::string out;
  if (r.include_usage) {
    json chunk = envelope(r, m, id, created, version, true);
    chunk["choices"] = json::array();
    chunk["usage"] = usage(prompt_tokens, completion_tokens);
    out += sse(chunk);
  }
  return out + "data: [DONE]\n\n";
}

std::string models_body(const served_model& m, int64_t version) {
  json model = {{"id", m.id},
                {"object", "model"},
                {"created", m.created},
                {"owned_by", "asyncrl"},
                {"version", version}};
  return dump(json{{"object", "list"}, {"data", json::array({model})}});
}

}  // namespace asyncrl
