#include "framework/data/fashion_mnist.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "framework/core/env.h"
#include "framework/core/status.h"
#include "framework/data/idx_reader.h"

namespace tandem::data {
namespace {

// Prefers "<name>.gz", falls back to the uncompressed file.
std::string FindFile(const std::string& dir, const std::string& name) {
  std::string gz = env::JoinPath(dir, name + ".gz");
  return env::FileExists(gz) ? gz : env::JoinPath(dir, name);
}

std::string DefaultDataDir() {
  const char* env_dir = std::getenv("TANDEM_DATA_DIR");
  return env_dir && *env_dir ? env_dir : kDefaultFashionMnistDir;
}

}  // namespace

// Compiled for AVX-512, AVX2 and the baseline, picked once at load time (GCC
// target_clones); this file is built with -O3 so each clone is vectorized.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void BytesToUnitFloat(
    const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i] * (1.0f / 255.0f);
}

absl::StatusOr<LabeledImages> LoadIdxPair(const std::string& images_path,
                                          const std::string& labels_path, PixelFormat pixels) {
  TANDEM_ASSIGN_OR_RETURN(Tensor raw_images, ReadIdxFile(images_path));
  TANDEM_ASSIGN_OR_RETURN(Tensor raw_labels, ReadIdxFile(labels_path));
  if (raw_images.rank() != 3 || raw_labels.rank() != 1 || raw_images.dim(0) != raw_labels.dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        images_path, " has shape ", raw_images.shape().DebugString(), " but ", labels_path,
        " has shape ", raw_labels.shape().DebugString(), "; expected [n,h,w] and [n]"));
  }
  const int64_t n = raw_images.dim(0);
  const TensorShape shape({n, raw_images.dim(1) * raw_images.dim(2)});
  LabeledImages out{Tensor(), Tensor(DType::kInt32, TensorShape({n}))};
  if (pixels == PixelFormat::kBytes) {
    out.images = raw_images.Reshaped(shape);
  } else {
    out.images = Tensor(DType::kFloat, shape);
    BytesToUnitFloat(raw_images.data<uint8_t>(), out.images.data<float>(), shape.num_elements());
  }
  for (int64_t i = 0; i < n; ++i) {
    out.labels.data<int32_t>()[i] = raw_labels.data<uint8_t>()[i];
  }
  return out;
}

absl::StatusOr<LabeledImages> LoadIdxSplit(std::string dir, const std::string& prefix,
                                           PixelFormat pixels) {
  if (dir.empty()) dir = DefaultDataDir();
  return LoadIdxPair(FindFile(dir, prefix + "-images-idx3-ubyte"),
                     FindFile(dir, prefix + "-labels-idx1-ubyte"), pixels);
}

absl::StatusOr<FashionMnist> LoadFashionMnist(std::string dir) {
  if (dir.empty()) dir = DefaultDataDir();  // Once, for both splits.
  FashionMnist ds;
  TANDEM_ASSIGN_OR_RETURN(ds.train, LoadIdxSplit(dir, "train"));
  TANDEM_ASSIGN_OR_RETURN(ds.test, LoadIdxSplit(dir, "t10k"));
  return ds;
}

}  // namespace tandem::data
