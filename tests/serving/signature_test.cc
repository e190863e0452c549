// signature.json: round trip, and untrusted text refused with the key named.
#include "serving/signature.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::serving {
namespace {

using ::testing::HasSubstr;

Signature Example() {
  Signature s;
  s.model_name = "fashion_cnn";
  s.global_step = 2000;
  s.checkpoint = "/m/model.ckpt-2000";
  s.inputs["image"] = {"input/image:0", DType::kFloat, PartialShape({-1, 28, 28, 1})};
  s.outputs["classes"] = {"ArgMax:0", DType::kInt64, PartialShape({-1})};
  s.outputs["probabilities"] = {"Softmax:0", DType::kFloat, PartialShape({-1, 10})};
  s.restore_op = "save/restore_all";
  s.restore_feeds["dense/kernel"] = "save/restore_value:0";
  s.metrics["accuracy"] = 0.91;
  return s;
}

TEST(SignatureTest, RoundTrips) {
  absl::StatusOr<Signature> back = ParseSignatureJson(SignatureToJson(Example()), "sig.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, Example());
}

TEST(SignatureTest, RefusesMalformedTextNamingTheKey) {
  const std::string good = SignatureToJson(Example());
  auto error = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    absl::StatusOr<Signature> s = ParseSignatureJson(text, "sig.json");
    EXPECT_FALSE(s.ok()) << to;
    return std::string(s.status().message());
  };
  EXPECT_THAT(error("\"format_version\": 1", "\"format_version\": 2"),
              HasSubstr("'format_version' must be 1"));
  EXPECT_THAT(error("\"tandem-export\"", "\"saved_model\""),
              HasSubstr("'format' is 'saved_model'"));
  EXPECT_THAT(error("\"global_step\": 2000", "\"global_step\": \"2000\""),
              HasSubstr("'global_step' must be an integer"));
  EXPECT_THAT(error("\"int64\"", "\"complex64\""), HasSubstr("unsupported dtype 'complex64'"));
  EXPECT_THAT(error("\"float32\"", "\"resource\""), HasSubstr("unsupported dtype 'resource'"));
  EXPECT_THAT(error("-1,\n        28", "4,\n        28"),
              HasSubstr("the first dimension (the batch) must be -1"));
  EXPECT_THAT(error("\"shape\": [\n        -1\n      ]", "\"shape\": []"),
              HasSubstr("outputs.classes: 'shape' must be a list of 1 to 32 dimensions"));
  EXPECT_THAT(error("\"metrics\": {", "\"metrics\": {\"x\": \"high\", "),
              HasSubstr("metrics.x must be a number"));
  EXPECT_THAT(ParseSignatureJson("[1, 2]", "sig.json").status().message(),
              HasSubstr("sig.json: must be a JSON object"));
  EXPECT_THAT(ParseSignatureJson("{\"format\": ", "sig.json").status().message(),
              HasSubstr("sig.json: not valid JSON"));
  EXPECT_THAT(ParseSignatureJson(std::string(100000, '['), "sig.json").status().message(),
              HasSubstr("not valid JSON"));
}

}  // namespace
}  // namespace tandem::serving
