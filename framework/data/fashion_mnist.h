// framework/data/fashion_mnist.h
//
// Loads Fashion-MNIST (or MNIST) from the four IDX files in a directory, as Debian's
// dataset-fashion-mnist package installs them (/usr/share/datasets/fashion-mnist):
// images become float32 [n, 784] scaled to [0, 1] (or stay the file's uint8 bytes, a
// quarter of the memory, with PixelFormat::kBytes), labels int32 [n]. Sizes must agree
// between images and labels.
#ifndef TANDEM_FRAMEWORK_DATA_FASHION_MNIST_H_
#define TANDEM_FRAMEWORK_DATA_FASHION_MNIST_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "framework/tensor/tensor.h"

namespace tandem::data {

inline constexpr char kDefaultFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// How the images are held: float32 in [0, 1], or the file's uint8 bytes. A training
// pipeline that gathers shuffled rows reads a quarter of the memory from bytes and
// scales each batch (readers.h: PixelsToUnitFloat); both give the same floats.
enum class PixelFormat { kUnitFloat, kBytes };

// dst[i] = src[i] / 255 as float32 (src[i] * (1.0f / 255.0f)): the one scaling of
// every image path, so a batch scaled from bytes equals the batch gathered from floats.
void BytesToUnitFloat(const uint8_t* src, float* dst, int64_t n);

struct LabeledImages {
  Tensor images;  // float32 [n, 784], or uint8 with PixelFormat::kBytes
  Tensor labels;  // int32 [n]
};

struct FashionMnist {
  LabeledImages train;
  LabeledImages test;
};

// `dir` empty: $TANDEM_DATA_DIR, else kDefaultFashionMnistDir.
absl::StatusOr<FashionMnist> LoadFashionMnist(std::string dir = "");
// One split: prefix "train" or "t10k"; "<prefix>-images-idx3-ubyte.gz" is preferred to
// the uncompressed file when both exist. `dir` empty as for LoadFashionMnist.
absl::StatusOr<LabeledImages> LoadIdxSplit(std::string dir, const std::string& prefix,
                                           PixelFormat pixels = PixelFormat::kUnitFloat);
// An IDX image file ([n, h, w] uint8) and label file ([n] uint8), plain or gzip.
absl::StatusOr<LabeledImages> LoadIdxPair(const std::string& images_path,
                                          const std::string& labels_path,
                                          PixelFormat pixels = PixelFormat::kUnitFloat);

}  // namespace tandem::data

#endif  // TANDEM_FRAMEWORK_DATA_FASHION_MNIST_H_
