// The RPC byte format: round trips over any chunking, and every malformed input a
// peer could send rejected with INVALID_ARGUMENT before anything large is allocated.
#include "framework/distributed/tensor_wire.h"

#include <cstring>
#include <random>

#include "framework/protos/wire.pb.h"
#include "framework/protos/worker.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

WireMessage<proto::RunGraphRequest> Sample() {
  WireMessage<proto::RunGraphRequest> m;
  m.proto.set_graph_handle("graph_7");
  m.proto.set_step_id(42);
  m.tensors.push_back(Tensor::FromVector<float>({1.5f, -2.0f, 3.25f}, TensorShape({3})));
  m.tensors.push_back(Tensor::FromVector<int64_t>({}, TensorShape({0, 4})));
  m.tensors.push_back(Tensor::Scalar<bool>(true));
  m.tensors.push_back(Tensor::Resource({"/job:ps/replica:0/task:0/device:CPU:0", "", "w"}));
  return m;
}

TEST(TensorWireTest, RoundTripsOverAnyChunking) {
  std::string flat = EncodeWireFlat(Sample());
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<absl::string_view> chunks;
    size_t pos = 0;
    while (pos < flat.size()) {
      size_t n = std::min<size_t>(flat.size() - pos, 1 + rng() % 9);
      chunks.push_back(absl::string_view(flat).substr(pos, n));
      pos += n;
    }
    WireMessage<proto::RunGraphRequest> got;
    ASSERT_TRUE(DecodeWire(chunks, &got.proto, &got.tensors).ok());
    EXPECT_EQ(got.proto.step_id(), 42);
    ASSERT_EQ(got.tensors.size(), 4u);
    EXPECT_THAT(got.tensors[0].flat<float>(), ::testing::ElementsAre(1.5f, -2.0f, 3.25f));
    EXPECT_EQ(got.tensors[1].shape(), TensorShape({0, 4}));
    EXPECT_TRUE(got.tensors[2].scalar<bool>());
    EXPECT_EQ(got.tensors[3].resource_handle().name, "w");
  }
}

TEST(TensorWireTest, DecodedTensorsAreAligned) {
  WireMessage<proto::RunGraphRequest> got;
  ASSERT_TRUE(DecodeWireFlat(EncodeWireFlat(Sample()), &got).ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(got.tensors[0].raw_data()) % 64, 0u);
}

std::string WithTensor(const proto::WireTensor& t, const std::string& data) {
  proto::WireEnvelope env;
  *env.add_tensors() = t;
  std::string e = env.SerializeAsString();
  uint32_t n = e.size();
  std::string out(4, '\0');
  std::memcpy(out.data(), &n, 4);
  return out + e + data;
}

absl::Status Decode(const std::string& bytes) {
  WireMessage<proto::RunGraphRequest> m;
  return DecodeWireFlat(bytes, &m);
}

TEST(TensorWireTest, RejectsMalformedMessages) {
  EXPECT_THAT(Decode("ab").message(), HasSubstr("4-byte length"));
  EXPECT_THAT(Decode(std::string("\xff\xff\x00\x00xyz", 7)).message(), HasSubstr("envelope of"));
  std::string flat = EncodeWireFlat(Sample());
  EXPECT_THAT(Decode(flat.substr(0, flat.size() - 1)).message(), HasSubstr("remain"));
  EXPECT_THAT(Decode(flat + "x").message(), HasSubstr("after the last tensor"));

  proto::WireTensor huge;  // 2^62 floats: rejected before allocating.
  huge.set_dtype(proto::DT_FLOAT);
  huge.add_dim(int64_t{1} << 31);
  huge.add_dim(int64_t{1} << 31);
  huge.set_num_bytes(uint64_t{1} << 62);
  absl::Status s = Decode(WithTensor(huge, "abcd"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tensor 0"));

  proto::WireTensor overflow = huge;  // Element count overflows int64.
  overflow.add_dim(int64_t{1} << 40);
  EXPECT_EQ(Decode(WithTensor(overflow, "")).code(), absl::StatusCode::kInvalidArgument);

  proto::WireTensor wrong_size;
  wrong_size.set_dtype(proto::DT_FLOAT);
  wrong_size.add_dim(2);
  wrong_size.set_num_bytes(7);
  EXPECT_THAT(Decode(WithTensor(wrong_size, "1234567")).message(), HasSubstr("needs 8 bytes"));

  proto::WireTensor bad_dtype;
  bad_dtype.set_dtype(static_cast<proto::DataType>(77));
  EXPECT_THAT(Decode(WithTensor(bad_dtype, "")).message(), HasSubstr("unknown dtype"));

  proto::WireTensor negative;
  negative.set_dtype(proto::DT_INT32);
  negative.add_dim(-3);
  EXPECT_EQ(Decode(WithTensor(negative, "")).code(), absl::StatusCode::kInvalidArgument);

  proto::WireTensor bools;
  bools.set_dtype(proto::DT_BOOL);
  bools.add_dim(2);
  bools.set_num_bytes(2);
  EXPECT_THAT(Decode(WithTensor(bools, std::string("\x01\x07", 2))).message(), HasSubstr("bool"));
}

}  // namespace
}  // namespace tandem
