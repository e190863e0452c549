#include "framework/core/random.h"

#include <cmath>
#include <random>

namespace tandem {

uint64_t RandomId() {
  std::random_device rd;
  uint64_t r = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return r == 0 ? 1 : r;
}
namespace {
constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;

inline void MulHiLo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
}
}  // namespace

PhiloxRandom::PhiloxRandom(uint64_t seed, uint64_t seed2) {
  key_ = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  counter_ = {0, 0, static_cast<uint32_t>(seed2), static_cast<uint32_t>(seed2 >> 32)};
}

PhiloxRandom::Block PhiloxRandom::Next() {
  Block ctr = counter_;
  std::array<uint32_t, 2> key = key_;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    MulHiLo(kM0, ctr[0], &hi0, &lo0);
    MulHiLo(kM1, ctr[2], &hi1, &lo1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
    key[0] += kW0;
    key[1] += kW1;
  }
  Skip(1);
  return ctr;
}

void PhiloxRandom::Skip(uint64_t blocks) {
  uint64_t lo = (static_cast<uint64_t>(counter_[1]) << 32) | counter_[0];
  uint64_t new_lo = lo + blocks;
  counter_[0] = static_cast<uint32_t>(new_lo);
  counter_[1] = static_cast<uint32_t>(new_lo >> 32);
  if (new_lo < lo) {  // Carry into the high 64 bits.
    if (++counter_[2] == 0) ++counter_[3];
  }
}

// Sixteen consecutive blocks from the 128-bit counter {lo64, c2, c3}, lanes side by
// side (structure of arrays) so that the rounds vectorise; out is block-major.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) static void Philox16(
    uint64_t lo64, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1, uint32_t* out) {
  constexpr int kLanes = 16;
  uint32_t x0[kLanes], x1[kLanes], x2[kLanes], x3[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    const uint64_t c = lo64 + static_cast<uint64_t>(l);
    x0[l] = static_cast<uint32_t>(c);
    x1[l] = static_cast<uint32_t>(c >> 32);
    x2[l] = c2;
    x3[l] = c3;
  }
  for (int round = 0; round < 10; ++round) {
    for (int l = 0; l < kLanes; ++l) {
      const uint64_t p0 = static_cast<uint64_t>(kM0) * x0[l];
      const uint64_t p1 = static_cast<uint64_t>(kM1) * x2[l];
      const uint32_t y0 = static_cast<uint32_t>(p1 >> 32) ^ x1[l] ^ k0;
      const uint32_t y2 = static_cast<uint32_t>(p0 >> 32) ^ x3[l] ^ k1;
      x1[l] = static_cast<uint32_t>(p1);
      x3[l] = static_cast<uint32_t>(p0);
      x0[l] = y0;
      x2[l] = y2;
    }
    k0 += kW0;
    k1 += kW1;
  }
  for (int l = 0; l < kLanes; ++l) {
    out[4 * l] = x0[l];
    out[4 * l + 1] = x1[l];
    out[4 * l + 2] = x2[l];
    out[4 * l + 3] = x3[l];
  }
}

void PhiloxRandom::Fill(uint32_t* out, int64_t blocks) {
  int64_t i = 0;
  for (; i + 16 <= blocks; i += 16) {
    const uint64_t lo = (static_cast<uint64_t>(counter_[1]) << 32) | counter_[0];
    if (lo + 16 < lo) break;  // The low word wraps inside this batch: the scalar path carries.
    Philox16(lo, counter_[2], counter_[3], key_[0], key_[1], out + 4 * i);
    Skip(16);
  }
  for (; i < blocks; ++i) {
    const Block b = Next();
    for (int j = 0; j < 4; ++j) out[4 * i + j] = b[j];
  }
}

uint32_t RandomSampler::NextWord() {
  if (used_ == 4) {
    block_ = gen_.Next();
    used_ = 0;
  }
  return block_[used_++];
}

uint32_t RandomSampler::Uint32() { return NextWord(); }
float RandomSampler::Uniform() { return PhiloxRandom::Uint32ToFloat(NextWord()); }

float RandomSampler::Normal() {
  if (have_spare_) {
    have_spare_ = false;
    return spare_;
  }
  // Box-Muller on (0, 1] x [0, 1).
  float u1 = 1.0f - Uniform();
  float u2 = Uniform();
  float r = std::sqrt(-2.0f * std::log(u1));
  float theta = 6.28318530717958647692f * u2;
  spare_ = r * std::sin(theta);
  have_spare_ = true;
  return r * std::cos(theta);
}

float RandomSampler::TruncatedNormal() {
  for (;;) {
    float x = Normal();
    if (std::fabs(x) <= 2.0f) return x;
  }
}

SeedPair DeriveSeeds(int64_t graph_seed, int64_t op_seed, int64_t op_counter) {
  if (graph_seed == 0 && op_seed == 0) {
    std::random_device rd;
    uint64_t a = (static_cast<uint64_t>(rd()) << 32) | rd();
    uint64_t b = (static_cast<uint64_t>(rd()) << 32) | rd();
    return {a | 1, b};
  }
  if (op_seed == 0) op_seed = op_counter + 1;
  if (graph_seed == 0) graph_seed = 87654321;
  return {static_cast<uint64_t>(graph_seed), static_cast<uint64_t>(op_seed)};
}

}  // namespace tandem
