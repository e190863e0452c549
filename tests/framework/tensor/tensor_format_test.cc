// FormatElement: NumPy's text for each dtype, the one formatter of the logging hook and
// `ckpt dump`.
#include "framework/tensor/tensor_format.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(TensorFormatTest, EachDtypeAsNumPyPrintsIt) {
  Tensor b = Tensor::FromVector<bool>({true, false}, TensorShape({2}));
  EXPECT_EQ(FormatElement(b, 0), "True");
  EXPECT_EQ(FormatElement(b, 1), "False");
  Tensor i64 = Tensor::FromVector<int64_t>({-9007199254740993}, TensorShape({1}));
  EXPECT_EQ(FormatElement(i64, 0), "-9007199254740993");
  Tensor i32 = Tensor::FromVector<int32_t>({-7}, TensorShape({1}));
  EXPECT_EQ(FormatElement(i32, 0), "-7");
  Tensor u8 = Tensor::FromVector<uint8_t>({255}, TensorShape({1}));
  EXPECT_EQ(FormatElement(u8, 0), "255");
  // float32: the shortest text that reads back as the same float.
  Tensor f = Tensor::FromVector<float>({0.1f, 1.0f / 3.0f, 1e-5f, 2.5f}, TensorShape({4}));
  EXPECT_EQ(FormatElement(f, 0), "0.1");
  EXPECT_EQ(FormatElement(f, 1), "0.33333334");
  EXPECT_EQ(FormatElement(f, 2), "1e-05");
  EXPECT_EQ(FormatElement(f, 3), "2.5");
  Tensor bf = Tensor::FromVector<bfloat16>({bfloat16(1.5f)}, TensorShape({1}));
  EXPECT_EQ(FormatElement(bf, 0), "1.5");
  Tensor s(DType::kString, TensorShape({1}));
  s.data<std::string>()[0] = std::string("a'\n\x01", 4);
  EXPECT_EQ(FormatElement(s, 0), "b'a\\'\\n\\x01'");  // As NumPy prints bytes.
}

}  // namespace
}  // namespace tandem
