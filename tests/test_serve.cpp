// asyncrl serve without HTTP: request checking (each refusal names its parameter), stop
// strings and tokens over token boundaries, the engine's continuous batch (greedy output equal
// to a plain generator run whatever else runs, seeds, cancellation), and the response bodies.
// The real OpenAI client drives the HTTP server in tests/serve/openai_client_test.py.

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>

#include "runtime/generation/generator.hpp"
#include "runtime/model/model.hpp"
#include "runtime/serve/choice_text.hpp"
#include "runtime/serve/openai_api.hpp"
#include "runtime/serve/openai_request.hpp"
#include "runtime/serve/serve_engine.hpp"
#include "runtime/text/char_tokenizer.hpp"
#include "runtime/text/hf_tokenizer.hpp"
#include "tests/tiny_model.hpp"

using namespace asyncrl;
using json = nlohmann::json;

namespace {

api_error refused(api_endpoint ep, const std::string& body, const serve_limits& l = {}) {
  auto r = parse_api_request(ep, body, l);
  EXPECT_TRUE(std::holds_alternative<api_error>(r)) << body;
  return std::holds_alternative<api_error>(r) ? std::get<api_error>(r) : api_error{};
}

api_request accepted(api_endpoint ep, const std::string& body) {
  auto r = parse_api_request(ep, body, {});
  if (auto* e = std::get_if<api_error>(&r)) ADD_FAILURE() << body << ": " << e->message;
  return std::holds_alternative<api_request>(r) ? std::get<api_request>(r) : api_request{};
}

const char* kChat = R"({"model": "m", "messages": [{"role": "user", "content": "hi"}]})";

std::string chat_with(const std::string& extra) {
  std::string s = kChat;
  s.pop_back();
  return s + ", " + extra + "}";
}

}  // namespace

TEST(ServeRequest, AChatRequestKeepsWhatItAsksFor) {
  auto r = accepted(api_endpoint::chat,
                    R"({"model": "m", "messages": [{"role": "system", "content": "be brief"},
                        {"role": "user", "content": [{"type": "text", "text": "a"},
                                                     {"type": "text", "text": "b"}]}],
                        "temperature": 0.5, "top_p": 0.9, "max_tokens": 7, "n": 3, "seed": -4,
                        "stop": ["x", "yz"], "logprobs": true, "stream": true,
                        "stream_options": {"include_usage": true}, "user": "u1"})");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "ab");  // text parts joined
  EXPECT_DOUBLE_EQ(r.temperature, 0.5);
  EXPECT_DOUBLE_EQ(r.top_p, 0.9);
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(r.seed, -4);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"x", "yz"}));
  EXPECT_TRUE(r.logprobs && r.stream && r.include_usage);
  // Defaults as OpenAI's: temperature 1, top_p 1, n 1, no limit given.
  auto d = accepted(api_endpoint::chat, kChat);
  EXPECT_DOUBLE_EQ(d.temperature, 1.0);
  EXPECT_DOUBLE_EQ(d.top_p, 1.0);
  EXPECT_EQ(d.n, 1);
  EXPECT_FALSE(d.max_tokens.has_value());
  EXPECT_FALSE(d.seed.has_value());
  // max_completion_tokens is the newer name of max_tokens; developer the newer system.
  EXPECT_EQ(accepted(api_endpoint::chat, chat_with(R"("max_completion_tokens": 5)")).max_tokens, 5);
  auto dev = accepted(api_endpoint::chat,
                      R"({"model": "m", "messages": [{"role": "developer", "content": "x"}]})");
  EXPECT_EQ(dev.messages[0].role, "system");
}

TEST(ServeRequest, EachRefusalNamesItsParameter) {
  struct refusal {
    std::string body, param;
  };
  std::vector<refusal> cases = {
      {chat_with(R"("temperature": 2.5)"), "temperature"},
      {chat_with(R"("temperature": "hot")"), "temperature"},
      {chat_with(R"("top_p": 0)"), "top_p"},
      {chat_with(R"("n": 17)"), "n"},  // max_n 16
      {chat_with(R"("n": 0)"), "n"},
      {chat_with(R"("max_tokens": 0)"), "max_tokens"},
      {chat_with(R"("max_tokens": 1025)"), "max_tokens"},  // max_tokens limit 1024
      {chat_with(R"("stop": ["a", "b", "c", "d", "e"])"), "stop"},
      {chat_with(R"("stop": "")"), "stop"},
      {chat_with(R"("stop": 3)"), "stop"},
      {chat_with(R"("seed": 1.5)"), "seed"},
      {chat_with(R"("top_logprobs": 2)"), "top_logprobs"},
      {chat_with(R"("presence_penalty": 0.5)"), "presence_penalty"},
      {chat_with(R"("logit_bias": {"5": 10})"), "logit_bias"},
      {chat_with(R"("tool_choice": "required")"), "tool_choice"},
      {chat_with(R"("stream_options": {"include_usage": true})"), "stream_options"},
      {chat_with(R"("frobnicate": 1)"), "frobnicate"},
      {chat_with(R"("prompt": "x")"), "prompt"},  // a completions field on chat
      {R"({"messages": [{"role": "user", "content": "hi"}]})", "model"},
      {R"({"model": "m"})", "messages"},
      {R"({"model": "m", "messages": []})", "messages"},
      {R"({"model": "m", "messages": [{"role": "robot", "content": "x"}]})", "messages[0].role"},
      {R"({"model": "m", "messages": [{"role": "user"}]})", "messages[0].content"},
      {R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content[0]"},
      {R"({"model": "m", "messages": [{"role": "assistant", "content": null, "tool_calls":
          [{"type": "function", "function": {"name": "f", "arguments": "[1]"}}]}]})",
       "messages[0].tool_calls[0].function.arguments"},
  };
  for (const auto& c : cases) {
    auto e = refused(api_endpoint::chat, c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.type, "invalid_request_error");
    EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.message;
    EXPECT_NE(e.message.find(c.param.substr(0, c.param.find('['))), std::string::npos) << e.message;
  }
  auto bad_json = refused(api_endpoint::chat, "{\"model\": ");
  EXPECT_EQ(bad_json.status, 400);
  EXPECT_EQ(bad_json.param, "");
  EXPECT_EQ(refused(api_endpoint::chat, "[1]").status, 400);
}

TEST(ServeRequest, CompletionsTakeOnePromptAndOnlyTheSampledTokensLogprobs) {
  auto r =
      accepted(api_endpoint::completions, R"({"model": "m", "prompt": "1+1=", "logprobs": 0})");
  EXPECT_EQ(r.prompt, "1+1=");
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(accepted(api_endpoint::completions, R"({"model": "m", "prompt": ["x"]})").prompt, "x");
  EXPECT_FALSE(accepted(api_endpoint::completions, R"({"model": "m", "prompt": "x"})").logprobs);
  for (auto [body, param] : std::vector<std::pair<std::string, std::string>>{
           {R"({"model": "m", "prompt": [1, 2]})", "prompt"},
           {R"({"model": "m", "prompt": ["a", "b"]})", "prompt"},
           {R"({"model": "m", "prompt": ""})", "prompt"},
           {R"({"model": "m"})", "prompt"},
           {R"({"model": "m", "prompt": "x", "logprobs": 2})", "logprobs"},
           {R"({"model": "m", "prompt": "x", "echo": true})", "echo"},
           {R"({"model": "m", "prompt": "x", "best_of": 3})", "best_of"},
           {R"({"model": "m", "prompt": "x", "messages": []})", "messages"}}) {
    EXPECT_EQ(refused(api_endpoint::completions, body).param, param) << body;
  }
}

TEST(ServeRequest, ErrorBodyHasOpenAIsShape) {
  api_error e;
  e.message = "m";
  e.param = "n";
  auto j = json::parse(error_body(e));
  EXPECT_EQ(j["error"]["message"], "m");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "n");
  EXPECT_TRUE(j["error"]["code"].is_null());
}

namespace {

// Token i stands for the bytes given; ids past the table are "".
class table_tokenizer final : public tokenizer {
 public:
  explicit table_tokenizer(std::vector<std::string> t) : t_(std::move(t)) {}
  std::vector<int32_t> encode(std::string_view) const override { return {}; }
  std::string decode(const std::vector<int32_t>&, bool) const override { return {}; }
  std::string token_bytes(int32_t id, bool) const override {
    return id >= 0 && id < static_cast<int32_t>(t_.size()) ? t_[id] : "";
  }
  int32_t vocab_size() const override { return static_cast<int32_t>(t_.size()); }
  int32_t bos_id() const override { return -1; }
  int32_t eos_id() const override { return -1; }
  int32_t pad_id() const override { return -1; }
  int32_t special_id(std::string_view) const override { return -1; }
  void save_dir(const std::string&) const override {}
  const char* kind() const override { return "table"; }

 private:
  std::vector<std::string> t_;
};

}  // namespace

TEST(ServeChoiceText, AStopStringAcrossTokensCutsTheTextAndNothingPastItWasHandedOut) {
  table_tokenizer tok({"ab", "c", "d", "e"});
  choice_text c({"cd"}, {});
  std::string out;
  EXPECT_FALSE(c.push(0, -0.5f, tok));  // "ab": the last byte is held (len("cd") - 1)
  out += c.take_text();
  EXPECT_EQ(out, "a");
  EXPECT_FALSE(c.push(1, -0.1f, tok));  // "abc": "c" may start "cd": held
  out += c.take_text();
  EXPECT_EQ(out, "ab");
  EXPECT_TRUE(c.push(2, -0.2f, tok));  // "abcd": stop
  out += c.take_text();
  EXPECT_EQ(out, "ab");
  EXPECT_EQ(c.text(), "ab");
  EXPECT_TRUE(c.stopped());
  EXPECT_EQ(c.tokens(), (std::vector<int32_t>{0, 1, 2}));  // through the completing token
  EXPECT_TRUE(c.push(3, 0, tok));                          // ended: ignored
  EXPECT_EQ(c.tokens().size(), 3u);
}

TEST(ServeChoiceText, HoldsBackNeitherHalfCharactersNorMoreThanAStopCouldClaim) {
  // "你" is E4 BD A0, split over two tokens; then "z".
  table_tokenizer tok({"a", "\xE4\xBD", "\xA0", "z", "xyz", "q"});
  choice_text c({"xyz"}, {});
  c.push(0, 0, tok);
  c.push(1, 0, tok);
  EXPECT_EQ(c.take_text(), "");  // "a" is within the 2 held bytes
  c.push(2, 0, tok);             // "a你" (4 bytes): safe up to byte 2, backed up to 1
  EXPECT_EQ(c.take_text(), "a");
  c.push(3, 0, tok);  // "a你z" (5 bytes): safe up to byte 3, inside 你: backed up to 1
  EXPECT_EQ(c.take_text(), "");
  c.push(5, 0, tok);  // "a你zq": safe up to byte 4, the end of 你
  EXPECT_EQ(c.take_text(), "\xE4\xBD\xA0");
  c.finish();  // no stop: everything
  EXPECT_EQ(c.take_text(), "zq");
  EXPECT_FALSE(c.stopped());
  EXPECT_EQ(c.text(), "a\xE4\xBD\xA0zq");
}

TEST(ServeChoiceText, AStopTokenEndsTheChoiceAndIsNotText) {
  table_tokenizer tok({"a", "<eot>", "b"});
  choice_text c({}, {1});
  EXPECT_FALSE(c.push(0, -1, tok));
  EXPECT_TRUE(c.push(1, -2, tok));
  EXPECT_EQ(c.take_text(), "a");
  EXPECT_EQ(c.tokens(), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(c.logprobs(), (std::vector<float>{-1, -2}));
  // With no stop strings nothing is held back.
  choice_text d({}, {});
  d.push(2, 0, tok);
  EXPECT_EQ(d.take_text(), "b");
}

namespace {

std::shared_ptr<CausalLMImpl> tiny(uint64_t seed) {
  return init_causal_lm(test::tiny_model_config(), 0.3, seed, torch::kCPU).ptr();
}

generator_options engine_opts(int64_t slots) {
  generator_options o;
  o.max_slots = slots;
  o.max_seq_len = 64;
  o.seed = 9;
  return o;
}

// Collects a job's updates; wait() returns them once the job is done. The bound only guards
// against a hang: a tiny model's jobs take milliseconds.
struct collected {
  std::mutex mu;
  std::condition_variable cv;
  std::map<int32_t, choice_delta> choices;  // accumulated per choice
  bool done = false;
  std::string error;
  int64_t calls = 0;

  job_sink sink() {
    return [this](const job_update& u) {
      std::lock_guard<std::mutex> lock(mu);
      ++calls;
      for (const auto& d : u.deltas) {
        auto& c = choices[d.index];
        c.index = d.index;
        c.text += d.text;
        c.tokens.insert(c.tokens.end(), d.tokens.begin(), d.tokens.end());
        c.logprobs.insert(c.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
        if (!d.finish_reason.empty()) c.finish_reason = d.finish_reason;
      }
      done = u.done;
      error = u.error;
      cv.notify_all();
    };
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::minutes(2), [&] { return done; }))
        << "the engine never finished the job";
  }
};

std::vector<int32_t> plain_greedy(std::shared_ptr<CausalLMImpl> m, std::vector<int32_t> prompt,
                                  int32_t max_new) {
  auto o = engine_opts(1);
  o.eos_id = -1;
  generator g(m, o);
  gen_request r;
  r.prompt = std::move(prompt);
  r.max_new_tokens = max_new;
  r.sampling.temperature = 0;
  g.submit(r);
  return g.run_all().at(0).request.tokens;
}

serve_job job(std::vector<int32_t> prompt, int32_t max_tokens, double temperature = 0) {
  serve_job j;
  j.prompt = std::move(prompt);
  j.max_tokens = max_tokens;
  j.sampling.temperature = temperature;
  return j;
}

}  // namespace

TEST(ServeEngine, GreedyOutputEqualsAPlainGeneratorRunWhateverElseIsInTheBatch) {
  auto m = tiny(3);
  tokenizer_ptr tok = std::make_shared<char_tokenizer>(char_tokenizer::builtin());
  const std::vector<int32_t> p1 = {1, 5, 7, 9}, p2 = {3, 4}, p3 = {6, 6, 6, 6, 6, 6};
  const auto want1 = plain_greedy(m, p1, 20);
  const auto want2 = plain_greedy(m, p2, 9);
  serve_engine e(m, tok, engine_opts(4), /*steps_per_round=*/3, /*version=*/7);
  collected a, b, c;
  e.submit(job(p1, 20), a.sink());
  e.submit(job(p2, 9), b.sink());
  auto sampled = job(p3, 15, 1.0);
  sampled.n = 2;
  e.submit(sampled, c.sink());
  a.wait();
  b.wait();
  c.wait();
  EXPECT_EQ(a.choices[0].tokens, want1);
  EXPECT_EQ(b.choices[0].tokens, want2);
  EXPECT_EQ(a.choices[0].finish_reason, "length");
  EXPECT_EQ(a.choices[0].logprobs.size(), want1.size());
  ASSERT_EQ(c.choices.size(), 2u);
  EXPECT_EQ(c.choices[1].tokens.size(), 15u);
  EXPECT_EQ(e.version(), 7);
  EXPECT_EQ(e.stats().requests, 3);
}

TEST(ServeEngine, ASeedGivesTheSameChoicesAndChoicesOfOneRequestDiffer) {
  auto m = tiny(4);
  tokenizer_ptr tok = std::make_shared<char_tokenizer>(char_tokenizer::builtin());
  serve_engine e(m, tok, engine_opts(8), 2, 0);
  auto j = job({2, 3, 4}, 24, 1.0);
  j.n = 3;
  j.seed = 42;
  collected a, b, other;
  e.submit(j, a.sink());
  e.submit(job({9, 9}, 30, 1.0), other.sink());  // something else in the batch
  e.submit(j, b.sink());
  a.wait();
  b.wait();
  other.wait();
  for (int32_t i = 0; i < 3; ++i)
    EXPECT_EQ(a.choices[i].tokens, b.choices[i].tokens) << "choice " << i;
  // Three streams of one seed: 24 tokens from a 23-token vocabulary at temperature 1 coincide
  // by chance with probability ~0.
  EXPECT_NE(a.choices[0].tokens, a.choices[1].tokens);
  EXPECT_NE(a.choices[1].tokens, a.choices[2].tokens);
}

TEST(ServeEngine, StopTokensEndAChoiceAndFreeItsSlot) {
  auto m = tiny(5);
  tokenizer_ptr tok = std::make_shared<char_tokenizer>(char_tokenizer::builtin());
  const std::vector<int32_t> p = {1, 2, 3};
  const auto greedy = plain_greedy(m, p, 12);
  // Stop at the token greedy decoding produces 5th: the choice ends there, inclusive.
  auto j = job(p, 12);
  j.stop_ids = {greedy[4]};
  const auto first = std::find(greedy.begin(), greedy.end(), greedy[4]) - greedy.begin();
  serve_engine e(m, tok, engine_opts(1), 4, 0);
  collected a, b;
  e.submit(j, a.sink());
  e.submit(job(p, 12), b.sink());  // one slot: runs only once the first freed it
  a.wait();
  b.wait();
  EXPECT_EQ(a.choices[0].finish_reason, "stop");
  EXPECT_EQ(a.choices[0].tokens, std::vector<int32_t>(greedy.begin(), greedy.begin() + first + 1));
  EXPECT_EQ(b.choices[0].tokens, greedy);
}

TEST(ServeEngine, ACancelledJobHearsNothingMoreAndTheOthersGoOn) {
  auto m = tiny(6);
  tokenizer_ptr tok = std::make_shared<char_tokenizer>(char_tokenizer::builtin());
  serve_engine e(m, tok, engine_opts(2), 1, 0);
  collected gone, kept;
  const auto id = e.submit(job({1, 2}, 60), gone.sink());
  e.cancel(id);
  int64_t calls_at_cancel;
  {
    std::lock_guard<std::mutex> lock(gone.mu);
    calls_at_cancel = gone.calls;
  }
  e.submit(job({3, 4}, 40), kept.sink());
  kept.wait();
  EXPECT_EQ(kept.choices[0].tokens.size(), 40u);
  std::lock_guard<std::mutex> lock(gone.mu);
  EXPECT_EQ(gone.calls, calls_at_cancel);
  EXPECT_FALSE(gone.done);
}

TEST(ServeEngine, StagedWeightsApplyBetweenRoundsAndStampTheVersion) {
  auto m = tiny(7);
  auto other = tiny(8);
  tokenizer_ptr tok = std::make_shared<char_tokenizer>(char_tokenizer::builtin());
  const std::vector<int32_t> p = {4, 5, 6};
  const auto want = plain_greedy(other, p, 10);
  serve_engine e(m, tok, engine_opts(2), 2, 1);
  e.stage_weights(
      [other](CausalLMImpl& into) {
        torch::NoGradGuard ng;
        auto to = into.parameters();
        auto from = other->parameters();
        for (size_t i = 0; i < to.size(); ++i)
          to[i].copy_(from[i]);
      },
      2);
  collected a;
  e.submit(job(p, 10), a.sink());
  a.wait();
  EXPECT_EQ(e.version(), 2);
  EXPECT_EQ(a.choices[0].tokens, want);
  EXPECT_EQ(e.stats().weight_updates, 1);
}

namespace {

served_model char_model() {
  served_model m;
  m.id = "tiny";
  m.tok = std::make_shared<char_tokenizer>(char_tokenizer::builtin());
  m.format = make_prompt_format(*m.tok, chat_format::auto_detect, "");
  return m;
}

}  // namespace

TEST(ServeApi, AJobIsTheSamePromptAsGenerateAndRefusesWhatDoesNotFit) {
  auto m = char_model();
  serve_limits limits;
  auto r = accepted(api_endpoint::chat, R"({"model": "tiny", "messages": [{"role": "user",
                                             "content": "1+2="}]})");
  auto made = make_job(r, m, 64, limits);
  ASSERT_TRUE(std::holds_alternative<serve_job>(made));
  auto j = std::get<serve_job>(made);
  EXPECT_EQ(j.prompt, encode_prompt(*m.tok, m.format, std::string("1+2=")));
  EXPECT_EQ(j.stop_ids, std::vector<int32_t>{m.format.stop_id});
  EXPECT_EQ(j.max_tokens, 64 - static_cast<int32_t>(j.prompt.size()));  // the rest of the context
  auto c = accepted(api_endpoint::completions, R"({"model": "tiny", "prompt": "1+2=",
                                                   "max_tokens": 3})");
  auto cj = std::get<serve_job>(make_job(c, m, 64, limits));
  EXPECT_EQ(cj.prompt, m.tok->encode("1+2="));
  EXPECT_EQ(cj.max_tokens, 3);

  r.model = "gpt-4";
  auto e = std::get<api_error>(make_job(r, m, 64, limits));
  EXPECT_EQ(e.status, 404);
  EXPECT_EQ(e.code, "model_not_found");
  c.max_tokens = 61;  // 4 + 61 > 64
  auto too_long = std::get<api_error>(make_job(c, m, 64, limits));
  EXPECT_EQ(too_long.status, 400);
  EXPECT_EQ(too_long.code, "context_length_exceeded");
  c.max_tokens = 60;  // fits exactly
  EXPECT_TRUE(std::holds_alternative<serve_job>(make_job(c, m, 64, limits)));
}

TEST(ServeApi, ResponseAndStreamBodies) {
  auto m = char_model();
  auto r = accepted(api_endpoint::chat, R"({"model": "tiny", "n": 2, "logprobs": true,
                     "messages": [{"role": "user", "content": "q"}]})");
  std::vector<choice_result> ch(2);
  ch[0] = {"ab", {m.tok->encode("ab")[0], m.tok->encode("ab")[1]}, {-0.5f, -0.25f}, "stop"};
  ch[1] = {"a", {m.tok->encode("a")[0]}, {-1.0f}, "length"};
  auto j = json::parse(response_body(r, m, "chatcmpl-1", 100, ch, 5, 3));
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["system_fingerprint"], "asyncrl-v3");
  EXPECT_EQ(j["choices"][1]["index"], 1);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "ab");
  EXPECT_EQ(j["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(j["choices"][0]["logprobs"]["content"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["logprobs"]["content"][1]["token"], "b");
  EXPECT_FLOAT_EQ(j["choices"][0]["logprobs"]["content"][1]["logprob"].get<float>(), -0.25f);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  EXPECT_EQ(j["usage"]["total_tokens"], 8);

  r.stream = true;
  r.include_usage = true;
  stream_state st;
  job_update u;
  u.version = 3;
  u.deltas.push_back({1, "x", {m.tok->encode("x")[0]}, {-0.1f}, ""});
  auto first = stream_chunks(r, m, "chatcmpl-1", 100, u, st);
  ASSERT_EQ(first.rfind("data: ", 0), 0u);
  auto c1 = json::parse(first.substr(6));
  EXPECT_EQ(c1["object"], "chat.completion.chunk");
  EXPECT_EQ(c1["choices"][0]["index"], 1);
  EXPECT_EQ(c1["choices"][0]["delta"]["role"], "assistant");  // first chunk of the choice
  EXPECT_EQ(c1["choices"][0]["delta"]["content"], "x");
  EXPECT_TRUE(c1["choices"][0]["finish_reason"].is_null());
  u.deltas[0] = {1, "y", {}, {}, "stop"};
  auto c2 = json::parse(stream_chunks(r, m, "chatcmpl-1", 100, u, st).substr(6));
  EXPECT_FALSE(c2["choices"][0]["delta"].contains("role"));
  EXPECT_EQ(c2["choices"][0]["finish_reason"], "stop");
  auto end = stream_end(r, m, "chatcmpl-1", 100, 5, 4, 3);
  auto usage_chunk = json::parse(end.substr(6, end.find("\n\n") - 6));
  EXPECT_EQ(usage_chunk["usage"]["completion_tokens"], 4);
  EXPECT_TRUE(usage_chunk["choices"].empty());
  EXPECT_NE(end.find("data: [DONE]\n\n"), std::string::npos);

  auto models = json::parse(models_body(m, 12));
  EXPECT_EQ(models["data"][0]["id"], "tiny");
  EXPECT_EQ(models["data"][0]["version"], 12);
}

TEST(ServeApi, ToolsAreRenderedIntoThePromptAndCallsComeBackAsToolCalls) {
  served_model m;
  m.id = "tiny";
  m.tok = hf_tokenizer::load_dir(std::string(ASYNCRL_SOURCE_DIR) + "/tests/fixtures/hf_tiny");
  m.format = make_prompt_format(*m.tok, chat_format::auto_detect, "");
  ASSERT_EQ(m.format.chat, chat_format::qwen);
  auto r = accepted(api_endpoint::chat, R"({"model": "tiny", "messages": [{"role": "user",
      "content": "2 + 3?"}], "tools": [{"type": "function", "function": {"name": "calculator",
      "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}}]})");
  auto j = std::get<serve_job>(make_job(r, m, 4096, {}));
  const auto prompt = m.tok->decode(j.prompt, /*skip_special=*/false);
  // The template's tool block (checked byte for byte against transformers in
  // test_chat_template.cpp), here only: it is there, with the tool, before the user turn.
  const auto tools_at = prompt.find("<tools>");
  ASSERT_NE(tools_at, std::string::npos) << prompt;
  EXPECT_NE(prompt.find("\"name\": \"calculator\""), std::string::npos);
  EXPECT_LT(tools_at, prompt.find("2 + 3?"));
  // Without tools the prompt has no tool block.
  r.tools_json.clear();
  auto plain = std::get<serve_job>(make_job(r, m, 4096, {}));
  EXPECT_EQ(m.tok->decode(plain.prompt, false).find("<tools>"), std::string::npos);

  // A response that calls the tool: tool_calls, content null, finish_reason tool_calls.
  r = accepted(api_endpoint::chat, R"({"model": "tiny", "messages": [{"role": "user",
      "content": "2 + 3?"}], "tools": [{"type": "function", "function": {"name": "calculator"}}]})");
  std::vector<choice_result> ch(1);
  ch[0].text =
      "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"2 + 3\"}}\n"
      "</tool_call>";
  ch[0].finish_reason = "stop";
  auto body = json::parse(response_body(r, m, "chatcmpl-2", 1, ch, 3, 0));
  const auto& msg = body["choices"][0]["message"];
  EXPECT_TRUE(msg["content"].is_null());
  ASSERT_EQ(msg["tool_calls"].size(), 1u);
  EXPECT_EQ(msg["tool_calls"][0]["type"], "function");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "calculator");
  EXPECT_EQ(json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json::parse(R"({"expression": "2 + 3"})"));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
  // Streamed: nothing of the call is sent before the choice ends, then the call as a delta.
  r.stream = true;
  stream_state st;
  job_update u;
  u.deltas.push_back({0, ch[0].text.substr(0, 12), {}, {}, ""});
  auto c1 = json::parse(stream_chunks(r, m, "chatcmpl-2", 1, u, st).substr(6));
  EXPECT_FALSE(c1["choices"][0]["delta"].contains("content"));
  u.deltas[0] = {0, ch[0].text.substr(12), {}, {}, "stop"};
  auto c2 = json::parse(stream_chunks(r, m, "chatcmpl-2", 1, u, st).substr(6));
  EXPECT_EQ(c2["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "calculator");
  EXPECT_EQ(c2["choices"][0]["delta"]["tool_calls"][0]["index"], 0);
  EXPECT_EQ(c2["choices"][0]["finish_reason"], "tool_calls");
}
