// Counter-based RNG streams: pure functions of (seed, prompt, sample, counter).

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "runtime/common/rng.hpp"

using namespace asyncrl;

TEST(Rng, DrawsArePureFunctionsOfTheirCoordinates) {
  rng_stream a(5, 17, 3), b(5, 17, 3);
  for (uint64_t c = 0; c < 100; ++c)
    EXPECT_EQ(a.bits(c), b.bits(c));
  // Drawing out of order changes nothing: no hidden state.
  EXPECT_EQ(a.uniform(42), rng_stream(5, 17, 3).uniform(42));
}

TEST(Rng, StreamsAreDistinct) {
  std::set<uint64_t> keys;
  for (uint64_t seed : {0, 1})
    for (uint64_t p = 0; p < 20; ++p)
      for (uint64_t s = 0; s < 20; ++s)
        keys.insert(rng_stream(seed, p, s).key());
  EXPECT_EQ(keys.size(), 800u);
  // Swapping prompt and sample index gives another stream.
  EXPECT_NE(rng_stream(1, 2, 3).key(), rng_stream(1, 3, 2).key());
}

TEST(Rng, UniformsAreInRangeAndBalanced) {
  rng_stream r(9, 1, 0);
  double sum = 0, sq = 0;
  const int n = 200000;
  int low = 0;
  for (int i = 0; i < n; ++i) {
    double u = r.uniform(i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sq += u * u;
    low += u < 0.1;
  }
  // Mean 1/2 and variance 1/12 within ~5 standard errors; 10% of draws below 0.1.
  EXPECT_NEAR(sum / n, 0.5, 5 * std::sqrt(1.0 / 12 / n));
  EXPECT_NEAR(sq / n - (sum / n) * (sum / n), 1.0 / 12, 0.002);
  EXPECT_NEAR(double(low) / n, 0.1, 0.004);
}
