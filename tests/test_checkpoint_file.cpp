// Checkpoint files (runtime/checkpoint/checkpoint_file.hpp): the documented layout, round trips
// of binary sections, retention, atomic writes that leave no temporaries, and rejection of every
// kind of damage with a message that names the file and the problem.

#include "runtime/checkpoint/checkpoint_file.hpp"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/test_util.hpp"

namespace asyncrl {
namespace {

namespace fs = std::filesystem;

std::string all_byte_values() {
  std::string s;
  for (int i = 0; i < 256; ++i)
    s.push_back(static_cast<char>(i));
  return s;
}

checkpoint_file sample(int64_t step) {
  checkpoint_file c;
  c.step = step;
  c.sections["trainer"] = std::string("\0\0a\0b", 5) + all_byte_values();
  c.sections["controller"] = "{\"epoch\": 3}";
  c.sections["empty"] = "";
  return c;
}

uint64_t le(const std::string& b, size_t at, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i)
    v |= uint64_t(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}

std::string names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (auto& e : fs::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  std::string out;
  for (auto& n : names)
    out += n + " ";
  return out;
}

// Runs `f`, which must throw checkpoint_error; returns its message.
template <class F>
std::string rejection(F&& f) {
  try {
    f();
  } catch (const checkpoint_error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no checkpoint_error";
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(CheckpointFile, PathIsZeroPaddedToEightDigits) {
  EXPECT_EQ(checkpoint_path("/r/ckpt", 12), "/r/ckpt/step-00000012.ckpt");
  EXPECT_EQ(checkpoint_path("d", 123456789), "d/step-123456789.ckpt");
  EXPECT_THROW(checkpoint_path("d", -1), std::invalid_argument);
}

// Sections with NUL bytes and every byte value survive, as do an empty section and the step.
// Catches C-string handling of names or data, lost or reordered sections, length mix-ups.
TEST(CheckpointFile, RoundTripsBinarySections) {
  test::temp_dir d("ckpt");
  const auto dir = d.file("run/checkpoints");  // created by the write
  auto c = sample(12);
  c.sections[std::string("bin\0name", 8)] = std::string(1000, '\0');
  write_checkpoint(dir, c, 3);
  auto back = read_checkpoint(checkpoint_path(dir, 12));
  EXPECT_EQ(back.step, 12);
  EXPECT_EQ(back.sections, c.sections);
  ASSERT_EQ(back.sections.at("trainer").size(), 5u + 256u);
}

// The bytes on disk are the layout the header documents, little-endian. Catches a layout that
// drifts from the documentation (another reader, e.g. a script, would break).
TEST(CheckpointFile, LayoutIsTheDocumentedOne) {
  test::temp_dir d("ckpt");
  checkpoint_file c;
  c.step = 0x0102030405;
  c.sections["ab"] = "xyz";
  write_checkpoint(d.path().string(), c, 1);
  const auto b = test::read_text(checkpoint_path(d.path().string(), c.step));
  const std::string payload = std::string("\x01\0\0\0\x02\0\0\0ab\x03\0\0\0\0\0\0\0xyz", 21);
  ASSERT_EQ(b.size(), 64u + payload.size());
  EXPECT_EQ(b.substr(0, 8), "ASYNCRLC");
  EXPECT_EQ(le(b, 8, 4), kCheckpointFormat);
  EXPECT_EQ(le(b, 12, 4), 0u);
  EXPECT_EQ(le(b, 16, 8), 0x0102030405u);
  EXPECT_EQ(le(b, 24, 8), payload.size());
  EXPECT_EQ(b.substr(64), payload);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  ASSERT_EQ(EVP_Digest(payload.data(), payload.size(), md, &len, EVP_sha256(), nullptr), 1);
  EXPECT_EQ(b.substr(32, 32), std::string(reinterpret_cast<const char*>(md), len));
}

// keep = 2 after four writes: exactly the two newest. Catches deleting the wrong end, an
// off-by-one in the count, and no retention at all.
TEST(CheckpointFile, RetentionKeepsTheNewest) {
  test::temp_dir d("ckpt");
  const auto dir = d.path().string();
  for (int64_t s = 1; s <= 4; ++s)
    write_checkpoint(dir, sample(s), 2);
  EXPECT_EQ(list_checkpoints(dir),
            (std::vector<std::string>{checkpoint_path(dir, 3), checkpoint_path(dir, 4)}));
  EXPECT_EQ(names_in(dir), "step-00000003.ckpt step-00000004.ckpt ");
  EXPECT_THROW(write_checkpoint(dir, sample(5), 0), std::invalid_argument);
}

// After a resume from an older checkpoint (the newest was corrupt), keep = 1 must not delete
// what it just wrote because a later-numbered file exists. Catches retention over all files.
TEST(CheckpointFile, RetentionNeverDeletesTheCheckpointJustWritten) {
  test::temp_dir d("ckpt");
  const auto dir = d.path().string();
  write_checkpoint(dir, sample(4), 1);
  write_checkpoint(dir, sample(7), 1);  // deletes 4
  write_checkpoint(dir, sample(5), 1);  // 7 is later: neither counted nor deleted
  EXPECT_EQ(list_checkpoints(dir),
            (std::vector<std::string>{checkpoint_path(dir, 5), checkpoint_path(dir, 7)}));
  write_checkpoint(dir, sample(6), 1);  // deletes 5
  EXPECT_EQ(list_checkpoints(dir),
            (std::vector<std::string>{checkpoint_path(dir, 6), checkpoint_path(dir, 7)}));
}

// Numeric order, not name order (100000000 has nine digits), and only canonical checkpoint
// files. Catches a lexicographic sort and a listing that picks up temporaries or strays.
TEST(CheckpointFile, ListIsByStepAndIgnoresOtherFiles) {
  test::temp_dir d("ckpt");
  const auto dir = d.path().string();
  for (int64_t s : {100000000, 99999999, 10})
    write_checkpoint(dir, sample(s), 10);
  test::write_text(d.file(".step-00000011.ckpt.tmp-abcdef"), "partial");
  test::write_text(d.file("step-5.ckpt"), "not canonical");
  test::write_text(d.file("step-00000006.ckpt.bak"), "a copy");
  test::write_text(d.file("notes.txt"), "hello");
  fs::create_directory(d.file("step-00000007.ckpt"));
  EXPECT_EQ(list_checkpoints(dir),
            (std::vector<std::string>{checkpoint_path(dir, 10), checkpoint_path(dir, 99999999),
                                      checkpoint_path(dir, 100000000)}));
  EXPECT_TRUE(list_checkpoints(d.file("missing")).empty());
}

// A flipped payload byte. Catches a reader that does not verify the checksum.
TEST(CheckpointFile, FlippedPayloadByteFailsTheChecksum) {
  test::temp_dir d("ckpt");
  write_checkpoint(d.path().string(), sample(3), 1);
  const auto path = checkpoint_path(d.path().string(), 3);
  const auto before = test::read_text(path);
  corrupt_checkpoint_file(path, /*truncate=*/false);
  const auto after = test::read_text(path);
  ASSERT_EQ(after.size(), before.size());
  ASSERT_NE(after, before);
  ASSERT_EQ(after.substr(0, 64), before.substr(0, 64));  // the damage is in the payload
  auto msg = rejection([&] { read_checkpoint(path); });
  EXPECT_TRUE(contains(msg, path)) << msg;
  EXPECT_TRUE(contains(msg, "checksum")) << msg;
}

// Cut in half (in the payload), and cut inside the header. Catches a reader that reads past
// the end or takes a short file for a complete one; the message gives the sizes.
TEST(CheckpointFile, TruncatedFileIsRejected) {
  test::temp_dir d("ckpt");
  auto c = sample(3);
  c.sections["big"] = std::string(4000, 'x');
  write_checkpoint(d.path().string(), c, 1);
  const auto path = checkpoint_path(d.path().string(), 3);
  const auto full = fs::file_size(path);
  corrupt_checkpoint_file(path, /*truncate=*/true);
  ASSERT_EQ(fs::file_size(path), full / 2);
  auto msg = rejection([&] { read_checkpoint(path); });
  EXPECT_TRUE(contains(msg, path)) << msg;
  EXPECT_TRUE(contains(msg, "truncated")) << msg;
  EXPECT_TRUE(contains(msg, std::to_string(full))) << msg;      // expected size
  EXPECT_TRUE(contains(msg, std::to_string(full / 2))) << msg;  // actual size

  fs::resize_file(path, 40);  // inside the header
  msg = rejection([&] { read_checkpoint(path); });
  EXPECT_TRUE(contains(msg, "truncated")) << msg;
}

// Every prefix and every single-byte flip of a small file is a checkpoint_error: never a crash,
// another exception, a huge allocation (a flipped length byte), or a silently accepted file.
// Catches lengths trusted before they are checked, and header fields no check covers (the step
// is outside the checksum: the canonical file name witnesses it; reserved must be 0).
TEST(CheckpointFile, EveryPrefixAndEveryByteFlipIsRejected) {
  test::temp_dir d("ckpt");
  checkpoint_file c;
  c.step = 9;
  c.sections["a"] = std::string("\0\1\2", 3);
  c.sections["bb"] = "zz";
  write_checkpoint(d.path().string(), c, 1);
  const auto path = checkpoint_path(d.path().string(), 9);
  const auto good = test::read_text(path);
  for (size_t n = 0; n < good.size(); ++n) {
    test::write_text(path, good.substr(0, n));
    EXPECT_THROW(read_checkpoint(path), checkpoint_error) << "prefix of " << n << " bytes";
  }
  for (size_t i = 0; i < good.size(); ++i) {
    auto bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x40);
    test::write_text(path, bad);
    EXPECT_THROW(read_checkpoint(path), checkpoint_error) << "flip at byte " << i;
  }
  test::write_text(path, good + "extra");
  EXPECT_TRUE(contains(rejection([&] { read_checkpoint(path); }), "after the payload"));
  test::write_text(path, good);
  EXPECT_EQ(read_checkpoint(path).sections, c.sections);
}

// Catches a reader that ignores the version, and a message that leaves the user guessing.
TEST(CheckpointFile, WrongFormatVersionNamesBothVersions) {
  test::temp_dir d("ckpt");
  write_checkpoint(d.path().string(), sample(3), 1);
  const auto path = checkpoint_path(d.path().string(), 3);
  auto b = test::read_text(path);
  b[8] = 7;  // u32 little-endian at offset 8
  test::write_text(path, b);
  auto msg = rejection([&] { read_checkpoint(path); });
  EXPECT_TRUE(contains(msg, path)) << msg;
  EXPECT_TRUE(contains(msg, "format version 7")) << msg;
  EXPECT_TRUE(contains(msg, "version " + std::to_string(kCheckpointFormat))) << msg;
}

// Catches a reader that parses any file it is pointed at.
TEST(CheckpointFile, WrongMagicIsNotACheckpoint) {
  test::temp_dir d("ckpt");
  const auto path = d.file("step-00000001.ckpt");
  test::write_text(path, std::string(200, 'A'));
  auto msg = rejection([&] { read_checkpoint(path); });
  EXPECT_TRUE(contains(msg, path)) << msg;
  EXPECT_TRUE(contains(msg, "not a checkpoint")) << msg;
  test::write_text(path, "ASY");  // a short file that is not a checkpoint prefix either
  EXPECT_TRUE(contains(rejection([&] { read_checkpoint(path); }), "truncated"));
  test::write_text(path, "XSY");
  EXPECT_TRUE(contains(rejection([&] { read_checkpoint(path); }), "not a checkpoint"));
  msg = rejection([&] { read_checkpoint(d.file("missing.ckpt")); });
  EXPECT_TRUE(contains(msg, d.file("missing.ckpt"))) << msg;
}

// The newest is corrupt, then the two newest: resume falls back and says which files it
// skipped and why. Catches giving up at the first bad file, returning a bad one, and skipping
// without a report.
TEST(CheckpointFile, LoadLatestFallsBackPastCorruptFiles) {
  test::temp_dir d("ckpt");
  const auto dir = d.path().string();
  for (int64_t s = 1; s <= 3; ++s)
    write_checkpoint(dir, sample(s), 5);
  std::vector<std::string> skipped;
  auto got = load_latest_checkpoint(dir, &skipped);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->step, 3);
  EXPECT_TRUE(skipped.empty());

  corrupt_checkpoint_file(checkpoint_path(dir, 3), false);
  got = load_latest_checkpoint(dir, &skipped);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->step, 2);
  EXPECT_EQ(got->sections, sample(2).sections);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].rfind(checkpoint_path(dir, 3) + ": ", 0), 0u) << skipped[0];
  EXPECT_TRUE(contains(skipped[0], "checksum")) << skipped[0];

  skipped.clear();
  corrupt_checkpoint_file(checkpoint_path(dir, 2), true);
  got = load_latest_checkpoint(dir, &skipped);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->step, 1);
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_TRUE(contains(skipped[1], checkpoint_path(dir, 2))) << skipped[1];
  EXPECT_TRUE(contains(skipped[1], "truncated")) << skipped[1];

  corrupt_checkpoint_file(checkpoint_path(dir, 1), false);
  EXPECT_FALSE(load_latest_checkpoint(dir, nullptr).has_value());
  skipped.clear();
  EXPECT_FALSE(load_latest_checkpoint(d.file("missing"), &skipped).has_value());
  EXPECT_TRUE(skipped.empty());
}

// Only the final file remains after a write; a crashed writer's temporary is cleared by the
// next write; a write that fails at the rename removes its temporary. Catches a temporary
// that is renamed by copy, or left behind on success or failure.
TEST(CheckpointFile, NoTemporaryIsLeftBehind) {
  test::temp_dir d("ckpt");
  const auto dir = d.path().string();
  write_checkpoint(dir, sample(1), 5);
  EXPECT_EQ(names_in(dir), "step-00000001.ckpt ");
  test::write_text(d.file(".step-00000002.ckpt.tmp-Ab12Cd"), "a crashed writer's partial file");
  write_checkpoint(dir, sample(2), 5);
  EXPECT_EQ(names_in(dir), "step-00000001.ckpt step-00000002.ckpt ");

  // The final name is taken by a non-empty directory: rename() fails.
  fs::create_directories(d.file("step-00000003.ckpt/x"));
  try {
    write_checkpoint(dir, sample(3), 5);
    FAIL() << "the rename should have failed";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), checkpoint_path(dir, 3))) << e.what();
  }
  EXPECT_EQ(names_in(dir), "step-00000001.ckpt step-00000002.ckpt step-00000003.ckpt ");
}

// A directory that cannot exist (under a regular file). Catches swallowed I/O errors and a
// message that does not say where.
TEST(CheckpointFile, UnwritableDirectoryThrowsNamingThePath) {
  test::temp_dir d("ckpt");
  test::write_text(d.file("plain"), "a file, not a directory");
  const auto dir = d.file("plain/checkpoints");
  try {
    write_checkpoint(dir, sample(1), 1);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), dir)) << e.what();
    EXPECT_GT(std::string(e.what()).size(), dir.size() + 2) << "no reason given";
  }
}

}  // namespace
}  // namespace asyncrl
