#include "runtime/text/char_tokenizer.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "tests/test_util.hpp"

namespace asyncrl {
namespace {

std::string all_vocab_chars() {
  std::string s = "\n";
  for (int c = 32; c <= 126; ++c)
    s.push_back(static_cast<char>(c));
  return s;
}

// Expects load(path) to throw a runtime_error whose message names the file and contains `what`.
void expect_load_error(const std::string& path, const std::string& what) {
  try {
    char_tokenizer::load(path);
    ADD_FAILURE() << "load(" << path << ") did not throw; wanted '" << what << "'";
  } catch (const std::runtime_error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
}

TEST(CharTokenizer, BuiltinLayout) {
  auto t = char_tokenizer::builtin();
  EXPECT_EQ(t.vocab_size(), 100);
  EXPECT_EQ(t.pad_id(), 0);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_EQ(t.unk_id(), 3);
  // '\n' is 4, then ' ' (32) is 5, so printable c has id c - 27.
  EXPECT_EQ(t.encode("\n"), std::vector<int32_t>({4}));
  EXPECT_EQ(t.encode(" !0A~"), std::vector<int32_t>({5, 6, 21, 38, 99}));
  EXPECT_EQ(t.encode("47+385=?"), std::vector<int32_t>({25, 28, 16, 24, 29, 26, 34, 36}));
}

TEST(CharTokenizer, RoundTripsEveryVocabChar) {
  auto t = char_tokenizer::builtin();
  auto text = all_vocab_chars();
  auto ids = t.encode(text);
  ASSERT_EQ(ids.size(), 96u);
  for (size_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ(ids[i], static_cast<int32_t>(i) + 4);
  EXPECT_EQ(t.decode(ids), text);
  EXPECT_EQ(t.encode(""), std::vector<int32_t>());
  EXPECT_EQ(t.decode({}), "");
}

TEST(CharTokenizer, UnknownBytesMapToUnk) {
  auto t = char_tokenizer::builtin();
  EXPECT_EQ(t.encode("a\tb\r\xc3\xa9"), std::vector<int32_t>({70, 3, 71, 3, 3, 3}));
  EXPECT_EQ(t.encode(std::string("\0", 1)), std::vector<int32_t>({3}));
  EXPECT_EQ(t.encode("\x7f\xff"), std::vector<int32_t>({3, 3}));
}

TEST(CharTokenizer, DecodeSpecialsAndBadIds) {
  auto t = char_tokenizer::builtin();
  std::vector<int32_t> ids = {1, 70, 0, 3, 71, 2};
  EXPECT_EQ(t.decode(ids), "ab");
  EXPECT_EQ(t.decode(ids, false), "<bos>a<pad><unk>b<eos>");
  // Out-of-range ids render as <unk> whether or not specials are skipped.
  EXPECT_EQ(t.decode({-1, 70, 100, 1 << 30}), "<unk>a<unk><unk>");
  EXPECT_EQ(t.decode({-1, 100}, false), "<unk><unk>");
}

TEST(CharTokenizer, SaveLoadRoundTrip) {
  test::temp_dir dir("tokenizer");
  auto path = dir.file("tokenizer.json");
  auto t = char_tokenizer::builtin();
  t.save(path);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto u = char_tokenizer::load(path);
  EXPECT_EQ(u.vocab_size(), 100);
  auto text = all_vocab_chars();
  EXPECT_EQ(u.encode(text), t.encode(text));
  EXPECT_EQ(u.decode(u.encode(text)), text);
  // Saving over an existing file replaces it.
  t.save(path);
  EXPECT_EQ(char_tokenizer::load(path).encode("x\n"), t.encode("x\n"));
}

TEST(CharTokenizer, LoadsSmallerVocab) {
  test::temp_dir dir("tokenizer");
  auto path = dir.file("tokenizer.json");
  test::write_text(path, R"({"type":"char","specials":["<pad>","<bos>","<eos>","<unk>"],)"
                         R"("chars":"0123456789+-=? #\n","extra":1})");
  auto t = char_tokenizer::load(path);
  EXPECT_EQ(t.vocab_size(), 4 + 17);
  EXPECT_EQ(t.encode("10+2\n"), std::vector<int32_t>({5, 4, 14, 6, 20}));
  EXPECT_EQ(t.encode("a"), std::vector<int32_t>({3}));
  EXPECT_EQ(t.decode({5, 4, 20}), "10\n");
  t.save(path);
  EXPECT_EQ(char_tokenizer::load(path).encode("#?"), std::vector<int32_t>({19, 17}));
}

TEST(CharTokenizer, LoadErrorsNameFileAndProblem) {
  test::temp_dir dir("tokenizer");
  expect_load_error(dir.file("missing.json"), "cannot open");

  const std::string specials = R"("specials":["<pad>","<bos>","<eos>","<unk>"])";
  struct bad_case {
    const char* name;
    std::string text;
    const char* what;
  };
  const bad_case cases[] = {
      {"empty.json", "", "invalid JSON"},
      {"garbage.json", "{\"type\": \"char\",", "invalid JSON"},
      {"array.json", "[1,2]", "expected a JSON object"},
      {"notype.json", "{" + specials + R"(,"chars":"ab"})", "missing string field 'type'"},
      {"bpe.json", R"({"type":"bpe",)" + specials + R"(,"chars":"ab"})", "'bpe', expected 'char'"},
      {"nospecials.json", R"({"type":"char","chars":"ab"})", "field 'specials'"},
      {"reordered.json",
       R"({"type":"char","specials":["<bos>","<pad>","<eos>","<unk>"],)"
       R"("chars":"ab"})",
       "field 'specials'"},
      {"nochars.json", R"({"type":"char",)" + specials + "}", "missing string field 'chars'"},
      {"numchars.json", R"({"type":"char",)" + specials + R"(,"chars":5})",
       "missing string field 'chars'"},
      {"emptychars.json", R"({"type":"char",)" + specials + R"(,"chars":""})", "is empty"},
      {"dup.json", R"({"type":"char",)" + specials + R"(,"chars":"abca"})", "duplicate 'a'"},
      {"dupnl.json", R"({"type":"char",)" + specials + R"(,"chars":"\nx\n"})", "duplicate byte 10"},
      {"utf8.json", R"({"type":"char",)" + specials + R"(,"chars":"a\u00e9"})", "non-ASCII"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto path = dir.file(c.name);
    test::write_text(path, c.text);
    expect_load_error(path, c.what);
  }
}

TEST(CharTokenizer, SaveToMissingDirectoryThrows) {
  test::temp_dir dir("tokenizer");
  auto path = (dir.path() / "no" / "such" / "tokenizer.json").string();
  EXPECT_THROW(char_tokenizer::builtin().save(path), std::runtime_error);
}

}  // namespace
}  // namespace asyncrl
