// The weights link (runtime/dist/weight_link.hpp): both ends in this process, on loopback. The
// waits below are bounds against a hang, not timing checks.

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "runtime/dist/weight_link.hpp"

namespace asyncrl {
namespace {

using namespace std::chrono_literals;

template <class T>
T link_within_a_minute(std::future<T>& f) {
  if (f.wait_for(60s) != std::future_status::ready) ADD_FAILURE() << "no answer within 60 s";
  return f.get();
}

std::vector<char> link_bytes(size_t n, int seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<char>((i * 131 + static_cast<size_t>(seed) * 7 + i / 4096) & 0xff);
  return v;
}

struct link_received {
  std::string error;
  std::vector<char> bytes;
};

TEST(WeightLink, VersionsArriveWholeAndInOrderAcrossBuckets) {
  // Fails if: a bucket is lost, repeated or placed at the wrong offset (the sizes are not
  // multiples of the bucket, so the last bucket is short); the last partial bucket is dropped;
  // the second version overtakes or overwrites the first; either end reports an error.
  weight_link_options so;
  so.sender = true;
  so.timeout = 20s;
  so.bucket_bytes = 1 << 20;
  std::promise<std::string> sender_joined, receiver_joined;
  weight_link sender(so, [&](const std::string& e) { sender_joined.set_value(e); });
  ASSERT_GT(sender.port(), 0);

  weight_link_options ro = so;
  ro.sender = false;
  ro.port = sender.port();
  weight_link receiver(ro, [&](const std::string& e) { receiver_joined.set_value(e); });
  auto sj = sender_joined.get_future();
  auto rj = receiver_joined.get_future();
  ASSERT_EQ(link_within_a_minute(rj), "");
  ASSERT_EQ(link_within_a_minute(sj), "");

  const auto v1 = std::make_shared<const std::vector<char>>(link_bytes((3 << 20) + 12345, 1));
  const auto v2 = std::make_shared<const std::vector<char>>(link_bytes(777, 2));
  std::promise<link_received> got1, got2;
  std::promise<std::string> sent1, sent2;
  receiver.receive(static_cast<int64_t>(v1->size()),
                   [&](const std::string& e, std::vector<char> b) {
                     got1.set_value({e, std::move(b)});
                   });
  receiver.receive(static_cast<int64_t>(v2->size()),
                   [&](const std::string& e, std::vector<char> b) {
                     got2.set_value({e, std::move(b)});
                   });
  sender.send(v1, [&](const std::string& e) { sent1.set_value(e); });
  sender.send(v2, [&](const std::string& e) { sent2.set_value(e); });
  auto s1 = sent1.get_future(), s2 = sent2.get_future();
  auto g1 = got1.get_future(), g2 = got2.get_future();
  EXPECT_EQ(link_within_a_minute(s1), "");
  EXPECT_EQ(link_within_a_minute(s2), "");
  auto r1 = link_within_a_minute(g1);
  auto r2 = link_within_a_minute(g2);
  EXPECT_EQ(r1.error, "");
  EXPECT_EQ(r2.error, "");
  EXPECT_TRUE(r1.bytes == *v1) << "version 1 arrived damaged (" << r1.bytes.size() << " bytes)";
  EXPECT_TRUE(r2.bytes == *v2) << "version 2 arrived damaged (" << r2.bytes.size() << " bytes)";
}

TEST(WeightLink, AReceiverThatNeverComesIsAnErrorWithinTheTimeoutAndTheLinkStaysDead) {
  // Fails if: the sender waits forever (the future bound trips), reports success, or does not
  // say who is missing; a send on the dead link claims success.
  weight_link_options so;
  so.sender = true;
  so.timeout = 300ms;
  so.peer = "worker 7";
  std::promise<std::string> joined;
  weight_link sender(so, [&](const std::string& e) { joined.set_value(e); });
  auto j = joined.get_future();
  const auto why = link_within_a_minute(j);
  EXPECT_NE(why.find("rank(s) 1 did not join"), std::string::npos) << why;
  EXPECT_NE(why.find("worker 7"), std::string::npos) << why;
  std::promise<std::string> sent;
  sender.send(std::make_shared<const std::vector<char>>(16, 'x'),
              [&](const std::string& e) { sent.set_value(e); });
  auto s = sent.get_future();
  EXPECT_EQ(link_within_a_minute(s), why);
}

TEST(WeightLink, ALinkDestroyedWhileWaitingForItsPeerGivesUp) {
  // The synchronizer drops the link of a node that declined it, while the sender still waits
  // for that node. Fails if: the wait is not abandoned (the destructor would block for the whole
  // timeout, here an hour, and the test's bound trips); the outcome claims the link formed.
  weight_link_options so;
  so.sender = true;
  so.timeout = std::chrono::hours(1);
  std::promise<std::string> joined;
  auto j = joined.get_future();
  auto done = std::async(std::launch::async, [&] {
    weight_link sender(so, [&](const std::string& e) { joined.set_value(e); });
  });
  ASSERT_EQ(done.wait_for(60s), std::future_status::ready) << "the destructor did not give up";
  const auto why = link_within_a_minute(j);
  EXPECT_NE(why.find("abandoned"), std::string::npos) << why;
}

}  // namespace
}  // namespace asyncrl
