// Which data.train_path / data.test_path values are Parquet, which files a hub directory's split
// names, and the errors without Arrow built in. Reading real Parquet files (both builds) is
// tests/hf/parquet_test.py's, which writes them with pyarrow.

#include "runtime/task/parquet_data.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/test_util.hpp"

namespace asyncrl {
namespace {

namespace fs = std::filesystem;

// A hub-layout directory: two train shards (written out of order), one test shard.
std::string make_hub(const test::temp_dir& dir) {
  const auto root = dir.file("hub");
  fs::create_directories(root + "/data");
  for (const auto* name : {"train-00001-of-00002.parquet", "train-00000-of-00002.parquet",
                           "test-00000-of-00001.parquet", "README.md"})
    test::write_text(root + "/data/" + name, "not parquet");
  return root;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const data_error& e) {
    return e.what();
  }
  return "(no data_error)";
}

TEST(ParquetData, WhichPathsAreParquet) {
  test::temp_dir dir("parquet");
  const auto hub = make_hub(dir);
  EXPECT_TRUE(is_parquet_source(hub));
  EXPECT_TRUE(is_parquet_source(hub + "/data/train-*.parquet"));
  EXPECT_TRUE(is_parquet_source(hub + "/data/test-00000-of-00001.parquet"));
  EXPECT_TRUE(is_parquet_source(dir.file("missing.parquet")));
  // A Parquet file under another name is known by its magic bytes.
  test::write_text(dir.file("shard.bin"), std::string("PAR1\x15\x04", 6));
  EXPECT_TRUE(is_parquet_source(dir.file("shard.bin")));
  test::write_text(dir.file("train.jsonl"), R"({"question":"q","answer":"1"})"
                                            "\n");
  EXPECT_FALSE(is_parquet_source(dir.file("train.jsonl")));
  EXPECT_FALSE(is_parquet_source(dir.file("missing.jsonl")));
}

TEST(ParquetData, HubDirectorySplitsInShardOrder) {
  test::temp_dir dir("parquet");
  const auto hub = make_hub(dir);
  const auto train = parquet_files(hub, "train");
  ASSERT_EQ(train.size(), 2u);
  EXPECT_EQ(fs::path(train[0]).filename(), "train-00000-of-00002.parquet");
  EXPECT_EQ(fs::path(train[1]).filename(), "train-00001-of-00002.parquet");
  const auto test = parquet_files(hub, "test");
  ASSERT_EQ(test.size(), 1u);
  EXPECT_EQ(fs::path(test[0]).filename(), "test-00000-of-00001.parquet");
  // A glob chooses any split; a file is itself.
  EXPECT_EQ(parquet_files(hub + "/data/t*-0000[0]-*.parquet", "train").size(), 2u);
  EXPECT_EQ(parquet_files(test[0], "train"), test);
}

TEST(ParquetData, FilesAtTheTopOrInASplitDirectory) {
  test::temp_dir dir("parquet");
  fs::create_directories(dir.file("flat"));
  test::write_text(dir.file("flat/test-00000-of-00001.parquet"), "x");
  EXPECT_EQ(parquet_files(dir.file("flat"), "test").size(), 1u);
  fs::create_directories(dir.file("converted/train"));  // refs/convert/parquet: train/0000.parquet
  test::write_text(dir.file("converted/train/0001.parquet"), "x");
  test::write_text(dir.file("converted/train/0000.parquet"), "x");
  const auto files = parquet_files(dir.file("converted"), "train");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(fs::path(files[0]).filename(), "0000.parquet");
}

TEST(ParquetData, ErrorsNameWhatWasSearched) {
  test::temp_dir dir("parquet");
  const auto hub = make_hub(dir);
  auto msg = error_of([&] { parquet_files(hub, "validation"); });
  EXPECT_EQ(msg.rfind(hub + ": no Parquet files for split 'validation'", 0), 0u) << msg;
  EXPECT_NE(msg.find("data/validation-*.parquet"), std::string::npos) << msg;
  msg = error_of([&] { parquet_files(hub + "/data/valid-*.parquet", "train"); });
  EXPECT_EQ(msg, hub + "/data/valid-*.parquet: no file matches");
  msg = error_of([&] { parquet_files(dir.file("nope.parquet"), "train"); });
  EXPECT_EQ(msg, dir.file("nope.parquet") + ": no such file or directory");
  msg = error_of([&] { parquet_files(dir.file("*") + "/x.parquet", "train"); });
  EXPECT_NE(msg.find("not directories"), std::string::npos) << msg;
}

TEST(ParquetData, LoadExamplesKeepsJsonl) {
  test::temp_dir dir("parquet");
  test::write_text(dir.file("train.jsonl"), R"({"q":"Q?","a":"#### 7"})"
                                            "\n");
  jsonl_fields fields;
  fields.prompt_key = "q";
  fields.answer_key = "a";
  const auto ex = load_examples(dir.file("train.jsonl"), "train", fields);
  ASSERT_EQ(ex.size(), 1u);
  EXPECT_EQ(ex[0].question, "Q?");
  EXPECT_EQ(ex[0].ground_truth, "7");
}

// Without Arrow the error says how to convert; with it, a file that is not Parquet is named.
TEST(ParquetData, UnreadableOrNotBuiltInNamesTheFix) {
  test::temp_dir dir("parquet");
  const auto hub = make_hub(dir);
  const auto msg = error_of([&] { load_examples(hub, "train", {}); });
  if (parquet_built_in()) {
    EXPECT_EQ(msg.rfind(hub + "/data/train-00000-of-00002.parquet: not a readable Parquet file", 0),
              0u)
        << msg;
  } else {
    EXPECT_EQ(msg.rfind(hub + ": Parquet data, and this asyncrl was built without Arrow", 0), 0u)
        << msg;
    EXPECT_NE(msg.find("scripts/parquet_to_jsonl.py '" + hub + "' --split train"),
              std::string::npos)
        << msg;
  }
}

// Each row becomes example_of's input: its errors name the row as the JSONL ones name the line.
TEST(ParquetData, ExampleOfNamesTheRow) {
  jsonl_fields fields;
  fields.prompt_key = "problem";
  const auto row = nlohmann::json{{"problem", "1+1?"}, {"solution", "#### 2"}};
  const auto msg = error_of([&] { example_of(row, fields, "f.parquet: row 3"); });
  EXPECT_EQ(msg, "f.parquet: row 3: missing field 'answer' (data.answer_key)");
  fields.answer_key = "solution";
  EXPECT_EQ(example_of(row, fields, "f.parquet: row 3").ground_truth, "2");
}

}  // namespace
}  // namespace asyncrl
