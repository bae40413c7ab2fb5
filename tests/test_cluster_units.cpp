// Units of runtime/cluster/: host:port parsing and the loopback check (address.hpp), and
// weights cut into chunks and reassembled under a SHA-256 check (weight_chunks.hpp).

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cluster/address.hpp"
#include "runtime/cluster/weight_chunks.hpp"

namespace asyncrl {
namespace {

// address.hpp ---------------------------------------------------------------------------------

// The message of split_host_port's exception, or "" if it did not throw.
std::string split_error(const std::string& s) {
  try {
    split_host_port(s);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return {};
}

TEST(Address, SplitsHostAndPort) {
  EXPECT_EQ(split_host_port("127.0.0.1:4242"),
            std::make_pair(std::string("127.0.0.1"), uint16_t{4242}));
  EXPECT_EQ(split_host_port("node-3.example.org:1"),
            std::make_pair(std::string("node-3.example.org"), uint16_t{1}));
  EXPECT_EQ(split_host_port("localhost:65535"),
            std::make_pair(std::string("localhost"), uint16_t{65535}));
  EXPECT_EQ(split_host_port("h:0").second, 0);  // port 0: any free port (cluster.listen)
  EXPECT_EQ(split_host_port("h:00080").second, 80);
}

TEST(Address, SplitsBracketedIpv6) {
  EXPECT_EQ(split_host_port("[::1]:5"), std::make_pair(std::string("::1"), uint16_t{5}));
  EXPECT_EQ(split_host_port("[fe80::1:2]:8080"),
            std::make_pair(std::string("fe80::1:2"), uint16_t{8080}));
  // Without brackets the last colon is ambiguous: refused, and the message shows the fix.
  const auto e = split_error("::1:5");
  EXPECT_NE(e.find("brackets"), std::string::npos) << e;
}

TEST(Address, RefusesAMissingPort) {
  for (const std::string s : {"127.0.0.1", "localhost", "host:", "[::1]", "[::1]:", "", ":"})
    EXPECT_NE(split_error(s), "") << "'" << s << "' was accepted";
  EXPECT_NE(split_error(":5"), "") << "a missing host was accepted";
  EXPECT_NE(split_error("127.0.0.1").find("host:port"), std::string::npos);
}

TEST(Address, RefusesAPortOver65535) {
  const auto e = split_error("h:65536");
  EXPECT_NE(e.find("65535"), std::string::npos) << e;
  EXPECT_NE(split_error("h:99999"), "");
  EXPECT_NE(split_error("h:123456"), "");                // 6 digits
  EXPECT_NE(split_error("h:99999999999999999999"), "");  // would overflow stol
}

TEST(Address, RefusesANonNumericPort) {
  for (const std::string s : {"h:abc", "h:5a", "h:-1", "h:+5", "h: 5", "h:5 ", "h:0x10", "h:1.5"}) {
    const auto e = split_error(s);
    EXPECT_NE(e.find("not a number"), std::string::npos) << "'" << s << "': " << e;
  }
}

TEST(Address, CheckHostPortAnswersWhy) {
  EXPECT_EQ(check_host_port("127.0.0.1:5"), "");
  EXPECT_EQ(check_host_port("[::1]:5"), "");
  EXPECT_NE(check_host_port("127.0.0.1"), "");
  EXPECT_NE(check_host_port("h:70000").find("65535"), std::string::npos);
}

TEST(Address, LoopbackHosts) {
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(is_loopback_host("127.5.6.7"));  // all of 127.0.0.0/8
  EXPECT_TRUE(is_loopback_host("127.255.255.255"));
  EXPECT_TRUE(is_loopback_host("::1"));
  EXPECT_TRUE(is_loopback_host("0:0:0:0:0:0:0:1"));
  EXPECT_TRUE(is_loopback_host("localhost"));
}

TEST(Address, NonLoopbackHosts) {
  EXPECT_FALSE(is_loopback_host("10.0.0.1"));
  EXPECT_FALSE(is_loopback_host("0.0.0.0"));  // every interface
  EXPECT_FALSE(is_loopback_host("::"));
  EXPECT_FALSE(is_loopback_host("128.0.0.1"));
  EXPECT_FALSE(is_loopback_host("126.255.255.255"));
  EXPECT_FALSE(is_loopback_host("192.168.1.127"));
  EXPECT_FALSE(is_loopback_host("node-3.example.org"));
  EXPECT_FALSE(is_loopback_host(""));
  EXPECT_FALSE(is_loopback_host("[::1]"));  // split_host_port removes the brackets first
}

TEST(Address, WildcardHosts) {
  EXPECT_TRUE(is_wildcard_host("0.0.0.0"));
  EXPECT_TRUE(is_wildcard_host("::"));
  EXPECT_TRUE(is_wildcard_host(""));
  EXPECT_FALSE(is_wildcard_host("127.0.0.1"));
  EXPECT_FALSE(is_wildcard_host("10.0.0.1"));
}

// The address a peer reaches us back at is the source of our route to the store: over
// loopback, 127.0.0.1 (for any 127/8 destination: lo's source). (Two network namespaces,
// partition_test.sh ranks, check the routed case.)
TEST(Address, LocalAddressTowardAHostIsTheRoutesSource) {
  EXPECT_EQ(local_address_toward("127.0.0.1", 29500), "127.0.0.1");
  EXPECT_EQ(local_address_toward("127.3.4.5", 1), "127.0.0.1");
  EXPECT_EQ(local_address_toward("::1", 29500), "::1");
}

TEST(Address, JoinHostPortIsSplitsInverse) {
  EXPECT_EQ(join_host_port("10.0.0.1", 7000), "10.0.0.1:7000");
  EXPECT_EQ(join_host_port("::1", 7000), "[::1]:7000");  // brackets: split_host_port needs them
  EXPECT_EQ(join_host_port("node-3", 1), "node-3:1");
  for (std::string s : {"10.0.0.1:7000", "[fe80::2]:29500", "localhost:65535"}) {
    const auto [h, p] = split_host_port(s);
    EXPECT_EQ(join_host_port(h, p), s);
  }
}

// The hint "workers join with: asyncrl worker --connect HOST:PORT" of a run listening on
// 0.0.0.0 named 0.0.0.0 (issue 40: no other machine can use it). Catches a hint that keeps the
// wildcard, a v4 listener hinted with a v6 address, and loopback offered before a real address.
TEST(Address, AWildcardListenerIsJoinedAtThisMachinesAddress) {
  EXPECT_EQ(join_host_for("10.9.8.7"), "10.9.8.7");  // a concrete host is kept as given
  EXPECT_EQ(join_host_for("node-3"), "node-3");
  const auto all = interface_addresses();
  std::cout << "[address] interfaces:";
  for (auto& a : all)
    std::cout << " " << a;
  std::cout << "; 0.0.0.0 -> " << join_host_for("0.0.0.0") << ", :: -> " << join_host_for("::")
            << "\n";
  // Loopback after every other address.
  const auto first_lo = std::find_if(all.begin(), all.end(), is_loopback_host);
  EXPECT_TRUE(std::none_of(first_lo, all.end(), [](auto& a) { return !is_loopback_host(a); }));
  for (const char* wildcard : {"0.0.0.0", "::"}) {
    const bool v6 = std::string(wildcard) == "::";
    const auto h = join_host_for(wildcard);
    EXPECT_FALSE(is_wildcard_host(h)) << wildcard;
    EXPECT_EQ(h.find(':') != std::string::npos, v6) << wildcard << " -> " << h;
    // This machine's first non-loopback address of the family, when it has one.
    auto real = std::find_if(all.begin(), all.end(), [&](const std::string& a) {
      return !is_loopback_host(a) && (a.find(':') != std::string::npos) == v6;
    });
    EXPECT_EQ(h, real != all.end() ? *real : (v6 ? "::1" : "127.0.0.1")) << wildcard;
  }
}

// weight_chunks.hpp -----------------------------------------------------------------------------

TEST(WeightChunks, Sha256KnownValues) {
  EXPECT_EQ(sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc", 3),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(WeightChunks, CountAndSpanOfNothing) {
  // Zero bytes are still one (empty) chunk, so that a version always has a last chunk.
  EXPECT_EQ(chunk_count(0, 10), 1);
  const auto s = chunk_at(0, 10, 0);
  EXPECT_EQ(s.offset, 0);
  EXPECT_EQ(s.size, 0);
}

TEST(WeightChunks, CountAndSpanOfAnExactMultiple) {
  EXPECT_EQ(chunk_count(100, 10), 10);
  EXPECT_EQ(chunk_count(10, 10), 1);
  for (int32_t i = 0; i < 10; ++i) {
    const auto s = chunk_at(100, 10, i);
    EXPECT_EQ(s.offset, 10 * i);
    EXPECT_EQ(s.size, 10);
  }
}

TEST(WeightChunks, CountAndSpanWithARemainder) {
  EXPECT_EQ(chunk_count(105, 10), 11);
  EXPECT_EQ(chunk_count(1, 10), 1);
  EXPECT_EQ(chunk_count(11, 10), 2);
  EXPECT_EQ(chunk_at(105, 10, 9).size, 10);
  const auto last = chunk_at(105, 10, 10);
  EXPECT_EQ(last.offset, 100);
  EXPECT_EQ(last.size, 5);
  // The spans tile [0, total) exactly.
  int64_t next = 0;
  for (int32_t i = 0; i < chunk_count(105, 10); ++i) {
    const auto s = chunk_at(105, 10, i);
    EXPECT_EQ(s.offset, next);
    next += s.size;
  }
  EXPECT_EQ(next, 105);
  // Past the end: empty, at the end.
  EXPECT_EQ(chunk_at(105, 10, 11).offset, 105);
  EXPECT_EQ(chunk_at(105, 10, 11).size, 0);
}

// A whole as the sender cuts it.
struct chunked {
  std::vector<char> whole;
  std::string digest;
  std::vector<std::vector<char>> parts;
  std::vector<int64_t> offsets;

  chunked(std::vector<char> bytes, int64_t chunk_bytes) : whole(std::move(bytes)) {
    digest = sha256_hex(whole.data(), whole.size());
    const auto total = static_cast<int64_t>(whole.size());
    for (int32_t i = 0; i < chunk_count(total, chunk_bytes); ++i) {
      const auto s = chunk_at(total, chunk_bytes, i);
      offsets.push_back(s.offset);
      parts.emplace_back(whole.begin() + s.offset, whole.begin() + s.offset + s.size);
    }
  }
  int32_t count() const { return static_cast<int32_t>(parts.size()); }
  int64_t total() const { return static_cast<int64_t>(whole.size()); }

  std::string send(weight_assembler& a, int64_t version, int32_t i) const {
    return a.add(version, i, count(), offsets[i], total(), digest, parts[i]);
  }
  // Sends every chunk in order; the first refusal, or "".
  std::string send_all(weight_assembler& a, int64_t version) const {
    for (int32_t i = 0; i < count(); ++i)
      if (auto e = send(a, version, i); !e.empty()) return e;
    return {};
  }
};

std::vector<char> some_bytes(size_t n, int seed = 1) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<char>((i * 131 + static_cast<size_t>(seed) * 7) % 256);
  return v;
}

TEST(WeightChunks, InOrderChunksReassemble) {
  const chunked c(some_bytes(1000), 64);
  ASSERT_EQ(c.count(), 16);
  weight_assembler a;
  for (int32_t i = 0; i < c.count(); ++i) {
    EXPECT_FALSE(a.complete()) << "complete before chunk " << i;
    ASSERT_EQ(c.send(a, 7, i), "") << "chunk " << i;
    EXPECT_EQ(a.version(), 7);
  }
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(a.received(), 1000);
  const auto got = a.take();
  EXPECT_EQ(got, c.whole);
  EXPECT_EQ(sha256_hex(got.data(), got.size()), c.digest);
  EXPECT_FALSE(a.complete()) << "take() empties the assembler";
}

TEST(WeightChunks, EmptyWholeIsOneEmptyChunk) {
  const chunked c({}, 64);
  ASSERT_EQ(c.count(), 1);
  weight_assembler a;
  EXPECT_EQ(c.send_all(a, 1), "");
  EXPECT_TRUE(a.complete());
  EXPECT_TRUE(a.take().empty());
}

TEST(WeightChunks, OneChunkWhole) {
  const chunked c(some_bytes(64), 64);
  ASSERT_EQ(c.count(), 1);
  weight_assembler a;
  EXPECT_EQ(c.send_all(a, 3), "");
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(a.take(), c.whole);
}

TEST(WeightChunks, OutOfOrderChunkRefused) {
  const chunked c(some_bytes(300), 100);
  weight_assembler a;
  // A new version must start at chunk 0.
  EXPECT_NE(c.send(a, 5, 1).find("chunk 0 first"), std::string::npos);
  ASSERT_EQ(c.send(a, 5, 0), "");
  const auto e = c.send(a, 5, 2);  // skips chunk 1
  EXPECT_NE(e.find("expected chunk 1"), std::string::npos) << e;
  EXPECT_EQ(c.send(a, 5, 0), "") << "chunk 0 again restarts the same version";
  EXPECT_EQ(a.received(), 100);
  EXPECT_NE(c.send(a, 5, 2), "");
  // The refusals left the state alone: the rest still completes.
  EXPECT_EQ(c.send(a, 5, 1), "");
  EXPECT_EQ(c.send(a, 5, 2), "");
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(a.take(), c.whole);
}

TEST(WeightChunks, FlippedByteFailsTheDigest) {
  const chunked c(some_bytes(250), 100);
  auto bad = c;
  bad.parts[1][17] ^= 0x01;  // damaged in transit; the digest is the sender's
  weight_assembler a;
  EXPECT_EQ(bad.send(a, 4, 0), "");
  EXPECT_EQ(bad.send(a, 4, 1), "") << "only the last chunk can tell";
  const auto e = bad.send(a, 4, 2);
  EXPECT_NE(e.find("SHA-256"), std::string::npos) << e;
  EXPECT_FALSE(a.complete());
  // The version can be sent again from the start, and then completes.
  EXPECT_NE(c.send(a, 4, 1), "") << "after a failed digest only chunk 0 is accepted";
  EXPECT_EQ(c.send_all(a, 4), "");
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(a.take(), c.whole);
}

TEST(WeightChunks, WrongDigestFailsTheLastChunk) {
  const chunked c(some_bytes(10), 4);
  auto bad = c;
  bad.digest = sha256_hex("x", 1);
  weight_assembler a;
  const auto e = bad.send_all(a, 1);
  EXPECT_NE(e.find("SHA-256"), std::string::npos) << e;
  EXPECT_FALSE(a.complete());
}

TEST(WeightChunks, NewerVersionRestarts) {
  const chunked v1(some_bytes(300, 1), 100), v2(some_bytes(200, 2), 100);
  weight_assembler a;
  ASSERT_EQ(v1.send(a, 1, 0), "");
  ASSERT_EQ(v1.send(a, 1, 1), "");
  // The sender moved on: v2's chunk 0 drops what v1 had.
  ASSERT_EQ(v2.send(a, 2, 0), "");
  EXPECT_EQ(a.version(), 2);
  EXPECT_EQ(a.received(), 100);
  EXPECT_EQ(v2.send(a, 2, 1), "");
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(a.take(), v2.whole);
  // A newer version's middle chunk, though, cannot start it.
  const chunked v3(some_bytes(300, 3), 100);
  EXPECT_NE(v3.send(a, 3, 1).find("chunk 0 first"), std::string::npos);
}

TEST(WeightChunks, OlderVersionRefused) {
  const chunked v1(some_bytes(300, 1), 100), v2(some_bytes(200, 2), 100);
  weight_assembler a;
  ASSERT_EQ(v2.send(a, 2, 0), "");
  const auto e = v1.send(a, 1, 0);
  EXPECT_NE(e.find("older"), std::string::npos) << e;
  EXPECT_EQ(a.version(), 2);
  EXPECT_EQ(a.received(), 100) << "the refusal did not disturb v2";
  EXPECT_EQ(v2.send(a, 2, 1), "");
  EXPECT_TRUE(a.complete());
  // Older than a complete version: refused too.
  EXPECT_NE(v1.send(a, 1, 0), "");
  EXPECT_TRUE(a.complete());
}

TEST(WeightChunks, OffsetThatDoesNotContinueRefused) {
  const chunked c(some_bytes(300), 100);
  weight_assembler a;
  ASSERT_EQ(c.send(a, 1, 0), "");
  // Chunk 1 claiming to start at 150 (a gap) or 50 (an overlap).
  for (int64_t off : {150, 50, 0}) {
    const auto e = a.add(1, 1, c.count(), off, c.total(), c.digest, c.parts[1]);
    EXPECT_NE(e.find("do not continue"), std::string::npos) << off << ": " << e;
  }
  EXPECT_EQ(a.received(), 100);
  // More bytes than the total announced.
  auto big = c.parts[1];
  big.resize(250);
  EXPECT_NE(a.add(1, 1, c.count(), 100, c.total(), c.digest, big), "");
  // The honest chunks still complete it.
  EXPECT_EQ(c.send(a, 1, 1), "");
  EXPECT_EQ(c.send(a, 1, 2), "");
  EXPECT_TRUE(a.complete());
}

TEST(WeightChunks, ChunkDisagreeingWithChunkZeroRefused) {
  const chunked c(some_bytes(300), 100);
  weight_assembler a;
  ASSERT_EQ(c.send(a, 1, 0), "");
  EXPECT_NE(a.add(1, 1, c.count() + 1, 100, c.total(), c.digest, c.parts[1]), "");
  EXPECT_NE(a.add(1, 1, c.count(), 100, c.total() + 1, c.digest, c.parts[1]), "");
  EXPECT_NE(a.add(1, 1, c.count(), 100, c.total(), sha256_hex("", 0), c.parts[1]), "");
  EXPECT_EQ(c.send(a, 1, 1), "");
}

TEST(WeightChunks, ShortWholeIsNotComplete) {
  // The last chunk arrives but the bytes fall short of the total: refused, not complete.
  const chunked c(some_bytes(300), 100);
  weight_assembler a;
  ASSERT_EQ(c.send(a, 1, 0), "");
  ASSERT_EQ(c.send(a, 1, 1), "");
  auto short_last = c.parts[2];
  short_last.resize(60);
  const auto e = a.add(1, 2, c.count(), 200, c.total(), c.digest, short_last);
  EXPECT_NE(e, "");
  EXPECT_FALSE(a.complete());
}

TEST(WeightChunks, CompleteVersionRefusesMoreChunks) {
  const chunked c(some_bytes(300), 100);
  weight_assembler a;
  ASSERT_EQ(c.send_all(a, 1), "");
  ASSERT_TRUE(a.complete());
  EXPECT_NE(c.send(a, 1, 0).find("already complete"), std::string::npos);
  EXPECT_NE(c.send(a, 1, 2), "");
  EXPECT_TRUE(a.complete());
  EXPECT_EQ(a.take(), c.whole);
}

}  // namespace
}  // namespace asyncrl
