// Export and load end to end: a checkpointed model exported with ExportGraph, loaded by
// ExportedModel (newest version of a base, or one version directory) and run, against
// the same math in plain C++; the signature's contents; versions only growing and
// garbage collection; and every file of a version damaged in turn, each refused with
// an error naming it.
#include "serving/exported_model.h"

#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
#include "framework/core/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "serving/export_writer.h"
#include "tests/serving/tiny_export.h"

namespace tandem::serving {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ExportedModelTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = *env::MakeTempDir("exported_model_test"); }
  void TearDown() override { (void)env::DeleteRecursively(dir_); }
  std::string Path(const std::string& name) const { return env::JoinPath(dir_, name); }
  std::string Export(float scale, int64_t step = 7) {
    absl::StatusOr<std::string> v =
        testing::ExportTinyModel(Path(absl::StrCat("model", scale)), Path("export"), scale, step);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.value_or("");
  }
  std::string dir_;
};

Tensor Batch(const std::vector<float>& values) {
  return Tensor::FromVector<float>(values,
                                   TensorShape({static_cast<int64_t>(values.size() / 3), 3}));
}

TEST_F(ExportedModelTest, PredictsWithTheCheckpointsWeights) {
  const std::string version_dir = Export(0.5f, 42);
  absl::StatusOr<std::unique_ptr<ExportedModel>> model = LoadExportedModel(Path("export"));
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->path(), version_dir);
  const Signature& sig = (*model)->signature();
  EXPECT_EQ(sig.model_name, "tiny");
  EXPECT_EQ(sig.global_step, 42);
  EXPECT_EQ(sig.inputs.at("x").dtype, DType::kFloat);
  EXPECT_EQ(sig.inputs.at("x").shape, PartialShape({-1, 3}));
  EXPECT_EQ(sig.outputs.at("classes").dtype, DType::kInt64);
  EXPECT_EQ(sig.outputs.at("probabilities").shape, PartialShape({-1, 2}));
  EXPECT_EQ(sig.restore_feeds.size(), 3u);  // global_step, dense/kernel, dense/bias.

  const std::vector<float> x = {1, 2, 3, -1, 0.5f, 2, 0, 0, 0, 3, -2, -1};
  absl::StatusOr<NamedTensors> out = (*model)->Predict({{"x", Batch(x)}});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& p = out->at("probabilities");
  const Tensor& c = out->at("classes");
  ASSERT_EQ(p.shape(), TensorShape({4, 2}));
  ASSERT_EQ(c.shape(), TensorShape({4}));
  for (int r = 0; r < 4; ++r) {
    std::array<float, 2> logits = testing::TinyLogits(0.5f, &x[r * 3]);
    const float m = std::max(logits[0], logits[1]);
    const float e0 = std::exp(logits[0] - m), e1 = std::exp(logits[1] - m);
    EXPECT_NEAR(p.data<float>()[r * 2], e0 / (e0 + e1), 1e-6) << "row " << r;
    EXPECT_NEAR(p.data<float>()[r * 2 + 1], e1 / (e0 + e1), 1e-6) << "row " << r;
    EXPECT_EQ(c.data<int64_t>()[r], logits[1] > logits[0] ? 1 : 0) << "row " << r;
  }
  absl::StatusOr<NamedTensors> only = (*model)->Predict({{"x", Batch(x)}}, {"classes"});
  ASSERT_TRUE(only.ok()) << only.status();
  EXPECT_EQ(only->size(), 1u);
}

TEST_F(ExportedModelTest, ConcurrentPredictionsAreEachRight) {
  Export(1.0f);
  auto model = LoadExportedModel(Path("export"));
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const float v = static_cast<float>(t * 100 + i) / 50 - 3;
        const std::vector<float> x = {v, -v, 1};
        auto out = (*model)->Predict({{"x", Batch(x)}}, {"classes"});
        std::array<float, 2> logits = testing::TinyLogits(1.0f, x.data());
        if (!out.ok() || out->at("classes").data<int64_t>()[0] != (logits[1] > logits[0])) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(ExportedModelTest, BadInputsAreRefusedByName) {
  Export(1.0f);
  auto model = LoadExportedModel(Path("export"));
  ASSERT_TRUE(model.ok()) << model.status();
  auto err = [&](const NamedTensors& in) {
    absl::StatusOr<NamedTensors> out = (*model)->Predict(in);
    EXPECT_FALSE(out.ok());
    return std::string(out.status().message());
  };
  EXPECT_THAT(err({}), HasSubstr("missing input 'x'"));
  EXPECT_THAT(err({{"y", Batch({1, 2, 3})}}), HasSubstr("unknown input 'y'"));
  EXPECT_THAT(err({{"x", Tensor::FromVector<float>({1, 2}, TensorShape({1, 2}))}}),
              HasSubstr("input 'x' must have shape [?,3]"));
  EXPECT_THAT(err({{"x", Tensor::FromVector<int32_t>({1, 2, 3}, TensorShape({1, 3}))}}),
              HasSubstr("input 'x' must be float32, got int32"));
  EXPECT_THAT((*model)->Predict({{"x", Batch({1, 2, 3})}}, {"logits"}).status().message(),
              HasSubstr("unknown output 'logits'"));
}

TEST_F(ExportedModelTest, VersionsGrowAndOldOnesAreCollected) {
  const std::string first = Export(1.0f);
  const std::string second = Export(2.0f);
  const std::string third = Export(3.0f);
  absl::StatusOr<std::vector<int64_t>> versions = ListVersions(Path("export"));
  ASSERT_TRUE(versions.ok()) << versions.status();
  ASSERT_EQ(versions->size(), 3u);
  EXPECT_LT((*versions)[0], (*versions)[1]);
  EXPECT_LT((*versions)[1], (*versions)[2]);
  ASSERT_TRUE(env::MakeDirs(Path("export/.tmp-99999999999-1")).ok());  // A crashed export.
  ASSERT_TRUE(env::MakeDirs(Path("export/notes")).ok());
  EXPECT_EQ(ListVersions(Path("export"))->size(), 3u);

  auto newest = LoadExportedModel(Path("export"));
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ((*newest)->path(), third);
  EXPECT_EQ((*newest)->version(), (*versions)[2]);
  auto oldest = LoadExportedModel(first);
  ASSERT_TRUE(oldest.ok()) << oldest.status();
  auto c = (*oldest)->Predict({{"x", Batch({1, 0, 0})}});  // Scale 1: logits (-0.4, 0.4).
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->at("classes").data<int64_t>()[0], 1);

  absl::StatusOr<std::vector<int64_t>> deleted = GarbageCollectExports(Path("export"), 1);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_THAT(*deleted, ElementsAre((*versions)[0], (*versions)[1]));
  EXPECT_THAT(*ListVersions(Path("export")), ElementsAre((*versions)[2]));
  EXPECT_FALSE(env::FileExists(second));
}

TEST_F(ExportedModelTest, ConcurrentExportersGetVersionsOfTheirOwn) {
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3; ++i) {
        const std::string model = Path(absl::StrCat("writer", t, "_", i));
        if (!testing::ExportTinyModel(model, Path("export"), 1.0f + t).ok()) ++failed;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failed.load(), 0);
  absl::StatusOr<std::vector<int64_t>> versions = ListVersions(Path("export"));
  ASSERT_TRUE(versions.ok()) << versions.status();
  EXPECT_EQ(versions->size(), 6u);
  for (int64_t v : *versions) {
    EXPECT_TRUE(LoadExportedModel(Path(absl::StrCat("export/", v))).ok()) << v;
  }
}

TEST_F(ExportedModelTest, NoVersionIsNotFound) {
  ASSERT_TRUE(env::MakeDirs(Path("empty")).ok());
  EXPECT_EQ(LoadExportedModel(Path("empty")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadExportedModel(Path("missing")).status().code(), absl::StatusCode::kNotFound);
}

// Each file of a version damaged in turn: Load fails naming the file, never crashes.
TEST_F(ExportedModelTest, DamagedFilesAreRefusedNamingThem) {
  const std::string v = Export(1.0f);
  auto damage = [&](const char* file, const std::function<void(std::string*)>& edit) {
    const std::string path = env::JoinPath(v, file);
    std::string original = *env::ReadFile(path);
    std::string bytes = original;
    edit(&bytes);
    EXPECT_TRUE(env::WriteFileAtomic(path, bytes).ok());
    absl::StatusOr<std::unique_ptr<ExportedModel>> m = LoadExportedModel(v);
    EXPECT_TRUE(env::WriteFileAtomic(path, original).ok());
    EXPECT_FALSE(m.ok()) << file;
    return std::string(m.status().message());
  };
  EXPECT_THAT(damage(kSignatureFile, [](std::string* b) { b->resize(b->size() / 2); }),
              HasSubstr("signature.json: not valid JSON"));
  EXPECT_THAT(damage(kSignatureFile,
                     [](std::string* b) {
                       size_t at = b->find("\"float32\"");
                       b->replace(at, 9, "\"float64\"");
                     }),
              HasSubstr("unsupported dtype 'float64'"));
  EXPECT_THAT(damage(kSignatureFile,
                     [](std::string* b) {
                       size_t at = b->find("input/x:0");
                       b->replace(at, 9, "input/q:0");
                     }),
              HasSubstr("'input/q:0', which the graph does not have"));
  EXPECT_THAT(damage(kGraphFile, [](std::string* b) { *b = "\xff\xff\xff garbage"; }),
              HasSubstr("graph.pb"));
  EXPECT_THAT(damage(kVariablesFile, [](std::string* b) { (*b)[b->size() - 3] ^= 0x20; }),
              HasSubstr("variables.safetensors"));
  EXPECT_THAT(damage(kVariablesFile, [](std::string* b) { b->resize(b->size() - 4); }),
              HasSubstr("variables.safetensors"));
  EXPECT_TRUE(LoadExportedModel(v).ok());  // Restored files load again.
}

}  // namespace
}  // namespace tandem::serving
