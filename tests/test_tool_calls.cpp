// Tool calls in the chat families' own syntax against Hugging Face transformers'
// apply_chat_template (tests/fixtures/chat/tool_expected.jsonl, made by make_tool_expected.py
// from the real Qwen2.5, Qwen3 and Llama-3.1 templates): whole conversations, the text an
// episode appends after a tool round, parsing a turn back, and malformed calls.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <random>
#include <sstream>

#include "runtime/text/chat_template.hpp"
#include "runtime/text/tool_calls.hpp"

namespace asyncrl {
namespace {

using ojson = nlohmann::ordered_json;

std::string fixture(const std::string& rel) {
  return std::string(ASYNCRL_SOURCE_DIR) + "/tests/fixtures/" + rel;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + " is missing");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string template_text(const std::string& name) {
  if (name == "qwen2_5" || name == "llama3") {
    auto cfg = nlohmann::json::parse(read_text(fixture("hf/" + name + "/tokenizer_config.json")));
    return cfg["chat_template"].get<std::string>();
  }
  return read_text(fixture("chat/templates/" + name + ".jinja"));
}

chat_format format_of(const std::string& name) {
  if (name == "qwen2_5") return chat_format::qwen;
  if (name == "qwen3") return chat_format::qwen3;
  if (name == "llama3_1") return chat_format::llama3_1;
  throw std::runtime_error("unknown template " + name);
}

std::string end_of_turn(chat_format f) {
  return f == chat_format::llama3_1 ? "<|eot_id|>" : "<|im_end|>";
}

struct conversation {
  std::string name;
  chat_format format;
  std::string bos;
  std::vector<chat_message> messages;
  std::string tools;  // JSON array text, "" = none
  std::string text;   // transformers' rendering
  std::string line;
};

std::vector<conversation> load_fixtures() {
  std::ifstream in(fixture("chat/tool_expected.jsonl"));
  if (!in) throw std::runtime_error("tests/fixtures/chat/tool_expected.jsonl is missing");
  std::vector<conversation> out;
  std::map<std::string, std::string> default_system;
  for (std::string line; std::getline(in, line);) {
    auto j = ojson::parse(line);
    conversation c;
    c.name = j["template"].get<std::string>();
    c.format = format_of(c.name);
    c.bos = j["bos"].get<std::string>();
    c.tools = j["tools"].is_null() ? "" : j["tools"].dump();
    c.text = j["text"].get<std::string>();
    c.line = line;
    for (auto& m : j["messages"]) {
      chat_message cm{m["role"].get<std::string>(), m["content"].get<std::string>(), {}};
      if (m.contains("tool_calls"))
        for (auto& tc : m["tool_calls"])
          cm.tool_calls.push_back(
              {tc["function"]["name"].get<std::string>(), tc["function"]["arguments"].dump()});
      c.messages.push_back(cm);
    }
    // As runtime/task/prompting.cpp does: the caller supplies the template's default system
    // turn (Qwen2.5's), which its template writes when the messages have none.
    if (!default_system.count(c.name))
      default_system[c.name] =
          c.name == "qwen2_5" ? default_system_prompt(template_text(c.name)) : std::string();
    const auto& sys = default_system[c.name];
    if (!sys.empty() && (c.messages.empty() || c.messages[0].role != "system"))
      c.messages.insert(c.messages.begin(), chat_message{"system", sys, {}});
    out.push_back(std::move(c));
  }
  return out;
}

// "" when equal, else where they first differ with a little of each side.
std::string first_difference(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i])
    ++i;
  if (i == got.size() && i == want.size()) return "";
  auto around = [&](const std::string& s) {
    auto from = i < 40 ? 0 : i - 40;
    return ojson(s.substr(from, 80)).dump(-1, ' ', false, ojson::error_handler_t::replace);
  };
  return "differs at byte " + std::to_string(i) + " (got " + std::to_string(got.size()) +
         " bytes, want " + std::to_string(want.size()) + ")\n  got:  " + around(got) +
         "\n  want: " + around(want);
}

// Catches any byte of a template rendered differently: a missing '\n' around a call or a
// response, the tools printed with other JSON separators or key order, Llama-3.1's tools not
// moved into the first user turn or its string responses not JSON-quoted, Qwen3's reasoning
// dropped or kept in the wrong turns, Qwen2.5's tool-call turn with a spurious '\n'.
TEST(ToolCalls, ConversationsRenderAsTransformersRendersThem) {
  std::map<std::string, int> cases;
  for (const auto& c : load_fixtures()) {
    auto diff = first_difference(render_chat(c.format, c.messages, c.bos, c.tools), c.text);
    EXPECT_TRUE(diff.empty()) << c.name << ": " << diff << "\n" << c.line;
    ++cases[c.name];
  }
  EXPECT_EQ(cases["qwen2_5"], 9);
  EXPECT_EQ(cases["qwen3"], 9);
  EXPECT_EQ(cases["llama3_1"], 9);
}

// The episode's invariant: prompt + the model's turn + its end token + render_tool_responses is
// what the template renders for the whole conversation, so what an episode appends token by
// token is what the model would see re-rendered. Catches a missing '\n' after <|im_end|>, the
// responses in another order or split into one user turn each, a missing generation prompt.
TEST(ToolCalls, AToolRoundAppendsWhatTheWholeConversationRenders) {
  std::map<std::string, int> cases;
  for (const auto& c : load_fixtures()) {
    if (c.messages.back().role != "tool") continue;
    size_t k = c.messages.size() - 1;
    std::vector<std::string> responses;
    for (; c.messages[k].role == "tool"; --k)
      responses.insert(responses.begin(), c.messages[k].content);
    ASSERT_EQ(c.messages[k].role, "assistant") << c.line;
    std::vector<chat_message> prefix(c.messages.begin(), c.messages.begin() + k);
    auto got = render_chat(c.format, prefix, c.bos, c.tools) +
               render_assistant_turn(c.format, c.messages[k]) + end_of_turn(c.format) +
               render_tool_responses(c.format, responses);
    auto diff = first_difference(got, c.text);
    EXPECT_TRUE(diff.empty()) << c.name << ": " << diff << "\n" << c.line;
    ++cases[c.name];
  }
  // One call, two calls (one for Llama-3.1), two rounds, odd characters, reasoning, no tools.
  EXPECT_EQ(cases["qwen2_5"], 6);
  EXPECT_EQ(cases["qwen3"], 6);
  EXPECT_EQ(cases["llama3_1"], 6);
}

// Catches a parser that loses a call, reads the wrong key, mangles escaped or non-ASCII
// arguments, or keeps the template's separator '\n' in the text: rendering the parsed turn
// again must give the same bytes.
TEST(ToolCalls, ParsingARenderedTurnGivesItsCallsBack) {
  int turns = 0;
  for (const auto& c : load_fixtures()) {
    for (const auto& m : c.messages) {
      if (m.tool_calls.empty()) continue;
      auto text = render_assistant_turn(c.format, m);
      auto p = parse_tool_calls(c.format, text);
      EXPECT_TRUE(p.errors.empty()) << c.name << ": " << text;
      ASSERT_EQ(p.calls.size(), m.tool_calls.size()) << c.name << ": " << text;
      for (size_t i = 0; i < p.calls.size(); ++i) {
        EXPECT_EQ(p.calls[i].name, m.tool_calls[i].name);
        EXPECT_EQ(nlohmann::json::parse(p.calls[i].arguments_json),
                  nlohmann::json::parse(m.tool_calls[i].arguments_json))
            << text;
      }
      chat_message again{"assistant", p.content, p.calls};
      auto diff = first_difference(render_assistant_turn(c.format, again), text);
      EXPECT_TRUE(diff.empty()) << c.name << ": " << diff;
      ++turns;
    }
  }
  EXPECT_GE(turns, 20);
  // A turn without a call is the final answer, text unchanged.
  for (auto f :
       {chat_format::qwen, chat_format::qwen3, chat_format::llama3_1, chat_format::llama3}) {
    auto p = parse_tool_calls(f, "The answer is 5.\n#### 5");
    EXPECT_TRUE(p.calls.empty() && p.errors.empty()) << to_string(f);
    EXPECT_EQ(p.content, "The answer is 5.\n#### 5") << to_string(f);
  }
  // Llama-3.1 with its <|python_tag|> kept by the decoder.
  auto p = parse_tool_calls(chat_format::llama3_1,
                            "<|python_tag|>{\"name\": \"calculator\", \"parameters\": {}}");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments_json, "{}");
}

bool all_invalid(const parsed_turn& p) {
  for (const auto& e : p.errors)
    if (e.rfind("invalid tool call: ", 0) != 0) return false;
  return true;
}

// Catches a malformed call thrown, dropped silently (the model would get no observation), or
// taken as a call; each reason must be in the observation so that the model can learn from it.
TEST(ToolCalls, MalformedCallsBecomeObservations) {
  struct bad {
    chat_format format;
    std::string text;
    std::string why;
  };
  const std::string deep = "{\"name\": \"c\", \"arguments\": {\"x\": " + std::string(100000, '[');
  const std::vector<bad> cases = {
      {chat_format::qwen,
       "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"a\": 1}\n</tool_call>",
       "unparseable JSON"},
      {chat_format::qwen, "<tool_call>\n{\"arguments\": {}}\n</tool_call>", "missing \"name\""},
      {chat_format::qwen3,
       "<tool_call>\n{\"name\": \"calculator\", \"arguments\": \"2+3\"}\n</tool_call>",
       "\"arguments\" is not a JSON object"},
      {chat_format::qwen3, "<tool_call>\n[1, 2]\n</tool_call>", "not a JSON object"},
      {chat_format::qwen, "Let me see.\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": {}}",
       "<tool_call> is not closed by </tool_call>"},
      {chat_format::qwen, "<tool_call>" + deep + "</tool_call>", "nested deeper than 64"},
      {chat_format::llama3_1, "{\"name\": \"calculator\", \"parameters\": [1]}",
       "\"parameters\" is not a JSON object"},
      {chat_format::llama3_1, "{\"parameters\": {}}", "missing \"name\""},
      {chat_format::llama3_1, "{\"name\": \"calculator\", \"parameters\": {", "unparseable JSON"},
      {chat_format::llama3_1, "{\"name\": \"calc\xff\"}", "unparseable JSON"},  // bad UTF-8
  };
  for (const auto& b : cases) {
    parsed_turn p;
    ASSERT_NO_THROW(p = parse_tool_calls(b.format, b.text)) << b.why;
    EXPECT_TRUE(p.calls.empty()) << b.why;
    ASSERT_EQ(p.errors.size(), 1u) << b.why;
    EXPECT_TRUE(all_invalid(p)) << p.errors[0];
    EXPECT_NE(p.errors[0].find(b.why), std::string::npos) << p.errors[0];
  }
  // A good call and a bad one: both are answered, in the turn's order of good calls.
  auto p = parse_tool_calls(chat_format::qwen,
                            "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
                            "<tool_call>\nnot json\n</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "a");
  ASSERT_EQ(p.errors.size(), 1u);
}

// Catches a crash (an exception, an out-of-range read) on the turns a sampling model really
// ends with: cut anywhere, or with any byte replaced.
TEST(ToolCalls, TruncatedAndCorruptedTurnsNeverThrow) {
  const std::string qwen =
      "<think>\nAdd.\n</think>\n\nLet me compute.\n<tool_call>\n{\"name\": \"calculator\", "
      "\"arguments\": {\"expression\": \"2 + \\\"3\\\" "
      "é\"}}\n</tool_call>\n<tool_call>\n{\"name\": "
      "\"round_number\", \"arguments\": {\"value\": 3.5, \"digits\": 0}}\n</tool_call>";
  const std::string llama =
      "{\"name\": \"calculator\", \"parameters\": {\"expression\": \"2 + [3] é\"}}";
  std::mt19937 rng(7);
  const std::vector<std::pair<chat_format, std::string>> turns = {
      {chat_format::qwen, qwen}, {chat_format::qwen3, qwen}, {chat_format::llama3_1, llama}};
  for (const auto& [format, text] : turns) {
    for (size_t n = 0; n <= text.size(); ++n) {
      parsed_turn p;
      ASSERT_NO_THROW(p = parse_tool_calls(format, text.substr(0, n))) << n;
      EXPECT_TRUE(all_invalid(p)) << n;
    }
    for (int i = 0; i < 2000; ++i) {
      auto t = text;
      t[rng() % t.size()] = static_cast<char>(rng() % 256);
      parsed_turn p;
      ASSERT_NO_THROW(p = parse_tool_calls(format, t)) << t;
      EXPECT_TRUE(all_invalid(p)) << t;
    }
    // The whole turn parses to its calls (so the cuts above did cut a valid turn).
    EXPECT_TRUE(parse_tool_calls(format, text).errors.empty());
  }
}

// Catches a real template sent to the wrong family (Qwen3 rendered as Qwen2.5 loses its
// <think> handling; Llama-3.1 as Llama-3 loses its system turn and tools) and the templates
// asyncrl cannot render exactly accepted.
TEST(ToolCalls, EachRealTemplateIsRecognisedAndOthersRefused) {
  EXPECT_EQ(detect_chat_format(template_text("qwen2_5"), "q"), chat_format::qwen);
  EXPECT_EQ(detect_chat_format(template_text("qwen3"), "q"), chat_format::qwen3);
  EXPECT_EQ(detect_chat_format(template_text("llama3_1"), "l"), chat_format::llama3_1);
  EXPECT_EQ(detect_chat_format(template_text("llama3"), "l"), chat_format::llama3);
  EXPECT_EQ(default_system_prompt(template_text("qwen3")), "");
  const std::vector<std::string> refused = {
      // Llama-3.2: today's date.
      "{{- bos_token }}{%- set date_string = strftime_now(\"%d %b %Y\") %}"
      "<|start_header_id|>system<|end_header_id|>Cutting Knowledge Date: December 2023",
      // A thinking-only Qwen: its generation prompt opens <think>.
      "{{- '<|im_start|>assistant\\n<think>\\n' }}",
  };
  for (const auto& jinja : refused) {
    try {
      detect_chat_format(jinja, "m/tokenizer_config.json");
      ADD_FAILURE() << "accepted: " << jinja;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("m/tokenizer_config.json"), std::string::npos);
      EXPECT_NE(std::string(e.what()).find("data.chat_template"), std::string::npos);
    }
  }
  EXPECT_EQ(parse_enum<chat_format>("llama3.1"), chat_format::llama3_1);
  EXPECT_EQ(parse_enum<chat_format>("qwen3"), chat_format::qwen3);
}

// Catches what a template refuses rendered anyway (transformers raises for both).
TEST(ToolCalls, WhatTheTemplatesRefuseIsAnError) {
  chat_message two{"assistant", "", {{"a", "{}"}, {"b", "{}"}}};
  EXPECT_THROW(render_chat(chat_format::llama3_1, {{"user", "hi", {}}, two}, "", ""),
               std::invalid_argument);
  EXPECT_THROW(render_chat(chat_format::llama3_1, {{"system", "s", {}}}, "", "[]"),
               std::invalid_argument);
  EXPECT_THROW(render_chat(chat_format::qwen, {{"user", "hi", {}}}, "", "{not json"),
               std::invalid_argument);
}

// Catches the separators, escapes or empty containers written differently from json.dumps
// (the tools' schemas and the arguments in every prompt go through it).
TEST(ToolCalls, JsonIsWrittenAsPythonWritesIt) {
  auto j = ojson::parse(R"({"b":[1,-2.5,{"n":null,"t":true}],"a":"é\n\"\\\u0001","e":{},"f":[]})");
  EXPECT_EQ(to_python_json(j),
            R"({"b": [1, -2.5, {"n": null, "t": true}], "a": "é\n\"\\\u0001", "e": {}, "f": []})");
  EXPECT_EQ(to_python_json(ojson::parse(R"({"a":[1,{}],"b":{"c":"d"}})"), 4),
            "{\n    \"a\": [\n        1,\n        {}\n    ],\n    \"b\": {\n        \"c\": \"d\"\n "
            "   }\n}");
}

}  // namespace
}  // namespace asyncrl
