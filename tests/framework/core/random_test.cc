#include "framework/core/random.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(PhiloxTest, SameSeedsSameStreamDifferentSeedsDiffer) {
  PhiloxRandom a(42, 7), b(42, 7), c(42, 8);
  for (int i = 0; i < 10; ++i) {
    auto x = a.Next(), y = b.Next(), z = c.Next();
    EXPECT_EQ(x, y);
    EXPECT_NE(x, z);
  }
}

TEST(PhiloxTest, SkipMatchesGenerating) {
  PhiloxRandom a(1, 2), b(1, 2);
  for (int i = 0; i < 5; ++i) a.Next();
  b.Skip(5);
  EXPECT_EQ(a.Next(), b.Next());
}

// Fill computes 16 blocks side by side; it must equal Next() block for block, also
// where the counter's low 64 bits wrap (the carry into the high half).
TEST(PhiloxTest, FillMatchesNext) {
  for (uint64_t start : {uint64_t{0}, ~uint64_t{0} - 20, ~uint64_t{0} - 15}) {
    for (int64_t blocks : {0, 1, 15, 16, 17, 33, 100}) {
      PhiloxRandom a(0x123456789abcdefull, 99), b(0x123456789abcdefull, 99);
      a.Skip(start);
      b.Skip(start);
      std::vector<uint32_t> filled(4 * blocks + 4, 0xdeadbeef);
      a.Fill(filled.data(), blocks);
      for (int64_t i = 0; i < blocks; ++i) {
        const PhiloxRandom::Block want = b.Next();
        for (int j = 0; j < 4; ++j) {
          ASSERT_EQ(filled[4 * i + j], want[j]) << "start " << start << " block " << i;
        }
      }
      EXPECT_EQ(filled[4 * blocks], 0xdeadbeefu) << "wrote past the end";
      EXPECT_EQ(a.Next(), b.Next()) << "start " << start << " blocks " << blocks;
    }
  }
}

TEST(RandomSamplerTest, MomentsAreRight) {
  RandomSampler s(PhiloxRandom(3, 4));
  const int n = 200000;
  double su = 0, sn = 0, sn2 = 0, st2 = 0;
  float tmax = 0;
  for (int i = 0; i < n; ++i) {
    float u = s.Uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    su += u;
    float g = s.Normal();
    sn += g;
    sn2 += g * g;
    float t = s.TruncatedNormal();
    st2 += t * t;
    tmax = std::max(tmax, std::fabs(t));
  }
  EXPECT_NEAR(su / n, 0.5, 0.01);
  EXPECT_NEAR(sn / n, 0.0, 0.01);
  EXPECT_NEAR(sn2 / n, 1.0, 0.02);
  EXPECT_LE(tmax, 2.0f);
  EXPECT_NEAR(st2 / n, 0.774, 0.02);  // Variance of a unit normal truncated to [-2, 2].
}

TEST(DeriveSeedsTest, FollowsTensorFlowRules) {
  auto s = DeriveSeeds(5, 0, 3);
  EXPECT_EQ(s.seed, 5u);
  EXPECT_EQ(s.seed2, 4u);
  auto t = DeriveSeeds(0, 9, 3);
  EXPECT_EQ(t.seed2, 9u);
  EXPECT_EQ(DeriveSeeds(0, 9, 0).seed, t.seed);
}

}  // namespace
}  // namespace tandem
