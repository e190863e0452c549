// Fingerprint64 against the values TensorFlow documents (to_hash_bucket_fast's
// docstring, string_to_hash_bucket_op_test's comments, sparse_cross_op_test's hashed
// crosses) and FarmHash's reference outputs for every length class (0-16, 17-32,
// 33-64, the 64-byte loop with its overlapping tail). These constants are what every
// hashed feature's bucket depends on: they must never change.
#include "framework/core/fingerprint.h"

#include <string>

#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(FingerprintTest, TensorFlowDocumentedValues) {
  // tf.strings.to_hash_bucket_fast(["Hello", "TensorFlow", "2.x"], 3) == [0, 2, 2].
  EXPECT_EQ(Fingerprint64("Hello") % 3, 0u);
  EXPECT_EQ(Fingerprint64("TensorFlow") % 3, 2u);
  EXPECT_EQ(Fingerprint64("2.x") % 3, 2u);
  // string_to_hash_bucket_op_test.py: ['a', 'b', 'c', 'd'] into 10 -> [9, 2, 2, 5].
  EXPECT_EQ(Fingerprint64("a"), 12917804110809363939ull);
  EXPECT_EQ(Fingerprint64("b"), 11795596070477164822ull);
  EXPECT_EQ(Fingerprint64("c"), 11430444447143000872ull);
  EXPECT_EQ(Fingerprint64("d"), 4470636696479570465ull);
}

TEST(FingerprintTest, FarmHashReferenceValuesForEveryLengthClass) {
  EXPECT_EQ(Fingerprint64(""), 0x9ae16a3b2f90404full);
  EXPECT_EQ(Fingerprint64("abcd"), 0x1a5502de4a1f8101ull);             // 4-7 bytes.
  EXPECT_EQ(Fingerprint64("12345678"), 0x2f99d2664a0fb6eaull);         // 8-16.
  EXPECT_EQ(Fingerprint64("0123456789abcdefg"), 0xa6ddff87a449d24aull);  // 17-32.
  const std::string fox = "The quick brown fox jumps over the lazy dog";
  EXPECT_EQ(Fingerprint64(fox), 0xabbe83f33b1b5134ull);                   // 33-64.
  EXPECT_EQ(Fingerprint64(fox + ". " + fox + "."), 0x7c6cf6d1a6bb0f95ull);  // 89: the loop.
  std::string alphabet;
  while (alphabet.size() < 200) alphabet += "abcdefghijklmnopqrstuvwxyz";
  EXPECT_EQ(Fingerprint64(alphabet.substr(0, 64)), 0x9c4a595c23bb9bfaull);
  EXPECT_EQ(Fingerprint64(alphabet.substr(0, 65)), 0x2434d8917886fe2aull);
  EXPECT_EQ(Fingerprint64(alphabet.substr(0, 128)), 0xc3244d5ec8a4474aull);
  EXPECT_EQ(Fingerprint64(alphabet.substr(0, 129)), 0x9b1ca0571b8cefd4ull);
  EXPECT_EQ(Fingerprint64(alphabet.substr(0, 200)), 0x25d40299e8419af6ull);
}

TEST(FingerprintTest, CatMatchesTensorFlowsHashedCross) {
  EXPECT_EQ(FingerprintCat64(0, 0), 0x5825f5f3bd962979ull);
  // sparse_cross_op_test.py, test_hashed_output: the cross of three strings under the
  // default key is 1971693436396284976 as h % (2^63 - 1), 83 mod 100.
  uint64_t h = 0xDECAFCAFFEull;
  for (const char* s : {"batch1-FC1-F1", "batch1-FC2-F1", "batch1-FC3-F1"}) {
    h = FingerprintCat64(h, Fingerprint64(s));
  }
  EXPECT_EQ(h % 100, 83u);
  EXPECT_EQ(h % 0x7fffffffffffffffull, 1971693436396284976ull);
}

}  // namespace
}  // namespace tandem
