// Reads event files back without the writer's code: the TFRecord framing is parsed by
// hand (CRCs checked with crc32c::Value/Mask) and the protobuf wire format decoded by
// hand too, so the test pins TensorBoard's field numbers rather than our .proto.
#include "hooks/summary_writer.h"

#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/crc32c.h"
#include "framework/core/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/hand_decode.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace ::tandem::testing;  // NOLINT: the hand decoders.

class SummaryWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = env::MakeTempDir("summary_writer_test");
    ASSERT_TRUE(dir.ok());
    root_ = *dir;
  }
  void TearDown() override { (void)env::DeleteRecursively(root_); }
  std::string root_;
};

TEST_F(SummaryWriterTest, WritesFileVersionThenLossScalarsAtTheirSteps) {
  const std::string logdir = env::JoinPath(root_, "model/eval");  // Created by the writer.
  const double before = WallTimeSeconds();
  std::string path;
  {
    auto w = SummaryWriter::Create(logdir);
    ASSERT_TRUE(w.ok()) << w.status();
    path = (*w)->path();
    for (int64_t step : {0, 100, 200}) {
      ASSERT_TRUE((*w)->AddScalar("loss", 1.0f / static_cast<float>(step + 1), step).ok());
    }
    ASSERT_TRUE((*w)->AddScalars({{"accuracy", 0.5f}, {"loss", 0.25f}}, 300).ok());
  }  // The destructor flushes and closes.

  auto names = env::ListDir(logdir);
  ASSERT_TRUE(names.ok());
  ASSERT_EQ(names->size(), 1u);
  EXPECT_THAT((*names)[0], StartsWith("events.out.tfevents."));
  EXPECT_EQ(env::JoinPath(logdir, (*names)[0]), path);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  EXPECT_THAT((*names)[0], HasSubstr(absl::StrCat(".", host)));

  auto bytes = env::ReadFile(path);
  ASSERT_TRUE(bytes.ok());
  std::vector<std::string> records = ReadTfRecords(*bytes);
  ASSERT_EQ(records.size(), 5u);

  Fields first = Decode(records[0]);
  ASSERT_EQ(first.bytes.count(3), 1u);  // file_version = 3
  EXPECT_EQ(first.bytes.find(3)->second, "brain.Event:2");
  double first_time = AsDouble(first.ints.find(1)->second);
  EXPECT_GE(first_time, before - 1);
  EXPECT_LE(first_time, WallTimeSeconds() + 1);

  std::vector<Scalar> scalars = Scalars(records);
  ASSERT_EQ(scalars.size(), 5u);
  EXPECT_EQ(scalars[0].step, 0);
  EXPECT_EQ(scalars[1].step, 100);
  EXPECT_EQ(scalars[2].step, 200);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(scalars[i].tag, "loss");
    EXPECT_FLOAT_EQ(scalars[i].value, 1.0f / static_cast<float>(scalars[i].step + 1));
    EXPECT_GE(scalars[i].wall_time, first_time);
  }
  EXPECT_EQ(scalars[3].tag, "accuracy");
  EXPECT_EQ(scalars[3].step, 300);
  EXPECT_FLOAT_EQ(scalars[3].value, 0.5f);
  EXPECT_EQ(scalars[4].tag, "loss");
  EXPECT_FLOAT_EQ(scalars[4].value, 0.25f);
}

TEST_F(SummaryWriterTest, FlushMakesRecordsVisibleWhileOpen) {
  auto w = SummaryWriter::Create(root_);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->AddScalar("loss", 2.5f, 7).ok());
  ASSERT_TRUE((*w)->Flush().ok());
  auto bytes = env::ReadFile((*w)->path());
  ASSERT_TRUE(bytes.ok());
  std::vector<Scalar> scalars = Scalars(ReadTfRecords(*bytes));
  ASSERT_EQ(scalars.size(), 1u);
  EXPECT_EQ(scalars[0].step, 7);
  EXPECT_FLOAT_EQ(scalars[0].value, 2.5f);
}

TEST_F(SummaryWriterTest, TwoWritersInOneDirectoryGetDistinctFiles) {
  auto a = SummaryWriter::Create(root_);
  auto b = SummaryWriter::Create(root_);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->path(), (*b)->path());
  EXPECT_THAT((*b)->path(), HasSubstr("tfevents"));
}

TEST_F(SummaryWriterTest, ConcurrentAddScalarWritesWholeRecords) {
  std::string path;
  {
    auto w = SummaryWriter::Create(root_);
    ASSERT_TRUE(w.ok());
    path = (*w)->path();
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 250; ++i) {
          EXPECT_TRUE((*w)->AddScalar(absl::StrCat("t", t), static_cast<float>(i), i).ok());
        }
      });
    }
    for (auto& th : threads) th.join();
  }
  auto bytes = env::ReadFile(path);
  ASSERT_TRUE(bytes.ok());
  std::vector<Scalar> scalars = Scalars(ReadTfRecords(*bytes));
  ASSERT_EQ(scalars.size(), 1000u);
  std::map<std::string, int64_t> next_step;
  for (const Scalar& s : scalars) {
    EXPECT_EQ(s.step, next_step[s.tag]++) << s.tag;  // In order per thread.
    EXPECT_FLOAT_EQ(s.value, static_cast<float>(s.step));
  }
}

TEST_F(SummaryWriterTest, AddAfterCloseFails) {
  auto w = SummaryWriter::Create(root_);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Close().ok());
  EXPECT_EQ((*w)->AddScalar("loss", 1, 1).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace tandem
