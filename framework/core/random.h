// framework/core/random.h
//
// Counter-based Philox4x32-10 random numbers. A stream is fully determined by
// (seed, seed2), so an op seeded from the graph seed and its own op seed draws the
// same numbers on every run, whatever the thread or device it runs on; Skip() jumps
// ahead without generating.
//
// RandomId() is a fresh nonzero 64-bit value from the OS's entropy source, for ids that
// must differ between processes and runs (device incarnations, session handles, step
// ids, collective group generations).
//
// Thread safety: a PhiloxRandom object is not shared between threads; copy it.
// RandomId may be called from any thread.
#ifndef TANDEM_FRAMEWORK_CORE_RANDOM_H_
#define TANDEM_FRAMEWORK_CORE_RANDOM_H_

#include <array>
#include <cstdint>

namespace tandem {

// A random nonzero 64-bit id.
uint64_t RandomId();

class PhiloxRandom {
 public:
  using Block = std::array<uint32_t, 4>;
  PhiloxRandom(uint64_t seed, uint64_t seed2);

  // Returns the next block of four 32-bit values.
  Block Next();
  // Advances the counter by `blocks` blocks.
  void Skip(uint64_t blocks);
  // Writes the next `blocks` blocks to out[0 .. 4 * blocks), exactly what as many
  // Next() calls return, and advances past them. Computes 16 blocks side by side,
  // compiled for AVX-512, AVX2 and the baseline (GCC target_clones).
  void Fill(uint32_t* out, int64_t blocks);

  // Uniform in [0, 1) from one 32-bit value (23 mantissa bits).
  static float Uint32ToFloat(uint32_t x) {
    return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
  }

 private:
  std::array<uint32_t, 4> counter_{};
  std::array<uint32_t, 2> key_{};
};

// Convenience distributions over a PhiloxRandom stream. Not thread-safe.
class RandomSampler {
 public:
  explicit RandomSampler(PhiloxRandom gen) : gen_(gen) {}
  float Uniform();          // [0, 1)
  float Normal();           // mean 0, stddev 1 (Box-Muller)
  float TruncatedNormal();  // Normal resampled until |x| <= 2
  uint32_t Uint32();

 private:
  uint32_t NextWord();
  PhiloxRandom gen_;
  PhiloxRandom::Block block_{};
  int used_ = 4;
  bool have_spare_ = false;
  float spare_ = 0;
};

// Derives the (seed, seed2) pair of an op as TensorFlow does: both zero means
// nondeterministic; a graph seed alone gives op seeds from `op_counter`.
struct SeedPair {
  uint64_t seed;
  uint64_t seed2;
};
SeedPair DeriveSeeds(int64_t graph_seed, int64_t op_seed, int64_t op_counter);

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_CORE_RANDOM_H_
