#include "framework/data/dataset.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/core/random.h"
#include "framework/core/status.h"

namespace tandem::data {
namespace {

using NextResult = absl::StatusOr<std::optional<Element>>;

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
  explicit TensorSliceDataset(std::vector<Tensor> components)
      : components_(std::move(components)) {}
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator() const override;
  std::string DebugString() const override { return "FromTensors"; }

 private:
  class Iter : public Iterator {
   public:
    explicit Iter(const std::vector<Tensor>& c) : components_(c) {}
    NextResult GetNext() override {
      if (components_.empty() || next_ >= components_[0].dim(0)) return std::nullopt;
      Element e;
      e.reserve(components_.size());
      for (const Tensor& c : components_) {
        Tensor row = c.Slice(next_, next_ + 1);
        TensorShape shape = c.shape();
        shape.RemoveDim(0);
        e.push_back(row.Reshaped(shape));
      }
      ++next_;
      return e;
    }

   private:
    std::vector<Tensor> components_;  // Shares the dataset's buffers.
    int64_t next_ = 0;
  };
  std::vector<Tensor> components_;
};

absl::StatusOr<std::unique_ptr<Iterator>> TensorSliceDataset::MakeIterator() const {
  return std::make_unique<Iter>(components_);
}

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
  class Iter : public Iterator {
   public:
    Iter(std::unique_ptr<Iterator> in, int64_t buffer_size, PhiloxRandom gen)
        : in_(std::move(in)), buffer_size_(buffer_size), sampler_(gen) {}
    NextResult GetNext() override {
      while (!input_done_ && static_cast<int64_t>(buffer_.size()) < buffer_size_) {
        TANDEM_ASSIGN_OR_RETURN(std::optional<Element> e, in_->GetNext());
        if (!e) {
          input_done_ = true;
          break;
        }
        buffer_.push_back(std::move(*e));
      }
      if (buffer_.empty()) return std::nullopt;
      size_t i = sampler_.Uint32() % buffer_.size();
      Element out = std::move(buffer_[i]);
      buffer_[i] = std::move(buffer_.back());
      buffer_.pop_back();
      return out;
    }

   private:
    std::unique_ptr<Iterator> in_;
    int64_t buffer_size_;
    RandomSampler sampler_;
    std::vector<Element> buffer_;
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
      if (rows.empty() || (drop_remainder_ && static_cast<int64_t>(rows.size()) < batch_size_)) {
        return std::nullopt;
      }
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

   private:
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
  class Iter : public Iterator {
   public:
    Iter(DatasetPtr input, std::unique_ptr<Iterator> in, int64_t count)
        : input_(std::move(input)), in_(std::move(in)), count_(count) {}
    NextResult GetNext() override {
      while (in_ != nullptr) {
        TANDEM_ASSIGN_OR_RETURN(std::optional<Element> e, in_->GetNext());
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
  class Iter : public Iterator {
   public:
    Iter(std::unique_ptr<Iterator> in, int64_t skip, int64_t stride, int64_t take)
        : in_(std::move(in)), skip_(skip), stride_(stride), take_(take) {}
    NextResult GetNext() override {
      if (done_ || (take_ >= 0 && emitted_ >= take_) || skip_ < 0) return std::nullopt;
      while (true) {
        TANDEM_ASSIGN_OR_RETURN(std::optional<Element> e, in_->GetNext());
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

absl::StatusOr<DatasetPtr> FromTensors(std::vector<Tensor> components) {
  for (size_t i = 0; i < components.size(); ++i) {
    const Tensor& c = components[i];
    if (!c.IsInitialized() || c.rank() < 1 || DTypeSize(c.dtype()) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("FromTensors: component ", i,
                       " must be an initialized numeric tensor of rank >= 1, "
                       "got ",
                       c.DebugString(0)));
    }
    if (c.dim(0) != components[0].dim(0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("FromTensors: component ", i, " has shape ", c.shape().DebugString(),
                       " but component 0 has ", components[0].shape().DebugString(),
                       "; outer dimensions must agree"));
    }
  }
  return DatasetPtr(std::make_shared<TensorSliceDataset>(std::move(components)));
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
  const size_t row = first.TotalBytes();
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (row > 0) std::memcpy(out.raw_data() + i * row, tensors[i].raw_data(), row);
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
