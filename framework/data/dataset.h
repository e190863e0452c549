// framework/data/dataset.h
//
// A pull-based input pipeline in the shape of tf.data, over Tensors (not graph ops).
// A Dataset is an immutable description of a sequence of elements; an element is a
// std::vector<Tensor> (for example {image, label}). MakeIterator() starts one pass over
// the data; Iterator::GetNext() returns the next element, std::nullopt at the end of
// input, or an error status (a corrupt record, a bad CSV field, a failing Map).
//
//   TANDEM_ASSIGN_OR_RETURN(DatasetPtr ds, FromIdx(images_path, labels_path));
//   ds = ds->Shuffle(10000, /*seed=*/42)->Batch(32, /*drop_remainder=*/true)
//            ->Repeat(-1)->Prefetch(2);
//   TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Iterator> it, ds->MakeIterator());
//   while (true) {
//     TANDEM_ASSIGN_OR_RETURN(std::optional<Element> batch, it->GetNext());
//     if (!batch) break;
//     ...
//   }
//
// Sources that touch files or validate tensors return StatusOr<DatasetPtr> (see
// readers.h for IDX, CSV and TFRecord). Transformations return a DatasetPtr directly so
// they chain; a transformation with bad arguments (Batch(0), Shard(2, 5), ...) yields a
// dataset whose MakeIterator() returns INVALID_ARGUMENT naming the transformation.
//
// Thread safety: a Dataset is immutable, so it can be shared and MakeIterator() called
// from several threads at once. An Iterator is used by one thread at a time. Prefetch
// runs its upstream iterator on a background thread it owns; destroying the iterator
// stops and joins that thread. Functions passed to Map and Filter must be safe to call
// from a thread other than the caller's when a Prefetch sits downstream of them.
#ifndef TANDEM_FRAMEWORK_DATA_DATASET_H_
#define TANDEM_FRAMEWORK_DATA_DATASET_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "framework/tensor/tensor.h"

namespace tandem::data {

using Element = std::vector<Tensor>;

// In-memory component tensors whose element i is {c.Slice(i) for c in components}
// (FromTensors, FromIdx). Iterators over such a source can hand out row references
// instead of Elements, and Batch then gathers the rows straight into the batch: no
// per-element vectors, shapes or buffer references (see Iterator::YieldsRows).
struct RowSource {
  std::vector<Tensor> components;      // All of rank >= 1 with one dim(0).
  std::vector<TensorShape> row_shape;  // components[c].shape() without dim 0.
  std::vector<size_t> row_bytes;       // Bytes of one row of components[c].

  explicit RowSource(std::vector<Tensor> components);
  int64_t num_rows() const { return components.empty() ? 0 : components[0].dim(0); }
  // Element `row`, sharing the components' buffers.
  Element Get(int64_t row) const;
};

// Row `row` of `source`; the source lives as long as the iterator that returned it.
struct RowRef {
  const RowSource* source;
  int64_t row;
};

// Prefetch buffer size that lets the pipeline pick: 4 elements ahead on a producer
// thread, or no producer thread in a process that can run on one CPU only.
inline constexpr int64_t kAutotune = -1;

// One pass over a dataset. Not thread-safe: use from one thread at a time.
class Iterator {
 public:
  virtual ~Iterator() = default;
  Iterator(const Iterator&) = delete;
  Iterator& operator=(const Iterator&) = delete;

  // The next element; std::nullopt once the input is exhausted (and on every later
  // call). An error does not end iteration by itself, but most iterators cannot resume
  // past one; callers should stop.
  virtual absl::StatusOr<std::optional<Element>> GetNext() = 0;

  // Fast path for pipelines over a RowSource: true when every element of this iterator
  // is a row of one, and GetNextRow may be called in place of GetNext (the two must not
  // be mixed on one iterator). Shuffle, Repeat, Take, Skip and Shard pass it through.
  virtual bool YieldsRows() const { return false; }
  // The next element as a row reference. REQUIRES: YieldsRows().
  virtual absl::StatusOr<std::optional<RowRef>> GetNextRow();

 protected:
  Iterator() = default;
};

class Dataset;
using DatasetPtr = std::shared_ptr<const Dataset>;
using MapFn = std::function<absl::StatusOr<Element>(Element)>;
using PredicateFn = std::function<absl::StatusOr<bool>(const Element&)>;

class Dataset : public std::enable_shared_from_this<Dataset> {
 public:
  virtual ~Dataset() = default;
  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;

  // Starts a new pass over the data.
  virtual absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator() const = 0;
  // A short description for error messages, e.g. "Batch(32)".
  virtual std::string DebugString() const = 0;

  // ---- Transformations. Each returns a new dataset reading from this one.

  // Applies `fn` to every element; an error from `fn` is returned by GetNext.
  DatasetPtr Map(MapFn fn) const;
  // Keeps the elements for which `predicate` returns true.
  DatasetPtr Filter(PredicateFn predicate) const;
  // Randomly shuffles with a buffer of `buffer_size` (>= 1) elements, as tf.data does:
  // fill the buffer, then emit a random buffered element and replace it with the next
  // input. The order is a function of `seed` and, when `reshuffle_each_iteration`, of
  // how many iterators this dataset has made before (so each epoch under Repeat gets a
  // new order, and the sequence of orders is the same on every run).
  DatasetPtr Shuffle(int64_t buffer_size, uint64_t seed,
                     bool reshuffle_each_iteration = true) const;
  // Stacks `batch_size` (>= 1) consecutive elements into one: component i of the batch
  // has shape [n, ...shape of component i]. The last batch may be smaller unless
  // `drop_remainder`. Elements whose component dtypes or shapes differ are
  // INVALID_ARGUMENT.
  DatasetPtr Batch(int64_t batch_size, bool drop_remainder = false) const;
  // Repeats the input `count` times; -1 repeats forever (an empty input still ends).
  DatasetPtr Repeat(int64_t count = -1) const;
  // The first `count` elements; -1 takes all.
  DatasetPtr Take(int64_t count) const;
  // Drops the first `count` elements; -1 drops all.
  DatasetPtr Skip(int64_t count) const;
  // Elements index, index + num_shards, index + 2 * num_shards, ... (tf.data's shard).
  // REQUIRES (else INVALID_ARGUMENT at MakeIterator): num_shards >= 1,
  // 0 <= index < num_shards.
  DatasetPtr Shard(int64_t num_shards, int64_t index) const;
  // Produces up to `buffer_size` elements ahead on a background thread (kAutotune or
  // >= 1). Errors from upstream are returned by GetNext in order. With kAutotune the
  // iterator gets no thread where none could run without taking a CPU from the steps
  // (ScopedStepCpuThreads): the consumer's thread then produces each element when asked.
  DatasetPtr Prefetch(int64_t buffer_size = kAutotune) const;

 protected:
  Dataset() = default;
  DatasetPtr self() const { return shared_from_this(); }
};

// While one lives, the iterators its thread makes know that the steps consuming them
// compute on `cpu_threads` CPU threads (0, the default: not known; a step on a GPU
// holds none). A kAutotune Prefetch made where those threads hold every usable CPU
// (env::UsableCpus) runs no producer thread: such a thread would take a core from the
// step, whose other threads then wait for it at every barrier (fashion_mlp's trainer,
// 2 threads on 2 CPUs: 116k examples/s with the thread, 122k without). Nests; not
// shared between threads.
class ScopedStepCpuThreads {
 public:
  explicit ScopedStepCpuThreads(int cpu_threads);
  ~ScopedStepCpuThreads();
  ScopedStepCpuThreads(const ScopedStepCpuThreads&) = delete;
  ScopedStepCpuThreads& operator=(const ScopedStepCpuThreads&) = delete;
  // The innermost live scope's count on this thread; 0 outside any.
  static int Current();

 private:
  int saved_;
};

// A dataset whose MakeIterator() always returns `status` (which must not be OK).
DatasetPtr ErrorDataset(absl::Status status);

// Slices the outer dimension of each component: element i is {c[i] for c in
// components}, each a view sharing the component's buffer. Components must all have
// rank >= 1 and the same dim(0), else INVALID_ARGUMENT. `name` is the dataset's
// DebugString (sources built on this one, such as FromIdx, pass their own).
absl::StatusOr<DatasetPtr> FromTensors(std::vector<Tensor> components,
                                       std::string name = "FromTensors");

// Stacks tensors of equal dtype and shape into one of shape [n, ...]. `what` names the
// caller for errors ("Batch component 1").
absl::StatusOr<Tensor> StackTensors(const std::vector<Tensor>& tensors, absl::string_view what);

// Iterates `dataset` to the end and returns every element (for tests and small data).
absl::StatusOr<std::vector<Element>> CollectAll(const Dataset& dataset);

}  // namespace tandem::data

#endif  // TANDEM_FRAMEWORK_DATA_DATASET_H_
