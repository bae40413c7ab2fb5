// Chat prompts against Hugging Face's reference Jinja renderer (tests/fixtures/chat/
// expected.jsonl, from the real Qwen2.5 and Llama-3 tokenizer_config.json templates), and the
// prompt format's resolution and refusals.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "runtime/task/prompting.hpp"
#include "runtime/text/char_tokenizer.hpp"
#include "runtime/text/chat_template.hpp"
#include "runtime/text/hf_tokenizer.hpp"

namespace asyncrl {
namespace {

std::string fixture(const std::string& rel) {
  return std::string(ASYNCRL_SOURCE_DIR) + "/tests/fixtures/" + rel;
}

std::shared_ptr<const hf_tokenizer> real_tokenizer(const std::string& name) {
  auto dir = fixture("hf/" + name);
  if (!std::ifstream(dir + "/tokenizer.json"))
    throw std::runtime_error(dir + "/tokenizer.json is missing: run scripts/fetch_tokenizers.py");
  return hf_tokenizer::load_dir(dir);
}

// Catches a wrong separator or newline, a missing default system turn (Qwen2.5 adds one), a
// system turn added twice, Llama-3's content not trimmed or its BOS missing, and the assistant
// header missing: any of them changes the ids.
TEST(ChatTemplate, PromptsMatchTheReferenceRendererTokenForToken) {
  std::ifstream in(fixture("chat/expected.jsonl"));
  ASSERT_TRUE(in) << "tests/fixtures/chat/expected.jsonl";
  std::map<std::string, std::shared_ptr<const hf_tokenizer>> toks;
  int cases = 0;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    auto name = j["tokenizer"].get<std::string>();
    if (!toks.count(name)) toks[name] = real_tokenizer(name);
    const auto& tok = *toks[name];
    auto fmt = make_prompt_format(tok, chat_format::auto_detect, "");
    EXPECT_EQ(fmt.chat, name == "llama3" ? chat_format::llama3 : chat_format::qwen);
    qa_example ex;
    for (auto& m : j["messages"])
      ex.messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    auto want = tok.encode(j["text"].get<std::string>());
    EXPECT_EQ(encode_prompt(tok, fmt, ex), want) << name << ": " << line;
    // A plain question is one user turn.
    if (ex.messages.size() == 1) {
      EXPECT_EQ(encode_prompt(tok, fmt, ex.messages[0].content), want) << name;
    }
    ++cases;
  }
  EXPECT_EQ(cases, 10);
}

// Catches the stop token taken from eos_token instead of the end-of-turn token: a chat model
// then never stops where its template ends a turn.
TEST(ChatTemplate, ResponsesEndWithTheFormatsEndOfTurnToken) {
  auto qwen = real_tokenizer("qwen2_5");
  auto f = make_prompt_format(*qwen, chat_format::auto_detect, "");
  EXPECT_EQ(f.stop_id, qwen->special_id("<|im_end|>"));
  auto r = encode_response(*qwen, f, "#### 5");
  EXPECT_EQ(r.back(), f.stop_id);
  EXPECT_EQ(qwen->decode(r, /*skip_special=*/false), "#### 5<|im_end|>");
  auto llama = real_tokenizer("llama3");
  EXPECT_EQ(make_prompt_format(*llama, chat_format::auto_detect, "").stop_id,
            llama->special_id("<|eot_id|>"));
  // none: the tokenizer's eos_token (Llama-3's <|end_of_text|>), and its BOS first.
  auto plain = make_prompt_format(*llama, chat_format::none, "");
  EXPECT_EQ(plain.stop_id, llama->special_id("<|end_of_text|>"));
  auto p = encode_prompt(*llama, plain, std::string("2+2"));
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(p.front(), llama->bos_id());
}

// Catches data.system_prompt ignored, or added beside the template's default.
TEST(ChatTemplate, AConfiguredSystemPromptReplacesTheDefault) {
  auto qwen = real_tokenizer("qwen2_5");
  auto f = make_prompt_format(*qwen, chat_format::qwen, "Be brief.");
  auto text = qwen->decode(encode_prompt(*qwen, f, std::string("Hi")), false);
  EXPECT_EQ(text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
}

// Catches the char tokenizer's format changed: models warm-started here depend on it.
TEST(ChatTemplate, TheBuiltInTokenizerKeepsBosQuestionNewline) {
  auto tok = char_tokenizer::builtin();
  auto f = make_prompt_format(tok, chat_format::auto_detect, "");
  EXPECT_EQ(f.chat, chat_format::none);
  EXPECT_EQ(f.stop_id, tok.eos_id());
  auto ids = encode_prompt(tok, f, std::string("1+2"));
  std::vector<int32_t> want{tok.bos_id()};
  for (auto id : tok.encode("1+2\n"))
    want.push_back(id);
  EXPECT_EQ(ids, want);
}

// Catches a template rendered approximately instead of refused, and a format whose tokens the
// tokenizer lacks accepted (every prompt would be garbage ids).
TEST(ChatTemplate, UnrenderableTemplatesAndMissingTokensAreRefused) {
  try {
    detect_chat_format("{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}",
                       "x/tokenizer_config.json");
    ADD_FAILURE() << "a Mistral-style template was accepted";
  } catch (const std::runtime_error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("x/tokenizer_config.json"), std::string::npos) << what;
    EXPECT_NE(what.find("data.chat_template"), std::string::npos) << what;
  }
  auto tok = char_tokenizer::builtin();
  try {
    make_prompt_format(tok, chat_format::qwen, "");
    ADD_FAILURE() << "qwen format accepted for the char tokenizer";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("<|im_end|>"), std::string::npos) << e.what();
  }
  EXPECT_EQ(default_system_prompt(""), "");
}

}  // namespace
}  // namespace asyncrl
