// tests/util/temp_dir.h
//
// TempDir: a fresh directory "/tmp/<prefix>.XXXXXX" (by default the prefix is the
// running test's suite name), removed with everything in it when the object goes away,
// unless the test failed or TANDEM_KEEP_TEST_DIRS is set: then its path is printed and
// it is kept, so its files and task logs can be read.
#ifndef TANDEM_TESTS_UTIL_TEMP_DIR_H_
#define TANDEM_TESTS_UTIL_TEMP_DIR_H_

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "glog/logging.h"
#include "gtest/gtest.h"

namespace tandem::testing {

class TempDir {
 public:
  TempDir() : TempDir(SuiteName()) {}
  explicit TempDir(const std::string& prefix) {
    std::string tmpl = "/tmp/" + prefix + ".XXXXXX";
    CHECK(mkdtemp(tmpl.data()) != nullptr) << "mkdtemp " << tmpl;
    path_ = tmpl;
  }
  ~TempDir() {
    if (::testing::Test::HasFailure() || std::getenv("TANDEM_KEEP_TEST_DIRS") != nullptr) {
      std::printf("test files kept in %s\n", path_.c_str());
      return;
    }
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  static std::string SuiteName() {
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = test != nullptr ? test->test_suite_name() : "tandem_test";
    for (char& c : name) {
      if (c == '/') c = '_';  // parameterized suites: "Prefix/Suite"
    }
    return name;
  }

  std::string path_;
};

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_UTIL_TEMP_DIR_H_
