#include "runtime/model/safetensors.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>

#include "tests/test_util.hpp"

namespace asyncrl {
namespace {

// 8-byte little-endian length + `json` + `data_bytes` filler bytes, built without the writer.
std::vector<uint8_t> raw_file(const std::string& json, size_t data_bytes = 0,
                              uint64_t length = std::numeric_limits<uint64_t>::max()) {
  const uint64_t n = length == std::numeric_limits<uint64_t>::max() ? json.size() : length;
  std::vector<uint8_t> b;
  for (int i = 0; i < 8; ++i)
    b.push_back(static_cast<uint8_t>(n >> (8 * i)));
  b.insert(b.end(), json.begin(), json.end());
  b.resize(b.size() + data_bytes, 0xAB);
  return b;
}

std::string header_json(const std::vector<uint8_t>& b) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | b[i];
  return std::string(b.begin() + 8, b.begin() + 8 + static_cast<ptrdiff_t>(n));
}

// Passes when parse throws safetensors_error whose message is "mem.st: ..." and holds `what`.
::testing::AssertionResult rejects(std::vector<uint8_t> bytes, const std::string& what) {
  try {
    safetensors_file::parse(std::move(bytes), "mem.st");
  } catch (const safetensors_error& e) {
    const std::string msg = e.what();
    if (msg.rfind("mem.st: ", 0) == 0 && msg.find(what) != std::string::npos)
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "message '" << msg << "' lacks '" << what << "'";
  }
  return ::testing::AssertionFailure() << "accepted; expected an error with '" << what << "'";
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":" + dtype + ",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

template <typename T>
st_write_tensor tensor(const std::string& name, st_dtype dt, std::vector<int64_t> shape,
                       const std::vector<T>& v) {
  return {name, dt, std::move(shape), v.data(), v.size() * sizeof(T)};
}

std::vector<uint16_t> to_f16(const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float f : v)
    out.push_back(f32_to_f16(f));
  return out;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float f : v)
    out.push_back(f32_to_bf16(f));
  return out;
}

// A small file whose last tensor is non-empty, so every strict prefix is invalid.
std::vector<uint8_t> small_valid_file() {
  static const std::vector<float> a = {1.5f, -2.0f};
  static const std::vector<uint16_t> b = {0x3C00, 0xC000, 0x7BFF};
  static const std::vector<uint8_t> c = {1, 2, 3};
  return serialize_safetensors(
      {tensor("a", st_dtype::f32, {2}, a), tensor("b", st_dtype::f16, {3}, b),
       tensor("c", st_dtype::u8, {1, 3}, c)},
      {{"k", "v"}});
}

TEST(Safetensors, RoundTripsManyDtypesShapesAndMetadata) {
  const std::vector<float> w = {0.f, .5f, 1.f, 1.5f, 2.f, 2.5f};
  const std::vector<uint16_t> h = to_f16({1.f, -2.f, .5f, 65504.f});
  const std::vector<uint16_t> b = to_bf16({1.f, -2.f, .15625f, 256.f});
  const std::vector<double> s = {3.25};
  const std::vector<int64_t> i64 = {-1, 0, int64_t{1} << 40};
  const std::vector<int32_t> i32 = {-7, 7};
  const std::vector<int16_t> i16 = {-300, 300};
  const std::vector<int8_t> i8 = {-128, 0, 127};
  const std::vector<uint8_t> flag = {1, 0};
  // Deliberately not alphabetical: the reader must return file order, which is write order.
  const std::vector<st_write_tensor> in = {
      tensor("w", st_dtype::f32, {2, 3}, w),       tensor("h", st_dtype::f16, {4}, h),
      tensor("b", st_dtype::bf16, {2, 2}, b),      tensor("s", st_dtype::f64, {}, s),
      tensor("i64", st_dtype::i64, {3}, i64),      tensor("i32", st_dtype::i32, {1, 2}, i32),
      tensor("i16", st_dtype::i16, {2}, i16),      tensor("i8", st_dtype::i8, {3}, i8),
      {"empty", st_dtype::u8, {0, 5}, nullptr, 0}, tensor("flag", st_dtype::boolean, {2}, flag)};
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"step", "7"}};

  test::temp_dir dir("safetensors");
  const std::string path = dir.file("model.safetensors");
  write_safetensors(path, in, meta);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  const auto f = safetensors_file::read(path);
  EXPECT_EQ(f.source(), path);
  EXPECT_EQ(f.metadata(), meta);
  ASSERT_EQ(f.tensors().size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const auto& t = f.tensors()[i];
    SCOPED_TRACE(in[i].name);
    EXPECT_EQ(t.name, in[i].name);
    EXPECT_EQ(t.dtype, in[i].dtype);
    EXPECT_EQ(t.shape, in[i].shape);
    ASSERT_EQ(t.end - t.begin, in[i].nbytes);
    EXPECT_EQ(static_cast<size_t>(t.numel()) * st_dtype_size(t.dtype), in[i].nbytes);
    if (in[i].nbytes != 0) {
      EXPECT_EQ(std::memcmp(f.data(t), in[i].data, in[i].nbytes), 0);
    }
    EXPECT_EQ(f.find(in[i].name), &t);
  }
  EXPECT_EQ(f.find("s")->numel(), 1);
  EXPECT_EQ(f.find("empty")->numel(), 0);
  EXPECT_EQ(f.find("missing"), nullptr);
  EXPECT_EQ(f.to_f32(*f.find("w")), w);
  EXPECT_EQ(f.to_f32(*f.find("h")), (std::vector<float>{1.f, -2.f, .5f, 65504.f}));
  EXPECT_EQ(f.to_f32(*f.find("b")), (std::vector<float>{1.f, -2.f, .15625f, 256.f}));
  EXPECT_EQ(f.to_f32(*f.find("s")), (std::vector<float>{3.25f}));
}

TEST(Safetensors, SerializedHeaderIsPaddedAndInGivenOrder) {
  const auto bytes = small_valid_file();
  const std::string json = header_json(bytes);
  EXPECT_EQ((8 + json.size()) % 8, 0u);
  EXPECT_LT(json.find("\"a\""), json.find("\"b\""));
  EXPECT_LT(json.find("\"b\""), json.find("\"c\""));
  EXPECT_NE(json.find("\"data_offsets\":[8,14]"), std::string::npos) << json;
  EXPECT_EQ(json.find_last_not_of(' '), json.rfind('}'));
}

TEST(Safetensors, ReadsHandBuiltFileWithUnalignedData) {
  // JSON lists "b" before "a"; tensors come back sorted by offset. "d" sits at an odd offset.
  std::string json =
      "{" + entry("b", "\"F16\"", "[2]", "[8,12]") + ",\"__metadata__\":{\"who\":\"hand\"}," +
      entry("a", "\"F32\"", "[2]", "[0,8]") + "," + entry("c", "\"U8\"", "[1]", "[12,13]") + "," +
      entry("d", "\"BF16\"", "[1,1]", "[13,15]") + "}";
  json.append(5, ' ');
  const std::vector<uint8_t> data = {0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0xBF,  // 1, -0.5
                                     0x00, 0x3C, 0x00, 0xC0,                          // 1, -2
                                     0x2A,                                            // 42
                                     0x80, 0x3F};                                     // 1
  auto bytes = raw_file(json);
  bytes.insert(bytes.end(), data.begin(), data.end());
  test::temp_dir dir("safetensors");
  test::write_text(dir.file("hand.st"), std::string(bytes.begin(), bytes.end()));

  const auto f = safetensors_file::read(dir.file("hand.st"));
  ASSERT_EQ(f.tensors().size(), 4u);
  EXPECT_EQ(f.tensors()[0].name, "a");
  EXPECT_EQ(f.tensors()[1].name, "b");
  EXPECT_EQ(f.tensors()[3].shape, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(f.metadata().at("who"), "hand");
  EXPECT_EQ(f.to_f32(f.tensors()[0]), (std::vector<float>{1.f, -.5f}));
  EXPECT_EQ(f.to_f32(f.tensors()[1]), (std::vector<float>{1.f, -2.f}));
  EXPECT_EQ(*f.data(f.tensors()[2]), 42);
  EXPECT_EQ(f.to_f32(f.tensors()[3]), (std::vector<float>{1.f}));
}

TEST(Safetensors, ToF32RejectsIntegerAndBoolDtypes) {
  const std::vector<int32_t> v = {1, 2};
  const std::vector<uint8_t> flag = {1};
  const auto f = safetensors_file::parse(
      serialize_safetensors(
          {tensor("ids", st_dtype::i32, {2}, v), tensor("mask", st_dtype::boolean, {1}, flag)}, {}),
      "mem.st");
  try {
    f.to_f32(*f.find("ids"));
    FAIL() << "to_f32 accepted I32";
  } catch (const safetensors_error& e) {
    EXPECT_NE(std::string(e.what()).find("mem.st: tensor 'ids': dtype I32"), std::string::npos);
  }
  EXPECT_THROW(f.to_f32(*f.find("mask")), safetensors_error);
}

TEST(Safetensors, F16ToF32ExactValues) {
  EXPECT_EQ(f16_to_f32(0x3C00), 1.f);
  EXPECT_EQ(f16_to_f32(0xC000), -2.f);
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.f);
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03FF), std::ldexp(1023.f, -24));
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.f, -14));  // smallest normal
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
  EXPECT_EQ(f16_to_f32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16_to_f32(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7E00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7C01)));
}

TEST(Safetensors, Bf16ToF32ExactValues) {
  EXPECT_EQ(bf16_to_f32(0x3F80), 1.f);
  EXPECT_EQ(bf16_to_f32(0xC000), -2.f);
  EXPECT_EQ(bf16_to_f32(0x0001), std::ldexp(1.f, -133));
  EXPECT_EQ(bf16_to_f32(0x7F80), std::numeric_limits<float>::infinity());
  EXPECT_EQ(bf16_to_f32(0xFF80), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(bf16_to_f32(0x7FC0)));
}

TEST(Safetensors, F32ToF16RoundsToNearestEven) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32_to_f16(1.f), 0x3C00);
  EXPECT_EQ(f32_to_f16(-2.f), 0xC000);
  EXPECT_EQ(f32_to_f16(-0.f), 0x8000);
  EXPECT_EQ(f32_to_f16(65504.f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65519.f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.f), 0x7C00);  // tie with 65536, odd mantissa: rounds to inf
  EXPECT_EQ(f32_to_f16(1e6f), 0x7C00);
  EXPECT_EQ(f32_to_f16(inf), 0x7C00);
  EXPECT_EQ(f32_to_f16(-inf), 0xFC00);
  const uint16_t nan = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE((nan & 0x7C00) == 0x7C00 && (nan & 0x3FF) != 0);
  EXPECT_EQ(f32_to_f16(1.f + std::ldexp(1.f, -11)), 0x3C00);  // tie: stays even
  EXPECT_EQ(f32_to_f16(1.f + std::ldexp(3.f, -11)), 0x3C02);  // tie: up to even
  EXPECT_EQ(f32_to_f16(1.f + std::ldexp(1.f, -11) + std::ldexp(1.f, -20)), 0x3C01);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.f, -24)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.f, -25)), 0x0000);  // tie between 0 and 1
  EXPECT_EQ(f32_to_f16(std::nextafter(std::ldexp(1.f, -25), 1.f)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(3.f, -25)), 0x0002);     // 1.5 ulp: up to even
  EXPECT_EQ(f32_to_f16(std::ldexp(5.f, -25)), 0x0002);     // 2.5 ulp: down to even
  EXPECT_EQ(f32_to_f16(std::ldexp(2047.f, -25)), 0x0400);  // subnormal carries into normal
  EXPECT_EQ(f32_to_f16(1e-10f), 0x0000);
}

TEST(Safetensors, F32ToBf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(1.f + std::ldexp(1.f, -8)), 0x3F80);  // tie: stays even
  EXPECT_EQ(f32_to_bf16(1.f + std::ldexp(3.f, -8)), 0x3F82);  // tie: up to even
  EXPECT_EQ(f32_to_bf16(1.f + std::ldexp(1.f, -8) + std::ldexp(1.f, -20)), 0x3F81);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  uint32_t bits = 0x7F800001;  // NaN whose payload lies only in the dropped bits
  float nan;
  std::memcpy(&nan, &bits, 4);
  const uint16_t b = f32_to_bf16(nan);
  EXPECT_TRUE((b & 0x7F80) == 0x7F80 && (b & 0x7F) != 0);
}

TEST(Safetensors, HalfConversionsRoundTripEveryBitPattern) {
  for (uint32_t i = 0; i <= 0xFFFF; ++i) {
    const auto h = static_cast<uint16_t>(i);
    if (std::isnan(f16_to_f32(h)))
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f16_to_f32(h))))) << i;
    else
      EXPECT_EQ(f32_to_f16(f16_to_f32(h)), h) << i;
    if (std::isnan(bf16_to_f32(h)))
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(bf16_to_f32(h))))) << i;
    else
      EXPECT_EQ(f32_to_bf16(bf16_to_f32(h)), h) << i;
  }
}

// Checks f32_to_x against the definition: no neighbouring code is closer, and ties go to even.
template <typename To, typename From>
void check_nearest(To to, From from, uint16_t max_finite, int min_exp, int max_exp) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> exp(min_exp, max_exp);
  std::uniform_int_distribution<uint32_t> mant(0, (1u << 23) - 1);
  for (int i = 0; i < 200000; ++i) {
    uint32_t m = mant(rng);
    if (i % 4 == 0) m = (m & ~0xFFFFu) | 0x8000u;  // exact bf16 ties
    if (i % 4 == 1) m = (m & ~0x1FFFu) | 0x1000u;  // exact f16 ties (when normal)
    const float x = std::ldexp(1.f + static_cast<float>(m) * std::ldexp(1.f, -23), exp(rng));
    if (x > from(max_finite)) continue;
    const uint16_t h = to(x);
    ASSERT_LE(h, max_finite) << x;
    const double d = std::fabs(static_cast<double>(from(h)) - x);
    for (int n : {h - 1, h + 1}) {
      if (n < 0 || n > max_finite) continue;
      const double dn = std::fabs(static_cast<double>(from(static_cast<uint16_t>(n))) - x);
      ASSERT_LE(d, dn) << x;
      if (d == dn) {
        ASSERT_EQ(h % 2, 0) << x;
      }
    }
  }
}

TEST(Safetensors, NarrowingPicksNearestCode) {
  check_nearest(f32_to_f16, f16_to_f32, 0x7BFF, -28, 16);
  check_nearest(f32_to_bf16, bf16_to_f32, 0x7F7F, -135, 127);
}

TEST(Safetensors, RejectsBadLengthField) {
  EXPECT_TRUE(rejects({1, 2, 3, 4, 5}, "5 bytes, shorter than the 8-byte header length"));
  EXPECT_TRUE(rejects({}, "shorter than"));
  EXPECT_TRUE(rejects(raw_file("{}", 0, 0), "header length is 0"));
  EXPECT_TRUE(rejects(raw_file("{}", 8, 200), "header length 200 exceeds the remaining 10 bytes"));
  EXPECT_TRUE(rejects(raw_file("{}", 0, 100000001), "exceeds the 100 MB limit"));
  EXPECT_TRUE(rejects(raw_file("{}", 0, std::numeric_limits<uint64_t>::max() - 1), "100 MB"));
}

TEST(Safetensors, RejectsBadHeaders) {
  const std::string f32x4 = entry("w", "\"F32\"", "[4]", "[0,16]");
  struct bad_case {
    std::string json;
    std::string what;
  };
  const bad_case cases[] = {
      {"{\"w\": ", "header is not valid JSON"},
      {"{\"w\": \"\xff\"}", "header is not valid JSON"},  // invalid UTF-8
      {"[1, 2]", "header is not a JSON object"},
      {"{" + f32x4 + "," + f32x4 + "}", "duplicate key 'w'"},
      {"{\"w\": 5}", "tensor 'w': entry is not an object"},
      {"{" + entry("w", "\"F8\"", "[4]", "[0,4]") + "}", "tensor 'w': unknown dtype \"F8\""},
      {"{" + entry("w", "32", "[4]", "[0,16]") + "}", "unknown dtype 32"},
      {"{\"w\":{\"shape\":[4],\"data_offsets\":[0,16]}}", "unknown dtype (missing)"},
      {"{" + entry("w", "\"F32\"", "4", "[0,16]") + "}", "tensor 'w': shape is not an array"},
      {"{" + entry("w", "\"F32\"", "[-4]", "[0,16]") + "}", "shape is not an array"},
      {"{" + entry("w", "\"F32\"", "[4.0]", "[0,16]") + "}", "shape is not an array"},
      {"{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,16]}}", "shape is not an array"},
      {"{" + entry("w", "\"F32\"", "[4]", "[0]") + "}", "tensor 'w': data_offsets is not two"},
      {"{" + entry("w", "\"F32\"", "[4]", "[0,8,16]") + "}", "data_offsets is not two"},
      {"{" + entry("w", "\"F32\"", "[4]", "[0,\"16\"]") + "}", "data_offsets is not two"},
      {"{" + entry("w", "\"F32\"", "[4]", "[-1,15]") + "}", "data_offsets is not two"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4]}}", "data_offsets is not two"},
      {"{" + entry("w", "\"F32\"", "[1]", "[8,4]") + "}", "data_offsets begin 8 > end 4"},
      {"{" + entry("w", "\"F32\"", "[8]", "[0,32]") + "}",
       "tensor 'w': data_offsets end 32 is beyond the data section of 16 bytes"},
      {"{" + entry("w", "\"F32\"", "[4]", "[0,12]") + "}",
       "tensor 'w': expected 16 bytes for F32 shape of 4 elements, data_offsets span 12 bytes"},
      {"{" + entry("w", "\"F32\"", "[4294967296,4294967296,4294967296]", "[0,0]") + "}",
       "tensor 'w': shape element count overflows"},
      {"{" + entry("a", "\"F32\"", "[2]", "[0,8]") + "," + entry("b", "\"F32\"", "[2]", "[4,12]") +
           "}",
       "tensors 'a' and 'b' overlap"},
      {"{\"__metadata__\":{\"k\":1}}", "__metadata__ value for 'k' is not a string"},
      {"{\"__metadata__\":[\"k\"]}", "__metadata__ is not an object"},
  };
  for (const auto& c : cases)
    EXPECT_TRUE(rejects(raw_file(c.json, 16), c.what)) << c.json;
}

TEST(Safetensors, AcceptsEdgeCaseHeaders) {
  EXPECT_TRUE(safetensors_file::parse(raw_file("{}"), "m").tensors().empty());
  // Zero-byte tensors occupy nothing, so they may share an offset with a real one.
  const auto f = safetensors_file::parse(
      raw_file("{" + entry("a", "\"F32\"", "[2]", "[0,8]") + "," +
                   entry("z", "\"I8\"", "[3,0]", "[4,4]") + "," +
                   entry("big", "\"F32\"", "[4294967296,4294967296,0]", "[8,8]") + "}   ",
               8),
      "m");
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.find("z")->numel(), 0);
  EXPECT_EQ(f.to_f32(*f.find("big")).size(), 0u);
}

TEST(Safetensors, EveryTruncationIsRejected) {
  const auto full = small_valid_file();
  EXPECT_NO_THROW(safetensors_file::parse(full, "mem.st"));
  for (size_t len = 0; len < full.size(); ++len) {
    std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<ptrdiff_t>(len));
    EXPECT_THROW(safetensors_file::parse(std::move(prefix), "mem.st"), safetensors_error) << len;
  }
}

TEST(Safetensors, CorruptedBytesNeverThrowAnythingElse) {
  const auto full = small_valid_file();
  for (size_t i = 0; i < full.size(); ++i) {
    for (uint8_t v : {uint8_t{0}, uint8_t{0xFF}, uint8_t(full[i] ^ 1), uint8_t('9')}) {
      auto bytes = full;
      bytes[i] = v;
      try {
        const auto f = safetensors_file::parse(std::move(bytes), "mem.st");
        for (const auto& t : f.tensors())
          if (t.dtype == st_dtype::f32 || t.dtype == st_dtype::f16) (void)f.to_f32(t);
      } catch (const safetensors_error&) {
      }
    }
  }
}

TEST(Safetensors, ReadNamesMissingFile) {
  test::temp_dir dir("safetensors");
  for (const std::string& path : {dir.file("missing.st"), dir.path().string()}) {
    try {
      safetensors_file::read(path);
      FAIL() << "read accepted " << path;
    } catch (const safetensors_error& e) {
      EXPECT_EQ(std::string(e.what()), path + ": cannot open");
    }
  }
}

TEST(Safetensors, WriterRejectsBadInput) {
  const std::vector<float> v = {1.f, 2.f, 3.f};
  auto expect_error = [](const std::vector<st_write_tensor>& in, const std::string& what) {
    try {
      serialize_safetensors(in, {});
      ADD_FAILURE() << "accepted; expected " << what;
    } catch (const safetensors_error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_error({{"w", st_dtype::f32, {2}, v.data(), 12}}, "tensor 'w': nbytes is 12, expected 8");
  expect_error({{"w", st_dtype::f16, {3}, v.data(), 12}}, "nbytes is 12, expected 6");
  expect_error({tensor("w", st_dtype::f32, {3}, v), tensor("w", st_dtype::f32, {3}, v)},
               "tensor 'w': duplicate tensor name");
  expect_error({{"w", st_dtype::f32, {-1}, v.data(), 4}}, "negative dimension");
  expect_error({{"w", st_dtype::f32, {3}, nullptr, 12}}, "data is null");
  expect_error({tensor("__metadata__", st_dtype::f32, {3}, v)}, "reserved");

  test::temp_dir dir("safetensors");
  const std::string path = dir.file("no/such/dir/x.st");
  try {
    write_safetensors(path, {tensor("w", st_dtype::f32, {3}, v)});
    FAIL() << "write into a missing directory succeeded";
  } catch (const safetensors_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace asyncrl
