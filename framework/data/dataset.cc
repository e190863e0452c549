#include "framework/data/dataset.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/core/env.h"
#include "framework/core/random.h"
#include "framework/core/status.h"

namespace tandem::data {
namespace {

// RESOURCE_EXHAUSTED when a batch of `rows` rows of `row_bytes` bytes would take more
// than half of env::MemoryLimitBytes(), instead of an uncaught std::bad_alloc.
absl::Status CheckBatchFits(size_t rows, size_t row_bytes) {
  const double need = static_cast<double>(rows) * static_cast<double>(row_bytes);
  static const double limit = env::MemoryLimitBytes();  // Not two syscalls per batch.
  if (need <= limit / 2) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "Batch: a batch of ", rows, " rows of ", row_bytes, " bytes needs ",
      static_cast<int64_t>(need / (1 << 20)), " MiB, more than half of the ",
      static_cast<int64_t>(limit / (1 << 20)), " MiB this process may use; lower the batch size"));
}

using NextResult = absl::StatusOr<std::optional<Element>>;
using RowResult = absl::StatusOr<std::optional<RowRef>>;

// ------------------------------------------------------------------------ Error

class ErrorDatasetImpl : public Dataset {
 public:
  explicit ErrorDatasetImpl(absl::Status status) : status_(std::move(status)) {}
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator() const override { return status_; }
  std::string DebugString() const override { return "Error"; }

 private:
  absl::Status status_;
};

// ------------------------------------------------------------------------ FromTensors

class TensorSliceDataset : public Dataset {
 public:
  TensorSliceDataset(std::vector<Tensor> components, std::string name)
      : source_(std::move(components)), name_(std::move(name)) {}
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator() const override {
    return std::unique_ptr<Iterator>(
        new Iter(std::static_pointer_cast<const TensorSliceDataset>(self())));
  }
  std::string DebugString() const override { return name_; }

 private:
  class Iter : public Iterator {
   public:
    explicit Iter(std::shared_ptr<const TensorSliceDataset> ds) : ds_(std::move(ds)) {}
    bool YieldsRows() const override { return true; }
    RowResult GetNextRow() override {
      if (next_ >= ds_->source_.num_rows()) return std::nullopt;
      return RowRef{&ds_->source_, next_++};
    }
    NextResult GetNext() override {
      if (next_ >= ds_->source_.num_rows()) return std::nullopt;
      return ds_->source_.Get(next_++);
    }

   private:
    std::shared_ptr<const TensorSliceDataset> ds_;  // Keeps the RowSource alive.
    int64_t next_ = 0;
  };
  RowSource source_;
  std::string name_;
};

// The next item of `in`: an Element, or a RowRef when the caller works on rows.
template <typename T>
absl::StatusOr<std::optional<T>> Pull(Iterator* in) {
  if constexpr (std::is_same_v<T, RowRef>) {
    return in->GetNextRow();
  } else {
    return in->GetNext();
  }
}

// Base of the transformations that pass rows through (Shuffle, Repeat, Take, ...):
// Derived implements `template <typename T> StatusOr<optional<T>> Next()` once, over
// Elements or RowRefs, and this class serves GetNext and GetNextRow from it.
template <typename Derived>
class RowPassingIterator : public Iterator {
 public:
  bool YieldsRows() const override { return rows_; }
  NextResult GetNext() override {
    if (!rows_) return derived()->template Next<Element>();
    TANDEM_ASSIGN_OR_RETURN(std::optional<RowRef> r, derived()->template Next<RowRef>());
    if (!r) return std::nullopt;
    return r->source->Get(r->row);
  }
  RowResult GetNextRow() override { return derived()->template Next<RowRef>(); }

 protected:
  // `rows`: whether the input yields rows (then this iterator does too).
  explicit RowPassingIterator(bool rows) : rows_(rows) {}

 private:
  Derived* derived() { return static_cast<Derived*>(this); }
  bool rows_;
};

// ------------------------------------------------------------------------ Map / Filter

class MapDataset : public Dataset {
 public:
  MapDataset(DatasetPtr input, MapFn fn) : input_(std::move(input)), fn_(std::move(fn)) {}
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator() const override {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Iterator> in, input_->MakeIterator());
    return std::unique_ptr<Iterator>(new Iter(std::move(in), fn_));
  }
  std::string DebugString() const override { return "Map"; }

 private:
  class Iter : public Iterator {
   public:
    Iter(std::unique_ptr<Iterator> in, MapFn fn) : in_(std::move(in)), fn_(std::move(fn)) {}
    NextResult GetNext() override {
      TANDEM_ASSIGN_OR_RETURN(std::optional<Element> e, in_->GetNext());
      if (!e) return std::nullopt;
      TANDEM_ASSIGN_OR_RETURN(Element out, fn_(std::move(*e)));
      return out;
    }

   private:
    std::unique_ptr<Iterator> in_;
    MapFn fn_;
  };
  DatasetPtr input_;
  MapFn fn_;
};

class FilterDataset : public Dataset {
 public:
  FilterDataset(DatasetPtr input, PredicateFn pred)
      : input_(std::move(input)), pred_(std::move(pred)) {}
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator() const override {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Iterator> in, input_->MakeIterator());
    return std::unique_ptr<Iterator>(new Iter(std::move(in), pred_));
  }
  std::string DebugString() const override { return "Filter"; }

 private:
  class Iter : public Iterator {
   public:
    Iter(std::unique_ptr<Iterator> in, PredicateFn p) : in_(std::move(in)), pred_(std::move(p)) {}
    NextResult GetNext() override {
      while (true) {
        TANDEM_ASSIGN_OR_RETURN(std::optional<Element> e, in_->GetNext());
        if (!e) return std::nullopt;
        TANDEM_ASSIGN_OR_RETURN(bool keep, pred_(*e));
        if (keep) return e;
      }
    }

   private:
    std::unique_ptr<Iterator> in_;
    PredicateFn pred_;
  };
  DatasetPtr input_;
  PredicateFn pred_;
};

// ------------------------------------------------------------------------ Shuffle

class ShuffleDataset : public Dataset {
 public:
  ShuffleDataset(DatasetPtr input, int64_t buffer_size, uint64_t seed, bool reshuffle)
      : input_(std::move(input)), buffer_size_(buffer_size), seed_(seed), reshuffle_(reshuffle) {}
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator() const override {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Iterator> in, input_->MakeIterator());
    uint64_t epoch = reshuffle_ ? epochs_.fetch_add(1) : 0;
    return std::unique_ptr<Iterator>(
        new Iter(std::move(in), buffer_size_, PhiloxRandom(seed_, epoch)));
  }
  std::string DebugString() const override { return absl::StrCat("Shuffle(", buffer_size_, ")"); }

 private:
  class Iter : public RowPassingIterator<Iter> {
   public:
    Iter(std::unique_ptr<Iterator> in, int64_t buffer_size, PhiloxRandom gen)
        : RowPassingIterator(in->YieldsRows()),
          in_(std::move(in)),
          buffer_size_(buffer_size),
          sampler_(gen) {}
    template <typename T>
    absl::StatusOr<std::optional<T>> Next() {
      std::vector<T>& buffer = Buffer<T>();
      while (!input_done_ && static_cast<int64_t>(buffer.size()) < buffer_size_) {
        TANDEM_ASSIGN_OR_RETURN(std::optional<T> e, Pull<T>(in_.get()));
        if (!e) {
          input_done_ = true;
          break;
        }
        buffer.push_back(std::move(*e));
      }
      if (buffer.empty()) return std::nullopt;
      size_t i = sampler_.Uint32() % buffer.size();
      T out = std::move(buffer[i]);
      buffer[i] = std::move(buffer.back());
      buffer.pop_back();
      return out;
    }

   private:
    template <typename T>
    std::vector<T>& Buffer() {
      if constexpr (std::is_same_v<T, RowRef>) {
        return row_buffer_;
      } else {
        return buffer_;
      }
    }
    std::unique_ptr<Iterator> in_;
    int64_t buffer_size_;
    RandomSampler sampler_;
    std::vector<Element> buffer_;     // Used when the input yields Elements,
    std::vector<RowRef> row_buffer_;  // or this one when it yields rows.
    bool input_done_ = false;
  };
  DatasetPtr input_;
  int64_t buffer_size_;
  uint64_t seed_;
  bool reshuffle_;
  mutable std::atomic<uint64_t> epochs_{0};
};

// ------------------------------------------------------------------------ Batch

class BatchDataset : public Dataset {
 public:
  BatchDataset(DatasetPtr input, int64_t batch_size, bool drop_remainder)
      : input_(std::move(input)), batch_size_(batch_size), drop_remainder_(drop_remainder) {}
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator() const override {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Iterator> in, input_->MakeIterator());
    return std::unique_ptr<Iterator>(new Iter(std::move(in), batch_size_, drop_remainder_));
  }
  std::string DebugString() const override { return absl::StrCat("Batch(", batch_size_, ")"); }

 private:
  class Iter : public Iterator {
   public:
    Iter(std::unique_ptr<Iterator> in, int64_t batch_size, bool drop_remainder)
        : in_(std::move(in)), batch_size_(batch_size), drop_remainder_(drop_remainder) {}
    NextResult GetNext() override {
      if (done_) return std::nullopt;
      return in_->YieldsRows() ? GatherRows() : StackElements();
    }

   private:
    bool Complete(size_t n) const {
      return n > 0 && !(drop_remainder_ && static_cast<int64_t>(n) < batch_size_);
    }

    NextResult StackElements() {
      std::vector<Element> rows;
      rows.reserve(static_cast<size_t>(std::min<int64_t>(batch_size_, 4096)));
      while (static_cast<int64_t>(rows.size()) < batch_size_) {
        TANDEM_ASSIGN_OR_RETURN(std::optional<Element> e, in_->GetNext());
        if (!e) {
          done_ = true;
          break;
        }
        if (!rows.empty() && e->size() != rows[0].size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("Batch: element ", rows.size(), " of the batch has ", e->size(),
                           " components but element 0 has ", rows[0].size()));
        }
        rows.push_back(std::move(*e));
      }
      if (!Complete(rows.size())) return std::nullopt;
      size_t row_bytes = 0;
      for (const Tensor& t : rows[0]) row_bytes += t.TotalBytes();
      TANDEM_RETURN_IF_ERROR(CheckBatchFits(rows.size(), row_bytes));
      Element out;
      std::vector<Tensor> column(rows.size());
      for (size_t c = 0; c < rows[0].size(); ++c) {
        for (size_t r = 0; r < rows.size(); ++r) column[r] = std::move(rows[r][c]);
        TANDEM_ASSIGN_OR_RETURN(Tensor stacked,
                                StackTensors(column, absl::StrCat("Batch component ", c)));
        out.push_back(std::move(stacked));
      }
      return out;
    }

    // Rows of a shuffled batch lie at random places in a source of many megabytes: each
    // costs a TLB miss and a DRAM round trip before its copy streams. Asking for the
    // row kGatherAhead places on while copying this one keeps several in flight
    // (fashion_mlp's pipeline of 128 uint8 rows a batch, `estimator_bench --only
    // pipeline`, AMX Xeon VM: 24.1 against 25.2 us a batch).
    static constexpr size_t kGatherAhead = 4;
    static void PrefetchRow(const RowRef& ref, size_t c, size_t bytes) {
      const char* p = ref.source->components[c].raw_data() + ref.row * bytes;
      for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off);
    }

    // Copies each row from its source into the batch: one memcpy per row and component.
    NextResult GatherRows() {
      refs_.clear();
      while (static_cast<int64_t>(refs_.size()) < batch_size_) {
        TANDEM_ASSIGN_OR_RETURN(std::optional<RowRef> r, in_->GetNextRow());
        if (!r) {
          done_ = true;
          break;
        }
        refs_.push_back(*r);
      }
      if (!Complete(refs_.size())) return std::nullopt;
      const RowSource& first = *refs_[0].source;
      for (size_t r = 1; r < refs_.size(); ++r) {
        if (refs_[r].source != &first) TANDEM_RETURN_IF_ERROR(SameRowLayout(first, r));
      }
      size_t row_bytes = 0;
      for (size_t b : first.row_bytes) row_bytes += b;
      TANDEM_RETURN_IF_ERROR(CheckBatchFits(refs_.size(), row_bytes));
      Element out;
      out.reserve(first.components.size());
      for (size_t c = 0; c < first.components.size(); ++c) {
        TensorShape shape = first.row_shape[c];
        shape.InsertDim(0, static_cast<int64_t>(refs_.size()));
        Tensor batch(first.components[c].dtype(), shape);
        if (batch.dtype() == DType::kString) {
          const int64_t per_row = first.row_shape[c].num_elements();
          for (size_t r = 0; r < refs_.size(); ++r) {
            CopyElements(refs_[r].source->components[c], refs_[r].row * per_row, batch,
                         static_cast<int64_t>(r) * per_row, per_row);
          }
          out.push_back(std::move(batch));
          continue;
        }
        const size_t bytes = first.row_bytes[c];
        char* dst = batch.raw_data();
        for (size_t r = 0; bytes > 0 && r < refs_.size(); ++r) {
          if (r + kGatherAhead < refs_.size()) PrefetchRow(refs_[r + kGatherAhead], c, bytes);
          const RowRef& ref = refs_[r];
          std::memcpy(dst, ref.source->components[c].raw_data() + ref.row * bytes, bytes);
          dst += bytes;
        }
        out.push_back(std::move(batch));
      }
      return out;
    }

    absl::Status SameRowLayout(const RowSource& first, size_t r) const {
      const RowSource& other = *refs_[r].source;
      bool same = other.components.size() == first.components.size();
      for (size_t c = 0; same && c < first.components.size(); ++c) {
        same = other.components[c].dtype() == first.components[c].dtype() &&
               other.row_shape[c] == first.row_shape[c];
      }
      if (same) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat("Batch: element ", r,
                                                     " of the batch differs from element 0 in its ",
                                                     "components' number, dtypes or shapes"));
    }

    std::vector<RowRef> refs_;
    std::unique_ptr<Iterator> in_;
    int64_t batch_size_;
    bool drop_remainder_;
    bool done_ = false;
  };
  DatasetPtr input_;
  int64_t batch_size_;
  bool drop_remainder_;
};

// ------------------------------------------------------------------------ Repeat

class RepeatDataset : public Dataset {
 public:
  RepeatDataset(DatasetPtr input, int64_t count) : input_(std::move(input)), count_(count) {}
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator() const override {
    std::unique_ptr<Iterator> in;
    if (count_ != 0) {
      TANDEM_ASSIGN_OR_RETURN(in, input_->MakeIterator());
    }
    return std::unique_ptr<Iterator>(new Iter(input_, std::move(in), count_));
  }
  std::string DebugString() const override { return absl::StrCat("Repeat(", count_, ")"); }

 private:
  class Iter : public RowPassingIterator<Iter> {
   public:
    Iter(DatasetPtr input, std::unique_ptr<Iterator> in, int64_t count)
        : RowPassingIterator(in != nullptr && in->YieldsRows()),
          input_(std::move(input)),
          in_(std::move(in)),
          count_(count) {}
    template <typename T>
    absl::StatusOr<std::optional<T>> Next() {
      while (in_ != nullptr) {
        TANDEM_ASSIGN_OR_RETURN(std::optional<T> e, Pull<T>(in_.get()));
        if (e) {
          produced_in_epoch_ = true;
          return e;
        }
        ++epoch_;
        // An empty epoch would make Repeat(-1) spin forever: end instead.
        if ((count_ >= 0 && epoch_ >= count_) || !produced_in_epoch_) {
          in_.reset();
          break;
        }
        produced_in_epoch_ = false;
        TANDEM_ASSIGN_OR_RETURN(in_, input_->MakeIterator());
        if (in_->YieldsRows() != YieldsRows()) {
          return absl::InternalError(
              absl::StrCat("Repeat: ", input_->DebugString(), " changed whether it yields rows"));
        }
      }
      return std::nullopt;
    }

   private:
    DatasetPtr input_;
    std::unique_ptr<Iterator> in_;  // Null once done.
    int64_t count_;
    int64_t epoch_ = 0;
    bool produced_in_epoch_ = false;
  };
  DatasetPtr input_;
  int64_t count_;
};

// ------------------------------------------------------------------------ Take / Skip / Shard

// Emits the input elements whose index i satisfies i >= skip, (i - skip) % stride == 0
// and fewer than `take` (if >= 0) have been emitted. Take, Skip and Shard are all this.
class SubsequenceDataset : public Dataset {
 public:
  SubsequenceDataset(DatasetPtr input, int64_t skip, int64_t stride, int64_t take, std::string name)
      : input_(std::move(input)),
        skip_(skip),
        stride_(stride),
        take_(take),
        name_(std::move(name)) {}
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator() const override {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Iterator> in, input_->MakeIterator());
    return std::unique_ptr<Iterator>(new Iter(std::move(in), skip_, stride_, take_));
  }
  std::string DebugString() const override { return name_; }

 private:
  class Iter : public RowPassingIterator<Iter> {
   public:
    Iter(std::unique_ptr<Iterator> in, int64_t skip, int64_t stride, int64_t take)
        : RowPassingIterator(in->YieldsRows()),
          in_(std::move(in)),
          skip_(skip),
          stride_(stride),
          take_(take) {}
    template <typename T>
    absl::StatusOr<std::optional<T>> Next() {
      if (done_ || (take_ >= 0 && emitted_ >= take_) || skip_ < 0) return std::nullopt;
      while (true) {
        TANDEM_ASSIGN_OR_RETURN(std::optional<T> e, Pull<T>(in_.get()));
        if (!e) {
          done_ = true;
          return std::nullopt;
        }
        int64_t i = index_++;
        if (i >= skip_ && (i - skip_) % stride_ == 0) {
          ++emitted_;
          return e;
        }
      }
    }

   private:
    std::unique_ptr<Iterator> in_;
    int64_t skip_, stride_, take_;
    int64_t index_ = 0, emitted_ = 0;
    bool done_ = false;
  };
  DatasetPtr input_;
  int64_t skip_, stride_, take_;
  std::string name_;
};

}  // namespace

// ------------------------------------------------------------------------ RowSource

RowSource::RowSource(std::vector<Tensor> c) : components(std::move(c)) {
  for (const Tensor& t : components) {
    TensorShape shape = t.shape();
    shape.RemoveDim(0);
    row_bytes.push_back(static_cast<size_t>(shape.num_elements()) * DTypeSize(t.dtype()));
    row_shape.push_back(std::move(shape));
  }
}

Element RowSource::Get(int64_t row) const {
  Element e;
  e.reserve(components.size());
  for (size_t c = 0; c < components.size(); ++c) {
    e.push_back(components[c].Slice(row, row + 1).Reshaped(row_shape[c]));
  }
  return e;
}

absl::StatusOr<std::optional<RowRef>> Iterator::GetNextRow() {
  return absl::InternalError("GetNextRow called on an iterator that does not yield rows");
}

// ------------------------------------------------------------------------ Dataset methods

DatasetPtr Dataset::Map(MapFn fn) const {
  if (!fn) return ErrorDataset(absl::InvalidArgumentError("Map: null function"));
  return std::make_shared<MapDataset>(self(), std::move(fn));
}

DatasetPtr Dataset::Filter(PredicateFn predicate) const {
  if (!predicate) return ErrorDataset(absl::InvalidArgumentError("Filter: null predicate"));
  return std::make_shared<FilterDataset>(self(), std::move(predicate));
}

DatasetPtr Dataset::Shuffle(int64_t buffer_size, uint64_t seed,
                            bool reshuffle_each_iteration) const {
  if (buffer_size < 1) {
    return ErrorDataset(absl::InvalidArgumentError(
        absl::StrCat("Shuffle: buffer_size must be >= 1, got ", buffer_size)));
  }
  return std::make_shared<ShuffleDataset>(self(), buffer_size, seed, reshuffle_each_iteration);
}

DatasetPtr Dataset::Batch(int64_t batch_size, bool drop_remainder) const {
  if (batch_size < 1) {
    return ErrorDataset(absl::InvalidArgumentError(
        absl::StrCat("Batch: batch_size must be >= 1, got ", batch_size)));
  }
  return std::make_shared<BatchDataset>(self(), batch_size, drop_remainder);
}

DatasetPtr Dataset::Repeat(int64_t count) const {
  if (count < -1) {
    return ErrorDataset(
        absl::InvalidArgumentError(absl::StrCat("Repeat: count must be >= -1, got ", count)));
  }
  return std::make_shared<RepeatDataset>(self(), count);
}

DatasetPtr Dataset::Take(int64_t count) const {
  if (count < -1) {
    return ErrorDataset(
        absl::InvalidArgumentError(absl::StrCat("Take: count must be >= -1, got ", count)));
  }
  return std::make_shared<SubsequenceDataset>(self(), 0, 1, count,
                                              absl::StrCat("Take(", count, ")"));
}

DatasetPtr Dataset::Skip(int64_t count) const {
  if (count < -1) {
    return ErrorDataset(
        absl::InvalidArgumentError(absl::StrCat("Skip: count must be >= -1, got ", count)));
  }
  return std::make_shared<SubsequenceDataset>(self(), count, 1, -1,
                                              absl::StrCat("Skip(", count, ")"));
}

DatasetPtr Dataset::Shard(int64_t num_shards, int64_t index) const {
  if (num_shards < 1 || index < 0 || index >= num_shards) {
    return ErrorDataset(absl::InvalidArgumentError(absl::StrCat(
        "Shard: need num_shards >= 1 and 0 <= index < num_shards, got num_shards=", num_shards,
        " index=", index)));
  }
  return std::make_shared<SubsequenceDataset>(self(), index, num_shards, -1,
                                              absl::StrCat("Shard(", num_shards, ", ", index, ")"));
}

// ------------------------------------------------------------------------ free functions

DatasetPtr ErrorDataset(absl::Status status) {
  if (status.ok()) status = absl::InternalError("ErrorDataset made with an OK status");
  return std::make_shared<ErrorDatasetImpl>(std::move(status));
}

absl::StatusOr<DatasetPtr> FromTensors(std::vector<Tensor> components, std::string name) {
  for (size_t i = 0; i < components.size(); ++i) {
    const Tensor& c = components[i];
    if (!c.IsInitialized() || c.rank() < 1 || DTypeSize(c.dtype()) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": component ", i,
                       " must be an initialized numeric tensor of rank >= 1, "
                       "got ",
                       c.DebugString(0)));
    }
    if (c.dim(0) != components[0].dim(0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": component ", i, " has shape ", c.shape().DebugString(), " but component 0 has ",
          components[0].shape().DebugString(), "; outer dimensions must agree"));
    }
  }
  return DatasetPtr(std::make_shared<TensorSliceDataset>(std::move(components), std::move(name)));
}

absl::StatusOr<Tensor> StackTensors(const std::vector<Tensor>& tensors, absl::string_view what) {
  if (tensors.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": nothing to stack"));
  const Tensor& first = tensors[0];
  if (DTypeSize(first.dtype()) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": cannot stack tensors of dtype ", DTypeName(first.dtype())));
  }
  for (size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].dtype() != first.dtype() || tensors[i].shape() != first.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": element ", i, " is ", DTypeName(tensors[i].dtype()),
          tensors[i].shape().DebugString(), " but element 0 is ", DTypeName(first.dtype()),
          first.shape().DebugString(), "; all elements of a batch need the same shape"));
    }
  }
  TensorShape shape = first.shape();
  shape.InsertDim(0, static_cast<int64_t>(tensors.size()));
  Tensor out(first.dtype(), shape);
  const int64_t row = first.NumElements();
  for (size_t i = 0; i < tensors.size(); ++i) {
    CopyElements(tensors[i], 0, out, static_cast<int64_t>(i) * row, row);
  }
  return out;
}

absl::StatusOr<std::vector<Element>> CollectAll(const Dataset& dataset) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Iterator> it, dataset.MakeIterator());
  std::vector<Element> out;
  while (true) {
    TANDEM_ASSIGN_OR_RETURN(std::optional<Element> e, it->GetNext());
    if (!e) return out;
    out.push_back(std::move(*e));
  }
}

}  // namespace tandem::data
