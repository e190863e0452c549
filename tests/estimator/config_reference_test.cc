// The config reference in docs/ is the parser's key table: every key the parser
// accepts is in it with its type, default and bounds, and nothing else is.
#include <fstream>
#include <sstream>
#include <string>

#include "estimator/job_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

TEST(ConfigReferenceTest, DocsHoldTheParsersKeys) {
  const std::string path = std::string(TANDEM_SOURCE_DIR) + "/docs/config-reference.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::stringstream docs;
  docs << in.rdbuf();
  EXPECT_EQ(docs.str(), JobConfigReference())
      << path << " differs from the parser's keys; regenerate it with\n"
      << "  build/apps/trainer config_reference > docs/config-reference.md";
}

TEST(ConfigReferenceTest, SaysTypesDefaultsAndBounds) {
  const std::string ref = JobConfigReference();
  EXPECT_THAT(ref, HasSubstr("## [distribute]"));
  EXPECT_THAT(ref, HasSubstr("| `strategy` | string | `\"auto\"` | `\"auto\"`, `\"none\"`, "
                             "`\"parameter_server\"`, `\"collective\"`, "
                             "`\"multi_worker_mirrored\"`, `\"hybrid\"` |"));
  EXPECT_THAT(ref, HasSubstr("| `batch_size` | integer |"));
  EXPECT_THAT(ref, HasSubstr("| `health_port` | integer | `0` | 0 to 65535 |"));
  EXPECT_THAT(ref, HasSubstr("| `sync` | boolean | `false` |  |"));
  EXPECT_THAT(ref, HasSubstr("2 per core (at least 8)"));
}

}  // namespace
}  // namespace tandem
