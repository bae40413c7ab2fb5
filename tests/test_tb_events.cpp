// TensorBoard event files written by hand (runtime/report/): CRC-32C against published vectors,
// the TFRecord framing read back, and the protobuf bytes of events against hand-derived ones
// (they agree with tensorboard's own protobuf; tests/report/tensorboard_test.py then reads a
// real run's files with TensorBoard's reader).

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "actors/metrics_log.hpp"
#include "runtime/report/crc32c.hpp"
#include "runtime/report/tb_event_writer.hpp"
#include "tests/test_util.hpp"

namespace asyncrl {
namespace {

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

template <class T>
T read_le(const std::string& s, size_t at) {
  T v;
  std::memcpy(&v, s.data() + at, sizeof(T));
  return v;
}

// The records of a TFRecord file, each one's length and both CRCs checked.
std::vector<std::string> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  size_t at = 0;
  while (at < file.size()) {
    EXPECT_LE(at + 12, file.size());
    const auto n = read_le<uint64_t>(file, at);
    EXPECT_EQ(read_le<uint32_t>(file, at + 8), masked_crc32c(file.substr(at, 8)));
    EXPECT_LE(at + 12 + n + 4, file.size());
    auto data = file.substr(at + 12, n);
    EXPECT_EQ(read_le<uint32_t>(file, at + 12 + n), masked_crc32c(data));
    out.push_back(std::move(data));
    at += 12 + n + 4;
  }
  return out;
}

// The top-level fields of a protobuf message: field number -> the varint value, or the bytes
// of a length-delimited one (the last one of a number wins; enough for these events).
struct fields {
  std::map<uint32_t, uint64_t> ints;
  std::map<uint32_t, std::string> bytes;
};

uint64_t varint(const std::string& s, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    const auto b = static_cast<unsigned char>(s.at(at++));
    v |= uint64_t(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
}

fields parse(const std::string& s) {
  fields f;
  size_t at = 0;
  while (at < s.size()) {
    const auto key = varint(s, at);
    const auto field = static_cast<uint32_t>(key >> 3);
    switch (key & 7) {
      case 0:
        f.ints[field] = varint(s, at);
        break;
      case 1:
        f.bytes[field] = s.substr(at, 8), at += 8;
        break;
      case 5:
        f.bytes[field] = s.substr(at, 4), at += 4;
        break;
      case 2: {
        const auto n = varint(s, at);
        f.bytes[field] = s.substr(at, n), at += n;
        break;
      }
      default:
        ADD_FAILURE() << "wire type " << (key & 7);
        return f;
    }
  }
  return f;
}

// RFC 3720 (iSCSI) B.4 and the usual check value: a wrong polynomial, an unreflected table or
// a missing final xor each fail these.
TEST(TbEvents, Crc32cMatchesPublishedVectors) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i)
    ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
  const uint32_t c = 0xE3069283u;
  EXPECT_EQ(masked_crc32c("123456789"), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

// The framing of "hello": length 5 (uint64 LE), masked CRC of those 8 bytes, the data, masked
// CRC of the data. The expected bytes are tensorboard's RecordWriter's for the same data; a
// swapped CRC order, an unmasked CRC or a 32-bit length fails.
TEST(TbEvents, RecordFramingReadsBack) {
  const auto rec = tb_record("hello");
  EXPECT_EQ(hex(rec), "0500000000000000eab2043e68656c6c6fbb1f1c19");
  ASSERT_EQ(rec.size(), 8u + 4u + 5u + 4u);
  EXPECT_EQ(read_le<uint64_t>(rec, 0), 5u);
  EXPECT_EQ(read_le<uint32_t>(rec, 8), masked_crc32c(rec.substr(0, 8)));
  EXPECT_EQ(rec.substr(12, 5), "hello");
  EXPECT_EQ(read_le<uint32_t>(rec, 17), masked_crc32c("hello"));
}

// Event{wall_time: 1.5, step: 3, summary{value{tag: "loss", simple_value: 0.25}}} by hand:
// 09 <1.5 as LE double> | 10 03 | 2a 0d <Summary: 0a 0b <Value: 0a 04 "loss" | 15 <0.25 as
// LE float>>>. A wrong field number or wire type, a double where the float goes, or a wrong
// length prefix changes these bytes.
TEST(TbEvents, ScalarEventEncodesAsHandDerived) {
  EXPECT_EQ(hex(tb_scalars_event(1.5, 3, {{"loss", 0.25}})),
            "09000000000000f83f"
            "1003"
            "2a0d"
            "0a0b"
            "0a046c6f7373"
            "150000803e");
  // simple_value is in Value's oneof: written even at 0, else TensorBoard sees no scalar (and
  // wall_time and step, plain fields, are left out at 0 as protobuf does).
  EXPECT_EQ(hex(tb_scalars_event(0, 0, {{"x", 0.0}})), "2a0a0a080a01781500000000");
  // A negative step is ten varint bytes (int64, not zigzag); 300 takes two.
  EXPECT_EQ(hex(tb_scalars_event(1.5, -1, {})), "09000000000000f83f10ffffffffffffffffff012a00");
  EXPECT_EQ(hex(tb_session_start_event(2.0, 300)), "09000000000000004010ac023a020801");
  EXPECT_EQ(hex(tb_file_version_event(1700000000.25)),
            "0900001040fc54d941"
            "1a0d" +
                hex("brain.Event:2"));
}

// The text plugin's value: tensor{dtype DT_STRING, scalar shape, string_val} and metadata
// naming the plugin "text" (without it TensorBoard shows no text).
TEST(TbEvents, TextEventCarriesTheStringAndThePluginName) {
  auto ev = parse(tb_text_event(1.0, 4, "config", "a: 1\n"));
  EXPECT_EQ(ev.ints[2], 4u);
  auto value = parse(parse(ev.bytes[5]).bytes[1]);
  EXPECT_EQ(value.bytes[1], "config");
  auto tensor = parse(value.bytes[8]);
  EXPECT_EQ(tensor.ints[1], 7u);  // DT_STRING
  EXPECT_EQ(tensor.bytes[2], "");
  EXPECT_EQ(tensor.bytes[8], "a: 1\n");
  EXPECT_EQ(parse(parse(value.bytes[9]).bytes[1]).bytes[1], "text");
}

// Bucket i counts [limit[i-1], limit[i]); the max falls in the last bucket (limit DBL_MAX).
TEST(TbEvents, HistogramBucketsCountEveryValueOnce) {
  auto h = make_tb_histogram({1, 2, 2, 5}, 4);
  EXPECT_EQ(h.min, 1);
  EXPECT_EQ(h.max, 5);
  EXPECT_EQ(h.num, 4);
  EXPECT_EQ(h.sum, 10);
  EXPECT_EQ(h.sum_squares, 34);
  EXPECT_EQ(h.bucket_limit, (std::vector<double>{2, 3, 4, std::numeric_limits<double>::max()}));
  EXPECT_EQ(h.bucket, (std::vector<double>{1, 2, 0, 1}));
  auto same = make_tb_histogram({0.5, 0.5, 0.5});
  EXPECT_EQ(same.bucket, (std::vector<double>{3}));
  // The packed doubles of HistogramProto: min (field 1) ... bucket (field 7).
  auto value = parse(parse(parse(tb_histogram_event(1.0, 1, "r", h)).bytes[5]).bytes[1]);
  auto histo = parse(value.bytes[5]);
  EXPECT_EQ(read_le<double>(histo.bytes[3], 0), 4.0);
  ASSERT_EQ(histo.bytes[7].size(), 4 * sizeof(double));
  EXPECT_EQ(read_le<double>(histo.bytes[7], 8), 2.0);
}

step_report report_with_samples(int64_t step) {
  step_report r;
  r.step = step;
  r.step_ms = 1000;
  r.reward_mean = 0.5;
  r.samples = 3;
  r.rewards = {0, 0.5, 1};
  r.response_lengths = {4, 7, 9};
  return r;
}

// metrics_log with runtime.tensorboard: the file starts with the version and the config, then
// per step one scalars event (the line's keys, "step" as the x axis only) and two histograms.
// Each file has a SessionLog START at its first step (TensorBoard's server takes the first as
// the start, a later one as a restart); a resume writes a second file whose START is at the
// checkpoint's next step.
TEST(TbEvents, MetricsLogWritesEachStepAndANewFileOnResume) {
  test::temp_dir dir;
  const auto run_dir = dir.path().string();
  {
    metrics_log log;
    log.open(run_dir, false);
    log.open_tensorboard(run_dir, "runtime:\n  seed: 1\n", -1);
    log.write(report_with_samples(1), 1.0, 10, {}, 1);
  }
  std::vector<std::string> files;
  for (auto& e : std::filesystem::directory_iterator(dir.path() / "tensorboard"))
    files.push_back(e.path().string());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_NE(files[0].find("events.out.tfevents."), std::string::npos);
  auto recs = read_records(files[0]);
  ASSERT_EQ(recs.size(), 6u);
  EXPECT_EQ(parse(recs[0]).bytes[3], "brain.Event:2");
  EXPECT_EQ(parse(recs[1]).ints.count(2), 0u);            // step 0
  EXPECT_EQ(parse(parse(recs[1]).bytes[7]).ints[1], 1u);  // SessionLog.status START
  auto text = parse(parse(parse(parse(recs[2]).bytes[5]).bytes[1]).bytes[8]).bytes[8];
  EXPECT_EQ(text, "```yaml\nruntime:\n  seed: 1\n```");
  auto scalars = parse(recs[3]);
  EXPECT_EQ(scalars.ints[2], 1u);
  EXPECT_NE(scalars.bytes[5].find("\x0a\x0breward_mean"), std::string::npos);
  EXPECT_EQ(scalars.bytes[5].find("\x0a\x04step\x15"), std::string::npos);
  auto reward = parse(parse(parse(recs[4]).bytes[5]).bytes[1]);
  EXPECT_EQ(reward.bytes[1], "reward");
  EXPECT_EQ(read_le<double>(parse(reward.bytes[5]).bytes[3], 0), 3.0);  // num
  auto length = parse(parse(parse(recs[5]).bytes[5]).bytes[1]);
  EXPECT_EQ(length.bytes[1], "response_length");
  EXPECT_EQ(read_le<double>(parse(length.bytes[5]).bytes[2], 0), 9.0);  // max

  metrics_log resumed;
  resumed.open_tensorboard(run_dir, "runtime:\n  seed: 1\n", 1);
  resumed.write(report_with_samples(2), 2.0, 20, {}, 1);
  std::vector<std::string> now;
  for (auto& e : std::filesystem::directory_iterator(dir.path() / "tensorboard"))
    now.push_back(e.path().string());
  ASSERT_EQ(now.size(), 2u);
  const auto second = now[0] == files[0] ? now[1] : now[0];
  auto r2 = read_records(second);
  ASSERT_EQ(r2.size(), 6u);
  auto start = parse(r2[1]);
  EXPECT_EQ(start.ints[2], 2u);
  EXPECT_EQ(parse(start.bytes[7]).ints[1], 1u);  // SessionLog.status START
  EXPECT_EQ(parse(r2[3]).ints[2], 2u);
  EXPECT_EQ(read_records(files[0]).size(), 6u);  // the first file is left as it was
}

}  // namespace
}  // namespace asyncrl
