// The REST API's JSON codec: request bodies -> tensors (both of TensorFlow Serving's
// formats, single and multi-input signatures, every kind of malformed body), and
// tensors -> predict, status, metadata and error responses.
#include "serving/rest_json.h"

#include <cmath>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "serving/rest_response.h"

namespace tandem::serving {
namespace {

using json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Signature SingleInput() {
  Signature s;
  s.model_name = "single";
  s.inputs["x"] = {"input/x:0", DType::kFloat, PartialShape({-1, 3})};
  s.outputs["y"] = {"y:0", DType::kFloat, PartialShape({-1, 2})};
  return s;
}

Signature MultiInput() {
  Signature s;
  s.model_name = "multi";
  s.inputs["image"] = {"image:0", DType::kFloat, PartialShape({-1, 2, 2})};
  s.inputs["mask"] = {"mask:0", DType::kBool, PartialShape({-1, 2})};
  s.inputs["id"] = {"id:0", DType::kInt64, PartialShape({-1})};
  s.outputs["y"] = {"y:0", DType::kFloat, PartialShape({-1})};
  return s;
}

Signature IntInputs() {
  Signature s;
  s.inputs["i32"] = {"a:0", DType::kInt32, PartialShape({-1})};
  s.inputs["u8"] = {"b:0", DType::kUInt8, PartialShape({-1})};
  return s;
}

absl::StatusOr<PredictRequest> Parse(const std::string& body, const Signature& s,
                                     RestLimits limits = {}) {
  return ParsePredictRequest(body, s, limits);
}

std::vector<float> Floats(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.NumElements());
}

// The error message of a request that must fail with INVALID_ARGUMENT.
std::string ErrorOf(const std::string& body, const Signature& s, RestLimits limits = {}) {
  absl::StatusOr<PredictRequest> r = Parse(body, s, limits);
  EXPECT_FALSE(r.ok()) << body;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  return std::string(r.status().message());
}

TEST(RestJsonTest, RowFormatSingleInputBareValues) {
  auto r = Parse(R"({"instances": [[1, 2.5, -3], [4e-1, 5, 6]]})", SingleInput());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->format, RequestFormat::kRow);
  EXPECT_EQ(r->batch_size, 2);
  const Tensor& x = r->inputs.at("x");
  EXPECT_EQ(x.shape(), TensorShape({2, 3}));
  EXPECT_THAT(Floats(x), ElementsAre(1, 2.5, -3, 0.4f, 5, 6));
}

TEST(RestJsonTest, RowFormatSingleInputNamedAndSignatureName) {
  auto r = Parse(R"({"signature_name": "serving_default", "instances": [{"x": [1, 2, 3]}]})",
                 SingleInput());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->inputs.at("x").shape(), TensorShape({1, 3}));
  EXPECT_THAT(Floats(r->inputs.at("x")), ElementsAre(1, 2, 3));
}

TEST(RestJsonTest, ColumnarSingleInputBareAndNamed) {
  for (const char* body :
       {R"({"inputs": [[1, 2, 3], [4, 5, 6]]})", R"({"inputs": {"x": [[1, 2, 3], [4, 5, 6]]}})"}) {
    auto r = Parse(body, SingleInput());
    ASSERT_TRUE(r.ok()) << body << ": " << r.status();
    EXPECT_EQ(r->format, RequestFormat::kColumnar);
    EXPECT_EQ(r->batch_size, 2);
    EXPECT_THAT(Floats(r->inputs.at("x")), ElementsAre(1, 2, 3, 4, 5, 6));
  }
}

TEST(RestJsonTest, RowFormatMultiInput) {
  auto r = Parse(R"({"instances": [
      {"image": [[1, 2], [3, 4]], "mask": [true, false], "id": 9007199254740993},
      {"image": [[5, 6], [7, 8]], "mask": [false, true], "id": -4}]})",
                 MultiInput());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->batch_size, 2);
  EXPECT_EQ(r->inputs.at("image").shape(), TensorShape({2, 2, 2}));
  EXPECT_THAT(Floats(r->inputs.at("image")), ElementsAre(1, 2, 3, 4, 5, 6, 7, 8));
  const Tensor& mask = r->inputs.at("mask");
  EXPECT_EQ(mask.shape(), TensorShape({2, 2}));
  EXPECT_THAT(std::vector<bool>(mask.data<bool>(), mask.data<bool>() + 4),
              ElementsAre(true, false, false, true));
  const Tensor& id = r->inputs.at("id");
  EXPECT_EQ(id.shape(), TensorShape({2}));
  EXPECT_EQ(id.data<int64_t>()[0], 9007199254740993);  // Beyond a double's exact range.
  EXPECT_EQ(id.data<int64_t>()[1], -4);
}

TEST(RestJsonTest, ColumnarMultiInput) {
  auto r = Parse(R"({"inputs": {"image": [[[1, 2], [3, 4]]], "mask": [[true, true]],
                                "id": [3]}})",
                 MultiInput());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->batch_size, 1);
  EXPECT_EQ(r->inputs.at("image").shape(), TensorShape({1, 2, 2}));
  EXPECT_EQ(r->inputs.at("id").data<int64_t>()[0], 3);
}

TEST(RestJsonTest, IntegerRangesAreChecked) {
  auto ok = Parse(R"({"instances": [{"i32": -2147483648, "u8": 255}, {"i32": 2147483647,
                                                                       "u8": 0}]})",
                  IntInputs());
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->inputs.at("i32").data<int32_t>()[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(ok->inputs.at("u8").data<uint8_t>()[0], 255);
  EXPECT_THAT(ErrorOf(R"({"instances": [{"i32": 2147483648, "u8": 1}]})", IntInputs()),
              HasSubstr("number 2147483648 is out of range for int32"));
  EXPECT_THAT(ErrorOf(R"({"instances": [{"i32": 1, "u8": 256}]})", IntInputs()),
              HasSubstr("out of range for uint8"));
  EXPECT_THAT(ErrorOf(R"({"instances": [{"i32": 1, "u8": -1}]})", IntInputs()),
              HasSubstr("out of range for uint8"));
  EXPECT_THAT(ErrorOf(R"({"instances": [{"i32": 1.5, "u8": 1}]})", IntInputs()),
              HasSubstr("input 'i32', instance 0: expected an integer (int32), got number 1.5"));
  EXPECT_THAT(
      ErrorOf(R"({"instances": [{"i32": 1, "u8": 2}, {"i32": 1, "u8": true}]})", IntInputs()),
      HasSubstr("input 'u8', instance 1: expected an integer (uint8), got boolean true"));
}

TEST(RestJsonTest, WrongShapesAreNamed) {
  EXPECT_THAT(ErrorOf(R"({"instances": [[1, 2, 3], [1, 2]]})", SingleInput()),
              HasSubstr("input 'x', instance 1: expected a list of 3 values, got a list of 2"));
  EXPECT_THAT(ErrorOf(R"({"instances": [[1, 2]]})", SingleInput()),
              HasSubstr("input 'x', instance 0: has shape [2] but the input's shape is [3]"));
  EXPECT_THAT(ErrorOf(R"({"instances": [1, 2]})", SingleInput()),
              HasSubstr("expected a value of shape [3] (lists nested 1 deep), got number 1"));
  EXPECT_THAT(ErrorOf(R"({"instances": [[[1], 2, 3]]})", SingleInput()),
              HasSubstr("element [0]: expected a number (float32), got a list of 1 values (the "
                        "value nests deeper"));
  // Columnar values keep the batch dimension: a single example without it is wrong.
  EXPECT_THAT(ErrorOf(R"({"inputs": [1, 2, 3]})", SingleInput()),
              HasSubstr("input 'x': expected a value of shape [?,3]"));
  EXPECT_THAT(ErrorOf(R"({"inputs": {"image": [[[1, 2], [3, 4]]], "mask": [[true, true]],
                                     "id": [3, 4]}})",
                      MultiInput()),
              HasSubstr("every input needs the same batch size"));
}

TEST(RestJsonTest, WrongDtypesAndStringsAreRefused) {
  EXPECT_THAT(ErrorOf(R"({"instances": [[1, "2", 3]]})", SingleInput()),
              HasSubstr("input 'x', instance 0, element [1]: expected a number (float32), got "
                        "string \"2\""));
  EXPECT_THAT(ErrorOf(R"({"instances": [[1, null, 3]]})", SingleInput()), HasSubstr("got null"));
  EXPECT_THAT(ErrorOf(R"({"instances": [{"image": [[1, 2], [3, 4]], "mask": [1, 0], "id": 1}]})",
                      MultiInput()),
              HasSubstr("input 'mask', instance 0, element [0]: expected true or false (bool)"));
  EXPECT_THAT(ErrorOf(R"({"instances": [[1e39, 0, 0]]})", SingleInput()),
              HasSubstr("out of range for float32"));
}

TEST(RestJsonTest, Base64IsRefused) {
  for (const char* body :
       {R"({"instances": [{"b64": "AAAA"}]})", R"({"instances": [[{"b64": "AAAA"}, 1, 2]]})",
        R"({"inputs": {"b64": "AAAA"}})", R"({"instances": [{"x": {"b64": "AAAA"}}]})"}) {
    EXPECT_THAT(ErrorOf(body, SingleInput()),
                HasSubstr("a base64 value ({\"b64\": ...}) can only be one string of a string "
                          "input"))
        << body;
  }
}

TEST(RestJsonTest, MissingAndExtraInputs) {
  EXPECT_THAT(ErrorOf(R"({"instances": [{"image": [[1, 2], [3, 4]], "id": 1}]})", MultiInput()),
              HasSubstr("instance 0 lacks input 'mask'"));
  EXPECT_THAT(
      ErrorOf(R"({"instances": [{"image": [[1, 2], [3, 4]], "mask": [true, true], "id": 1,
                                 "extra": 1}]})",
              MultiInput()),
      HasSubstr("instance 0 has input 'extra', which the signature does not have (its inputs: "
                "'id', 'image', 'mask')"));
  EXPECT_THAT(ErrorOf(R"({"instances": [{"y": [1, 2, 3]}]})", SingleInput()),
              HasSubstr("has input 'y', which the signature does not have"));
  EXPECT_THAT(ErrorOf(R"({"inputs": {"image": [[[1, 2], [3, 4]]]}})", MultiInput()),
              HasSubstr("'inputs' lacks input 'id'"));
  EXPECT_THAT(ErrorOf(R"({"instances": [[1, 2, 3]]})", MultiInput()),
              HasSubstr("instance 0 must be an object of the inputs ('id', 'image', 'mask')"));
  EXPECT_THAT(ErrorOf(R"({"inputs": [[1, 2, 3]]})", MultiInput()),
              HasSubstr("'inputs' must be an object of the inputs"));
}

TEST(RestJsonTest, MalformedRequests) {
  EXPECT_THAT(ErrorOf(R"({"instances": [[1, 2, 3]])", SingleInput()),
              HasSubstr("JSON Parse error"));
  EXPECT_THAT(ErrorOf("", SingleInput()), HasSubstr("JSON Parse error"));
  EXPECT_THAT(ErrorOf("[1]", SingleInput()), HasSubstr("the request must be a JSON object"));
  EXPECT_THAT(ErrorOf(R"({"instance": []})", SingleInput()),
              HasSubstr("Missing 'inputs' or 'instances' key"));
  EXPECT_THAT(ErrorOf(R"({"instances": [[1, 2, 3]], "inputs": [[1, 2, 3]]})", SingleInput()),
              HasSubstr("expecting only one of 'inputs' or 'instances'"));
  EXPECT_THAT(ErrorOf(R"({"instances": []})", SingleInput()), HasSubstr("'instances' is empty"));
  EXPECT_THAT(ErrorOf(R"({"instances": {"x": [1, 2, 3]}})", SingleInput()),
              HasSubstr("'instances' must be a list"));
  EXPECT_THAT(ErrorOf(R"({"inputs": []})", SingleInput()), HasSubstr("holds no examples"));
  EXPECT_THAT(ErrorOf(R"({"signature_name": "classify", "instances": [[1, 2, 3]]})", SingleInput()),
              HasSubstr("Serving signature name: \"classify\" not found in signature def"));
  EXPECT_THAT(ErrorOf(R"({"signature_name": 3, "instances": [[1, 2, 3]]})", SingleInput()),
              HasSubstr("'signature_name' must be a string"));
}

TEST(RestJsonTest, LimitsOnDepthAndInstances) {
  RestLimits limits;
  limits.max_json_depth = 8;
  limits.max_instances = 4;
  std::string deep = R"({"instances": )" + std::string(20, '[') + std::string(20, ']') + "}";
  EXPECT_THAT(ErrorOf(deep, SingleInput(), limits),
              HasSubstr("JSON nests lists and objects more than 8 levels deep (at byte 21)"));
  // A million levels are refused by the scan, never reaching the parser.
  std::string very_deep(1000000, '[');
  EXPECT_THAT(ErrorOf(very_deep, SingleInput()), HasSubstr("more than 64 levels deep"));
  // Brackets inside strings (and escaped quotes) do not count.
  EXPECT_TRUE(CheckJsonDepth(R"({"a": "[[[[[[[[[[\"[[[[[[[[[[", "b": [1]})", 2).ok());
  EXPECT_THAT(
      ErrorOf(R"({"instances": [[1,2,3],[1,2,3],[1,2,3],[1,2,3],[1,2,3]]})", SingleInput(), limits),
      HasSubstr("'instances' holds 5 examples, more than the limit of 4 per request"));
  EXPECT_THAT(
      ErrorOf(R"({"inputs": [[1,2,3],[1,2,3],[1,2,3],[1,2,3],[1,2,3]]})", SingleInput(), limits),
      HasSubstr("holds 5 examples, more than the limit of 4"));
}

// A first instance of many values followed by tiny ones must not make the parser
// allocate instances x (first instance's size).
TEST(RestJsonTest, RaggedBodyDoesNotAllocateWhatItsFirstInstanceImplies) {
  Signature s;
  s.inputs["v"] = {"v:0", DType::kFloat, PartialShape({-1, -1})};
  std::string body = R"({"instances": [[)";
  for (int i = 0; i < 100000; ++i) body += i == 0 ? "0" : ",0";
  body += "]";
  for (int i = 0; i < 1000; ++i) body += ",[]";
  body += "]}";
  EXPECT_THAT(ErrorOf(body, s), HasSubstr("the values do not all have the shape [100000]"));
}

// A feature-column model's raw inputs: a string per example and lists of strings and
// int64 ids of any length per example, padded with '' and -1.
Signature RawColumns() {
  Signature s;
  s.inputs["workclass"] = {"input/workclass:0", DType::kString, PartialShape({-1})};
  s.inputs["tags"] = {"input/tags:0", DType::kString, PartialShape({-1, -1})};
  s.inputs["ids"] = {"input/ids:0", DType::kInt64, PartialShape({-1, -1})};
  return s;
}

TEST(RestJsonTest, StringsBase64AndListsOfAnyLength) {
  auto r = Parse(R"({"instances": [
      {"workclass": "State-gov", "tags": ["a", "b", "c"], "ids": 7},
      {"workclass": {"b64": "AP9h"}, "tags": [], "ids": [1, 2]}]})",
                 RawColumns());
  ASSERT_TRUE(r.ok()) << r.status();
  const Tensor& w = r->inputs.at("workclass");
  EXPECT_EQ(w.StringAt(0), "State-gov");
  EXPECT_EQ(w.StringAt(1), std::string("\x00\xff" "a", 3));  // Any bytes, base64.
  const Tensor& tags = r->inputs.at("tags");
  ASSERT_EQ(tags.shape(), TensorShape({2, 3}));
  EXPECT_EQ(tags.StringAt(2), "c");
  EXPECT_EQ(tags.StringAt(3), "");  // Padding.
  const Tensor& ids = r->inputs.at("ids");
  ASSERT_EQ(ids.shape(), TensorShape({2, 2}));
  EXPECT_EQ(ids.data<int64_t>()[0], 7);
  EXPECT_EQ(ids.data<int64_t>()[1], -1);
  EXPECT_EQ(ids.data<int64_t>()[3], 2);
  // The columnar form takes the lists as a list per example too.
  auto c = Parse(R"({"inputs": {"workclass": ["a"], "tags": [["x", "y"]], "ids": [[]]}})",
                 RawColumns());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->inputs.at("tags").shape(), TensorShape({1, 2}));
  EXPECT_EQ(c->inputs.at("ids").data<int64_t>()[0], -1);
  EXPECT_THAT(ErrorOf(R"({"instances": [{"workclass": 3, "tags": [], "ids": []}]})", RawColumns()),
              HasSubstr("input 'workclass', instance 0: expected a string (string), got number 3"));
  EXPECT_THAT(ErrorOf(R"({"instances": [{"workclass": {"b64": "!!"}, "tags": [], "ids": []}]})",
                      RawColumns()),
              HasSubstr("a base64 value must be"));
  EXPECT_THAT(ErrorOf(R"({"instances": [{"workclass": "a", "tags": ["x", 1], "ids": []}]})",
                      RawColumns()),
              HasSubstr("input 'tags', instance 0, element [1]: expected a string"));
}

TEST(RestJsonTest, UnknownInnerDimsTakeTheFirstInstancesShape) {
  Signature s;
  s.inputs["v"] = {"v:0", DType::kInt32, PartialShape({-1, -1})};
  auto r = Parse(R"({"instances": [[1, 2], [3, 4]]})", s);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->inputs.at("v").shape(), TensorShape({2, 2}));
  EXPECT_THAT(ErrorOf(R"({"instances": [[1, 2], [3]]})", s),
              HasSubstr("instance 1: expected a list of 2 values, got a list of 1"));
}

Tensor FloatTensor(std::initializer_list<float> v, TensorShape shape) {
  return Tensor::FromVector<float>(std::vector<float>(v), shape);
}

TEST(RestResponseTest, PredictionsInBothFormats) {
  NamedTensors one = {{"y", FloatTensor({0.1f, 1, -2.5f, 3e-8f}, TensorShape({2, 2}))}};
  EXPECT_EQ(*PredictResponseJson(one, RequestFormat::kRow),
            R"({"predictions":[[0.1,1.0],[-2.5,3e-08]]})");
  EXPECT_EQ(*PredictResponseJson(one, RequestFormat::kColumnar),
            R"({"outputs":[[0.1,1.0],[-2.5,3e-08]]})");
  NamedTensors two = one;
  two["classes"] = Tensor::FromVector<int64_t>({int64_t{1} << 60, 0}, TensorShape({2}));
  EXPECT_EQ(*PredictResponseJson(two, RequestFormat::kRow),
            R"({"predictions":[{"classes":1152921504606846976,"y":[0.1,1.0]},)"
            R"({"classes":0,"y":[-2.5,3e-08]}]})");
  EXPECT_EQ(*PredictResponseJson(two, RequestFormat::kColumnar),
            R"({"outputs":{"classes":[1152921504606846976,0],"y":[[0.1,1.0],[-2.5,3e-08]]}})");
}

TEST(RestResponseTest, FloatsRoundTripAndNonFiniteAsTensorFlowServingWritesThem) {
  const float values[] = {0.1f, 1.0f / 3, 123456.79f, 1e-38f, 3.4028235e38f, -0.0f};
  for (float v : values) {
    NamedTensors out = {{"y", FloatTensor({v}, TensorShape({1}))}};
    json j = json::parse(*PredictResponseJson(out, RequestFormat::kRow));
    EXPECT_EQ(static_cast<float>(j["predictions"][0].get<double>()), v);
  }
  NamedTensors odd = {{"y", FloatTensor({NAN, INFINITY, -INFINITY}, TensorShape({3}))}};
  EXPECT_EQ(*PredictResponseJson(odd, RequestFormat::kRow),
            R"({"predictions":[NaN,Infinity,-Infinity]})");
}

TEST(RestResponseTest, BoolUint8AndInt32Outputs) {
  NamedTensors out = {{"b", Tensor::FromVector<bool>({true, false}, TensorShape({2}))},
                      {"u", Tensor::FromVector<uint8_t>({255, 7}, TensorShape({2}))},
                      {"i", Tensor::FromVector<int32_t>({-5, 6}, TensorShape({2}))}};
  EXPECT_EQ(*PredictResponseJson(out, RequestFormat::kRow),
            R"({"predictions":[{"b":true,"i":-5,"u":255},{"b":false,"i":6,"u":7}]})");
}

TEST(RestResponseTest, OutputsDisagreeingOnTheBatchAreAnInternalError) {
  NamedTensors out = {{"a", FloatTensor({1, 2}, TensorShape({2}))},
                      {"b", FloatTensor({1}, TensorShape({1}))}};
  EXPECT_EQ(PredictResponseJson(out, RequestFormat::kRow).status().code(),
            absl::StatusCode::kInternal);
  NamedTensors scalar = {{"a", Tensor::Scalar<float>(1)}};
  EXPECT_FALSE(PredictResponseJson(scalar, RequestFormat::kColumnar).ok());
}

TEST(RestResponseTest, StatusMetadataAndErrorShapes) {
  EXPECT_EQ(json::parse(ModelStatusJson(17)),
            json::parse(R"({"model_version_status": [{"version": "17", "state": "AVAILABLE",
                            "status": {"error_code": "OK", "error_message": ""}}]})"));
  Signature s = MultiInput();
  json meta = json::parse(ModelMetadataJson("m", 5, s));
  EXPECT_EQ(meta["model_spec"],
            json::parse(R"({"name": "m", "signature_name": "", "version": "5"})"));
  const json& def = meta["metadata"]["signature_def"]["signature_def"]["serving_default"];
  EXPECT_EQ(def["method_name"], "tensorflow/serving/predict");
  EXPECT_EQ(def["inputs"]["image"],
            json::parse(R"({"dtype": "DT_FLOAT", "name": "image:0", "tensor_shape": {"dim": [
                {"size": "-1", "name": ""}, {"size": "2", "name": ""}, {"size": "2", "name": ""}],
                "unknown_rank": false}})"));
  EXPECT_EQ(def["inputs"]["mask"]["dtype"], "DT_BOOL");
  EXPECT_EQ(def["inputs"]["id"]["dtype"], "DT_INT64");
  EXPECT_EQ(def["outputs"]["y"]["tensor_shape"]["dim"].size(), 1u);
  EXPECT_EQ(TfDTypeName(DType::kInt32), "DT_INT32");
  EXPECT_EQ(TfDTypeName(DType::kUInt8), "DT_UINT8");
  // Invalid UTF-8 in a message (a client's bytes) is replaced, not a failure.
  json error = json::parse(ErrorJson("bad key '\xff\xfe'"));
  EXPECT_THAT(error["error"].get<std::string>(), HasSubstr("bad key '"));
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kInternal), 500);
}

}  // namespace
}  // namespace tandem::serving
