#include "framework/core/env.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::env {
namespace {

using ::testing::HasSubstr;

TEST(EnvTest, AtomicWriteReplacesWholeFileAndLeavesNoTemp) {
  auto dir = MakeTempDir("env_test");
  ASSERT_TRUE(dir.ok()) << dir.status();
  std::string path = JoinPath(*dir, "f.txt");
  ASSERT_TRUE(WriteFileAtomic(path, "first version").ok());
  ASSERT_TRUE(WriteFileAtomic(path, "second").ok());
  auto got = ReadFile(path);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "second");
  auto names = ListDir(*dir);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, std::vector<std::string>{"f.txt"});
  EXPECT_TRUE(DeleteRecursively(*dir).ok());
  EXPECT_FALSE(FileExists(*dir));
}

TEST(EnvTest, MissingFileIsNotFoundNamingThePath) {
  auto got = ReadFile("/nonexistent/dir/file.bin");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("/nonexistent/dir/file.bin"));
}

TEST(EnvTest, MakeDirsCreatesParents) {
  auto dir = MakeTempDir("env_test");
  ASSERT_TRUE(dir.ok());
  std::string deep = JoinPath(*dir, "a/b/c");
  EXPECT_TRUE(MakeDirs(deep).ok());
  EXPECT_TRUE(IsDirectory(deep));
  EXPECT_TRUE(MakeDirs(deep).ok());  // Idempotent.
  EXPECT_TRUE(DeleteRecursively(*dir).ok());
}

TEST(EnvTest, JoinPath) {
  EXPECT_EQ(JoinPath("a", "b"), "a/b");
  EXPECT_EQ(JoinPath("a/", "b"), "a/b");
  EXPECT_EQ(JoinPath("", "b"), "b");
}

TEST(EnvTest, BasenameAndDirname) {
  EXPECT_EQ(Basename("/tmp/m/model.ckpt-5"), "model.ckpt-5");
  EXPECT_EQ(Basename("model.ckpt-5"), "model.ckpt-5");
  EXPECT_EQ(Basename("dir/"), "");
  EXPECT_EQ(Dirname("/tmp/m/model.ckpt-5"), "/tmp/m");
  EXPECT_EQ(Dirname("/model.ckpt-5"), "/");
  EXPECT_EQ(Dirname("model.ckpt-5"), ".");
}

}  // namespace
}  // namespace tandem::env
