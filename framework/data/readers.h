// framework/data/readers.h
//
// Dataset sources that read files (see dataset.h for the Dataset API):
//   FromIdx          (Fashion-)MNIST IDX image + label files -> {float32[784], int32[]}
//                    (or {uint8[784], int32[]}, scaled per batch by PixelsToUnitFloat)
//   FromCsv          a CSV file with a header line -> one scalar tensor per column (csv.h)
//   TFRecordDataset  TFRecord files (record_io.h) -> {uint8[n]} per record
//
// Errors carry the file and position: CSV parse errors name file, line and column;
// corrupt TFRecords are DATA_LOSS naming the file and byte offset.
//
// Thread safety: as for every Dataset, the returned datasets are immutable and may be
// shared; each Iterator is used by one thread.
#ifndef TANDEM_FRAMEWORK_DATA_READERS_H_
#define TANDEM_FRAMEWORK_DATA_READERS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/data/dataset.h"
#include "framework/data/fashion_mnist.h"
#include "framework/tensor/dtype.h"

namespace tandem::data {

// Reads an IDX image file ([n, h, w] uint8) and label file ([n] uint8), plain or gzip,
// eagerly (LoadIdxPair). Elements are {float32 [h*w] scaled by 1/255, int32 scalar
// label}: rows of two in-memory tensors (a RowSource, so Batch gathers them directly).
// With PixelFormat::kBytes the images stay uint8 [h*w], a quarter of the bytes to hold
// and to gather; Map(PixelsToUnitFloat()) after Batch then gives the same floats.
absl::StatusOr<DatasetPtr> FromIdx(const std::string& images_path, const std::string& labels_path,
                                   PixelFormat pixels = PixelFormat::kUnitFloat);
// FromIdx on "<dir>/<prefix>-images-idx3-ubyte[.gz]" and "<prefix>-labels-idx1-ubyte[.gz]"
// (the .gz file is preferred when both exist). `prefix` is "train" or "t10k"; `dir`
// empty means $TANDEM_DATA_DIR, else /usr/share/datasets/fashion-mnist.
absl::StatusOr<DatasetPtr> FromIdxSplit(std::string dir, const std::string& prefix,
                                        PixelFormat pixels = PixelFormat::kUnitFloat);
// A Map function that turns component `component` of an element (uint8, e.g. a batch of
// kBytes images) into float32 of the same shape scaled by 1/255 (BytesToUnitFloat) and
// passes the others through. INVALID_ARGUMENT when the element has no such component
// or it is not uint8.
MapFn PixelsToUnitFloat(size_t component = 0);

struct CsvOptions {
  bool header = true;  // The first line names the columns and is skipped.
  char delimiter = ',';
};

// One element per non-empty data line: a scalar tensor per column, of the DType given
// for that column (kFloat, kInt32, kInt64, kUInt8, kBool: "true"/"false"/"1"/"0", or
// kString). Every field is required. The file is read and parsed by FromCsv (csv.h,
// which also has defaults, lists, gzip and more options): a missing file is NOT_FOUND,
// a bad field or a wrong number of fields INVALID_ARGUMENT "<file>:<line>: column <c>
// (<name>)".
absl::StatusOr<DatasetPtr> FromCsv(const std::string& path, std::vector<DType> column_types,
                                   CsvOptions options = {});

// One element {uint8 [length]} per record of each file in order. Missing files are
// reported by FromTFRecords; corruption by GetNext as DATA_LOSS.
absl::StatusOr<DatasetPtr> FromTFRecords(std::vector<std::string> paths);

}  // namespace tandem::data

#endif  // TANDEM_FRAMEWORK_DATA_READERS_H_
