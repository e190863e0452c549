#include "framework/tensor/tensor.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "framework/tensor/allocator.h"
#include "framework/tensor/tensor_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

TEST(TensorShapeTest, CreateRejectsNegativeAndHugeShapes) {
  EXPECT_FALSE(TensorShape::Create({2, -1}).ok());
  auto huge = TensorShape::Create({int64_t{1} << 31, int64_t{1} << 31});
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  auto ok = TensorShape::Create({2, 3, 4});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->num_elements(), 24);
  EXPECT_EQ(ok->DebugString(), "[2,3,4]");
}

TEST(PartialShapeTest, CompatibilityAndMerge) {
  PartialShape a({-1, 784}), b({128, -1}), c({128, 10});
  EXPECT_TRUE(a.IsCompatibleWith(b));
  EXPECT_FALSE(PartialShape({-1, 784}).IsCompatibleWith(c));
  auto m = a.Merge(b);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->DebugString(), "[128,784]");
  EXPECT_EQ(PartialShape().DebugString(), "<unknown>");
  EXPECT_TRUE(PartialShape().IsCompatibleWith(c));
}

TEST(TensorTest, BuffersAreAlignedAndSharedOnCopy) {
  Tensor t(DType::kFloat, TensorShape({3, 5}));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % kTensorAlignment, 0u);
  Tensor copy = t;
  EXPECT_TRUE(copy.SharesBufferWith(t));
  EXPECT_FALSE(t.BufferIsUnique());
  Tensor deep = t.DeepCopy();
  EXPECT_FALSE(deep.SharesBufferWith(t));
}

TEST(TensorTest, SliceViewsRowsWithoutCopy) {
  Tensor t = Tensor::FromVector<float>({0, 1, 2, 3, 4, 5}, TensorShape({3, 2}));
  Tensor s = t.Slice(1, 3);
  EXPECT_EQ(s.shape(), TensorShape({2, 2}));
  EXPECT_TRUE(s.SharesBufferWith(t));
  EXPECT_EQ(s.flat<float>()[0], 2.0f);
  EXPECT_EQ(s.flat<float>()[3], 5.0f);
}

TEST(TensorTest, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(static_cast<float>(bfloat16(1.0f)), 1.0f);
  EXPECT_EQ(static_cast<float>(bfloat16(3.14159f)), 3.140625f);
  EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16(std::nanf("")))));
}

TEST(AllocatorTest, SteadyStateReusesBlocks) {
  { Tensor warm(DType::kFloat, TensorShape({1000, 37})); }
  int64_t before = HostAllocator::Get()->GetStats().system_allocations;
  for (int i = 0; i < 100; ++i) Tensor t(DType::kFloat, TensorShape({1000, 37}));
  EXPECT_EQ(HostAllocator::Get()->GetStats().system_allocations, before);
}

// The VmFlags line of the /proc/self/smaps mapping that holds `p` ("" if none).
std::string VmFlagsOf(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    const std::string range = line.substr(0, line.find(' '));
    const std::vector<std::string> ends = absl::StrSplit(range, '-');
    uint64_t begin = 0, end = 0;
    if (ends.size() == 2 && absl::SimpleHexAtoi(ends[0], &begin) &&
        absl::SimpleHexAtoi(ends[1], &end)) {
      inside = begin <= addr && addr < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

TEST(HostAllocatorTest, LargeBlocksAskForHugePages) {
  // Whether this kernel takes the advice at all (it refuses it without THP support).
  void* probe = nullptr;
  ASSERT_EQ(posix_memalign(&probe, kHugePageBytes, kHugePageBytes), 0);
  const bool supported = madvise(probe, kHugePageBytes, MADV_HUGEPAGE) == 0;
  free(probe);
  if (!supported) GTEST_SKIP() << "this kernel has no transparent huge pages";

  // kHugePagesFromBytes and one more MiB (never touched: no memory is used).
  const int64_t floats = static_cast<int64_t>((kHugePagesFromBytes + (1 << 20)) / sizeof(float));
  Tensor large(DType::kFloat, TensorShape({floats}));
  const char* data = large.raw_data();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % kHugePageBytes, 0u);
  EXPECT_THAT(VmFlagsOf(data), HasSubstr(" hg"));
  // Size classes this large are whole huge pages (steps of 8 MiB and up): all advised.
  EXPECT_THAT(VmFlagsOf(data + kHugePagesFromBytes + 4096), HasSubstr(" hg"));
  // A block below the threshold is not advised.
  Tensor small(DType::kFloat, TensorShape({static_cast<int64_t>(kHugePagesFromBytes / 8)}));
  EXPECT_THAT(VmFlagsOf(small.raw_data()), ::testing::Not(HasSubstr(" hg")));
}

// A large block is memory nothing has touched yet, so that the kernel backs it with
// huge pages as it is first written (pages already in use stay small). The C library
// would serve it from heap memory it had used before: here, with its mmap and heap
// trimming turned off, a 48 MB block written and freed.
TEST(HostAllocatorTest, LargeBlocksAreUntouchedMemory) {
  if (mallopt(M_MMAP_MAX, 0) != 1 || mallopt(M_TRIM_THRESHOLD, 1 << 30) != 1) {
    GTEST_SKIP() << "this C library (or a sanitizer's) takes no mallopt";
  }
  void* heap = malloc(48 << 20);
  ASSERT_NE(heap, nullptr);
  std::memset(heap, 1, 48 << 20);
  free(heap);
  // 50 MB: a size class (56 MiB) no other test of this binary has freed into the cache.
  Tensor large(DType::kUInt8, TensorShape({50 << 20}));
  ASSERT_EQ(mallopt(M_MMAP_MAX, 65536), 1);  // glibc's defaults.
  ASSERT_EQ(mallopt(M_TRIM_THRESHOLD, 128 * 1024), 1);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t pages = (size_t{50} << 20) / page;
  std::vector<unsigned char> resident(pages);
  ASSERT_EQ(mincore(large.raw_data(), pages * page, resident.data()), 0) << std::strerror(errno);
  size_t touched = 0;
  for (unsigned char r : resident) touched += r & 1;
  EXPECT_EQ(touched, 0u) << "of " << pages << " pages";
  std::memset(large.raw_data(), 2, 50 << 20);  // Written and freed like any block.
}

TEST(TensorCodecTest, RoundTrip) {
  Tensor t = Tensor::FromVector<int64_t>({1, -2, 3}, TensorShape({3}));
  proto::TensorProto p;
  TensorToProto(t, &p);
  auto back = TensorFromProto(p);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->dtype(), DType::kInt64);
  EXPECT_EQ(back->flat<int64_t>()[1], -2);
  Tensor r = Tensor::Resource({"/job:ps/replica:0/task:0/device:CPU:0", "", "w"});
  TensorToProto(r, &p);
  auto rb = TensorFromProto(p);
  ASSERT_TRUE(rb.ok());
  EXPECT_EQ(rb->resource_handle().name, "w");
}

TEST(TensorCodecTest, RejectsMalformedProtos) {
  proto::TensorProto p;
  p.set_dtype(proto::DT_FLOAT);
  p.mutable_shape()->add_dim(4);
  p.set_content(std::string(12, '\0'));  // Needs 16 bytes.
  auto r = TensorFromProto(p);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("needs 16 content bytes, has 12"));

  proto::TensorProto huge;
  huge.set_dtype(proto::DT_FLOAT);
  huge.mutable_shape()->add_dim(int64_t{1} << 31);
  huge.mutable_shape()->add_dim(int64_t{1} << 31);
  EXPECT_EQ(TensorFromProto(huge).status().code(), absl::StatusCode::kInvalidArgument);

  proto::TensorProto bad_type;
  bad_type.set_dtype(static_cast<proto::DataType>(77));
  EXPECT_FALSE(TensorFromProto(bad_type).ok());

  proto::TensorProto bad_bool;
  bad_bool.set_dtype(proto::DT_BOOL);
  bad_bool.mutable_shape()->add_dim(1);
  bad_bool.set_content(std::string(1, '\x07'));
  EXPECT_FALSE(TensorFromProto(bad_bool).ok());
}

}  // namespace
}  // namespace tandem
