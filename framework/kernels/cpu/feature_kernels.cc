// framework/kernels/cpu/feature_kernels.cc
//
// CPU kernels of the feature-column ops (framework/ops/feature_ops.h): hashing,
// vocabulary and identity lookups, bucketizing and crossing into categorical ids (int64
// [batch, n], -1 for no value), and the embedding bag and multi-hot of such ids. Every
// id, index and row number that reaches a kernel is checked; anything out of range is
// INVALID_ARGUMENT naming the node and the value.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "framework/core/fingerprint.h"
#include "framework/core/status.h"
#include "framework/kernels/cpu/cpu_kernels.h"

namespace tandem {
namespace {

// Outputs hold at most this many ids (1 GiB of int64): a cross of long lists could
// otherwise ask for any amount.
constexpr int64_t kMaxIds = int64_t{1} << 27;

// The [batch, n] view of a categorical input given as [batch] or [batch, n].
absl::StatusOr<TensorShape> IdsShape(const OpKernelContext& ctx, int i) {
  const Tensor& t = ctx.input(i);
  if (t.rank() == 1) return TensorShape({t.dim(0), 1});
  if (t.rank() == 2) return t.shape();
  return ctx.Error(absl::StrCat("input ", i, " must be [batch] or [batch, n], has shape ",
                                t.shape().DebugString()));
}

// The decimal text of `v` (TensorFlow hashes integers as their text).
absl::string_view DecimalText(int64_t v, char (&buf)[24]) {
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return absl::string_view(buf, static_cast<size_t>(r.ptr - buf));
}

// Calls fn(i, value) for each element of an int32/int64 tensor, as int64.
template <typename Fn>
void ForEachInt(const Tensor& t, Fn fn) {
  const int64_t n = t.NumElements();
  if (t.dtype() == DType::kInt32) {
    const int32_t* p = t.data<int32_t>();
    for (int64_t i = 0; i < n; ++i) fn(i, int64_t{p[i]});
  } else {
    const int64_t* p = t.data<int64_t>();
    for (int64_t i = 0; i < n; ++i) fn(i, p[i]);
  }
}

// Fingerprint64 of a present value (a string, or an integer's text).
uint64_t HashString(absl::string_view s) { return Fingerprint64(s); }
uint64_t HashInt(int64_t v) {
  char buf[24];
  return Fingerprint64(DecimalText(v, buf));
}

class CategoricalHashKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(int64_t n, GetAttr<int64_t>(node.attrs(), "num_buckets"));
    buckets_ = static_cast<uint64_t>(n);
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_ASSIGN_OR_RETURN(TensorShape shape, IdsShape(ctx, 0));
    const Tensor& in = ctx.input(0);
    int64_t* out = ctx.allocate_output(0, shape)->data<int64_t>();
    if (in.dtype() == DType::kString) {
      const std::string* s = in.data<std::string>();
      for (int64_t i = 0; i < in.NumElements(); ++i) {
        out[i] = s[i].empty() ? -1 : static_cast<int64_t>(HashString(s[i]) % buckets_);
      }
    } else {
      ForEachInt(in, [&](int64_t i, int64_t v) {
        out[i] = v == -1 ? -1 : static_cast<int64_t>(HashInt(v) % buckets_);
      });
    }
    return absl::OkStatus();
  }

 private:
  uint64_t buckets_ = 1;
};

class CategoricalVocabularyKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(vocabulary_,
                            GetAttr<std::vector<std::string>>(node.attrs(), "vocabulary"));
    TANDEM_ASSIGN_OR_RETURN(oov_, GetAttr<int64_t>(node.attrs(), "num_oov_buckets"));
    TANDEM_ASSIGN_OR_RETURN(default_, GetAttr<int64_t>(node.attrs(), "default_value"));
    TANDEM_ASSIGN_OR_RETURN(unknown_is_error_, GetAttr<bool>(node.attrs(), "unknown_is_error"));
    const bool int_input = node.input(0).dtype() != DType::kString;
    for (size_t i = 0; i < vocabulary_.size(); ++i) {
      const int64_t id = static_cast<int64_t>(i);
      if (int_input) {
        int64_t v;
        if (!absl::SimpleAtoi(vocabulary_[i], &v)) {
          return absl::InvalidArgumentError(
              absl::StrCat("node '", node.name(), "': vocabulary entry ", i, " \"",
                           vocabulary_[i], "\" is not an integer, and the input is"));
        }
        ints_.try_emplace(v, id);
      } else {
        strings_.try_emplace(vocabulary_[i], id);
      }
    }
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_ASSIGN_OR_RETURN(TensorShape shape, IdsShape(ctx, 0));
    const Tensor& in = ctx.input(0);
    int64_t* out = ctx.allocate_output(0, shape)->data<int64_t>();
    const int64_t size = static_cast<int64_t>(vocabulary_.size());
    auto unknown = [&](uint64_t hash, const std::string& text) -> absl::StatusOr<int64_t> {
      if (unknown_is_error_) {
        return ctx.Error(absl::StrCat("\"", text, "\" is not in the vocabulary of ", size,
                                      " values (", vocabulary_.empty() ? "" : vocabulary_[0],
                                      vocabulary_.size() > 1 ? ", ..." : "", ")"));
      }
      if (oov_ > 0) return size + static_cast<int64_t>(hash % static_cast<uint64_t>(oov_));
      return default_;
    };
    if (in.dtype() == DType::kString) {
      const std::string* s = in.data<std::string>();
      for (int64_t i = 0; i < in.NumElements(); ++i) {
        if (s[i].empty() && !unknown_is_error_) {
          out[i] = -1;
        } else if (auto it = strings_.find(s[i]); it != strings_.end()) {
          out[i] = it->second;
        } else {
          TANDEM_ASSIGN_OR_RETURN(out[i], unknown(HashString(s[i]), s[i]));
        }
      }
      return absl::OkStatus();
    }
    absl::Status status;
    ForEachInt(in, [&](int64_t i, int64_t v) {
      if (!status.ok()) return;
      if (v == -1 && !unknown_is_error_) {
        out[i] = -1;
      } else if (auto it = ints_.find(v); it != ints_.end()) {
        out[i] = it->second;
      } else {
        absl::StatusOr<int64_t> id = unknown(HashInt(v), absl::StrCat(v));
        if (id.ok()) out[i] = *id;
        status = id.status();
      }
    });
    return status;
  }

 private:
  std::vector<std::string> vocabulary_;
  int64_t oov_ = 0;
  int64_t default_ = -1;
  bool unknown_is_error_ = false;
  absl::flat_hash_map<std::string, int64_t> strings_;
  absl::flat_hash_map<int64_t, int64_t> ints_;
};

class CategoricalIdentityKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(buckets_, GetAttr<int64_t>(node.attrs(), "num_buckets"));
    TANDEM_ASSIGN_OR_RETURN(has_default_, GetAttr<bool>(node.attrs(), "has_default"));
    TANDEM_ASSIGN_OR_RETURN(default_, GetAttr<int64_t>(node.attrs(), "default_value"));
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_ASSIGN_OR_RETURN(TensorShape shape, IdsShape(ctx, 0));
    int64_t* out = ctx.allocate_output(0, shape)->data<int64_t>();
    absl::Status status;
    ForEachInt(ctx.input(0), [&](int64_t i, int64_t v) {
      if (v == -1 || (v >= 0 && v < buckets_)) {
        out[i] = v;
      } else if (has_default_) {
        out[i] = default_;
      } else if (v < 0) {
        out[i] = -1;  // TensorFlow drops negative ids.
      } else if (status.ok()) {
        status = ctx.Error(absl::StrCat("value ", v, " is outside [0, ", buckets_,
                                        ") and the identity column has no default_value"));
      }
    });
    return status;
  }

 private:
  int64_t buckets_ = 1;
  bool has_default_ = false;
  int64_t default_ = -1;
};

class CategoricalBucketizeKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(boundaries_, GetAttr<std::vector<float>>(node.attrs(), "boundaries"));
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    TANDEM_ASSIGN_OR_RETURN(TensorShape shape, IdsShape(ctx, 0));
    const Tensor& in = ctx.input(0);
    int64_t* out = ctx.allocate_output(0, shape)->data<int64_t>();
    const int64_t k = shape.dim(1);
    const int64_t per_column = static_cast<int64_t>(boundaries_.size()) + 1;
    auto bucket = [&](double v) {
      return std::upper_bound(boundaries_.begin(), boundaries_.end(), v,
                              [](double x, float b) { return x < static_cast<double>(b); }) -
             boundaries_.begin();
    };
    if (in.dtype() == DType::kFloat) {
      const float* p = in.data<float>();
      for (int64_t i = 0; i < in.NumElements(); ++i) out[i] = bucket(p[i]) + (i % k) * per_column;
    } else {
      ForEachInt(in, [&](int64_t i, int64_t v) {
        out[i] = bucket(static_cast<double>(v)) + (i % k) * per_column;
      });
    }
    return absl::OkStatus();
  }

 private:
  std::vector<float> boundaries_;
};

class CategoricalCrossKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(int64_t n, GetAttr<int64_t>(node.attrs(), "num_buckets"));
    TANDEM_ASSIGN_OR_RETURN(int64_t key, GetAttr<int64_t>(node.attrs(), "hash_key"));
    buckets_ = static_cast<uint64_t>(n);
    hash_key_ = static_cast<uint64_t>(key);
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    const int inputs = ctx.num_inputs();
    std::vector<TensorShape> shapes;
    for (int i = 0; i < inputs; ++i) {
      TANDEM_ASSIGN_OR_RETURN(TensorShape s, IdsShape(ctx, i));
      if (s.dim(0) != ctx.input(0).dim(0)) {
        return ctx.Error(absl::StrCat("input ", i, " has ", s.dim(0), " rows, input 0 has ",
                                      ctx.input(0).dim(0)));
      }
      shapes.push_back(s);
    }
    const int64_t batch = ctx.input(0).dim(0);
    // Per row and input, the hashes of the present values; crosses per row.
    std::vector<std::vector<std::vector<uint64_t>>> features(batch);
    int64_t width = 0;
    for (int64_t b = 0; b < batch; ++b) {
      features[b].resize(inputs);
      int64_t combinations = 1;
      for (int i = 0; i < inputs; ++i) {
        FeatureHashes(ctx.input(i), b, shapes[i].dim(1), &features[b][i]);
        combinations *= static_cast<int64_t>(features[b][i].size());
        if (combinations > kMaxIds) {
          return ctx.Error(absl::StrCat("row ", b, " crosses into more than ", kMaxIds,
                                        " combinations"));
        }
      }
      width = std::max(width, combinations);
    }
    if (batch > 0 && width > kMaxIds / batch) {
      return ctx.Error(absl::StrCat("the cross of ", batch, " rows needs ", width,
                                    " ids per row, more than ", kMaxIds, " in all"));
    }
    Tensor* out = ctx.allocate_output(0, TensorShape({batch, width}));
    int64_t* o = out->data<int64_t>();
    std::fill(o, o + batch * width, int64_t{-1});
    std::vector<size_t> at(inputs);
    for (int64_t b = 0; b < batch; ++b) {
      const auto& f = features[b];
      if (std::any_of(f.begin(), f.end(), [](const auto& v) { return v.empty(); })) continue;
      std::fill(at.begin(), at.end(), 0);
      int64_t* row = o + b * width;
      for (int64_t c = 0;; ++c) {
        uint64_t h = hash_key_;
        for (int i = 0; i < inputs; ++i) h = FingerprintCat64(h, f[i][at[i]]);
        row[c] = static_cast<int64_t>(h % buckets_);
        // Next combination, the last input fastest.
        int i = inputs - 1;
        while (i >= 0 && ++at[i] == f[i].size()) at[i--] = 0;
        if (i < 0) break;
      }
    }
    return absl::OkStatus();
  }

 private:
  // TensorFlow's SparseCross hashes a string by Fingerprint64 and takes an integer
  // as it is.
  static void FeatureHashes(const Tensor& t, int64_t row, int64_t n, std::vector<uint64_t>* out) {
    out->clear();
    for (int64_t j = row * n; j < (row + 1) * n; ++j) {
      if (t.dtype() == DType::kString) {
        const std::string& s = t.StringAt(j);
        if (!s.empty()) out->push_back(HashString(s));
      } else {
        const int64_t v = t.dtype() == DType::kInt32 ? int64_t{t.data<int32_t>()[j]}
                                                    : t.data<int64_t>()[j];
        if (v != -1) out->push_back(static_cast<uint64_t>(v));
      }
    }
  }

  uint64_t buckets_ = 1;
  uint64_t hash_key_ = 0;
};

// Reads optional weights (input `i`) matching `ids`.
absl::StatusOr<const float*> Weights(const OpKernelContext& ctx, int i, const Tensor& ids) {
  if (ctx.num_inputs() <= i) return nullptr;
  const Tensor& w = ctx.input(i);
  if (w.NumElements() != ids.NumElements() || w.dim(0) != ids.dim(0)) {
    return ctx.Error(absl::StrCat("weights of shape ", w.shape().DebugString(),
                                  " do not match ids of shape ", ids.shape().DebugString()));
  }
  return w.data<float>();
}

class PrepareBagKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(std::string c, GetAttr<std::string>(node.attrs(), "combiner"));
    combiner_ = c == "mean" ? 1 : c == "sqrtn" ? 2 : 0;
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& ids = ctx.input(0);
    TANDEM_ASSIGN_OR_RETURN(TensorShape shape, IdsShape(ctx, 0));
    TANDEM_ASSIGN_OR_RETURN(const float* w, Weights(ctx, 1, ids));
    const int64_t batch = shape.dim(0), n = shape.dim(1);
    if (ids.NumElements() > std::numeric_limits<int32_t>::max()) {
      return ctx.Error(absl::StrCat(ids.NumElements(), " ids are too many for one bag"));
    }
    const int64_t* id = ids.data<int64_t>();
    absl::flat_hash_map<int64_t, int32_t> position;
    std::vector<int64_t> unique;
    std::vector<int32_t> index, segment;
    std::vector<float> scale;
    for (int64_t b = 0; b < batch; ++b) {
      double denominator = 0;
      const size_t first = scale.size();
      for (int64_t j = b * n; j < (b + 1) * n; ++j) {
        const float weight = w == nullptr ? 1.f : w[j];
        // safe_embedding_lookup_sparse: no id, or no positive weight under mean and sqrtn.
        if (id[j] < 0 || (combiner_ != 0 && !(weight > 0))) continue;
        auto [it, inserted] = position.try_emplace(id[j], static_cast<int32_t>(unique.size()));
        if (inserted) unique.push_back(id[j]);
        index.push_back(it->second);
        segment.push_back(static_cast<int32_t>(b));
        scale.push_back(weight);
        denominator += combiner_ == 2 ? static_cast<double>(weight) * weight : weight;
      }
      if (combiner_ == 0) continue;
      if (combiner_ == 2) denominator = std::sqrt(denominator);
      const float inv = denominator == 0 ? 0.f : static_cast<float>(1.0 / denominator);
      for (size_t k = first; k < scale.size(); ++k) scale[k] *= inv;
    }
    const int64_t u = static_cast<int64_t>(unique.size()), m = static_cast<int64_t>(scale.size());
    ctx.set_output(0, Tensor::FromVector<int64_t>(unique, TensorShape({u})));
    ctx.set_output(1, Tensor::FromVector<int32_t>(index, TensorShape({m})));
    ctx.set_output(2, Tensor::FromVector<int32_t>(segment, TensorShape({m})));
    ctx.set_output(3, Tensor::FromVector<float>(scale, TensorShape({m})));
    return absl::OkStatus();
  }

 private:
  int combiner_ = 0;
};

// Checks index, segment and scale of a bag against `u` rows and `batch` rows.
absl::Status CheckBag(const OpKernelContext& ctx, int64_t u, int64_t batch) {
  const Tensor& index = ctx.input(1);
  const Tensor& segment = ctx.input(2);
  const Tensor& scale = ctx.input(3);
  if (index.rank() != 1 || segment.shape() != index.shape() || scale.shape() != index.shape()) {
    return ctx.Error(absl::StrCat("index, segment and scale must be equal vectors, got ",
                                  index.shape().DebugString(), ", ", segment.shape().DebugString(),
                                  ", ", scale.shape().DebugString()));
  }
  const int32_t* idx = index.data<int32_t>();
  const int32_t* seg = segment.data<int32_t>();
  for (int64_t k = 0; k < index.NumElements(); ++k) {
    if (idx[k] < 0 || idx[k] >= u || seg[k] < 0 || seg[k] >= batch) {
      return ctx.Error(absl::StrCat("entry ", k, " names row ", idx[k], " of ", u,
                                    " and batch row ", seg[k], " of ", batch));
    }
  }
  return absl::OkStatus();
}

// out[to[k]] += scale[k] * in[from[k]] for rows of `d` floats.
void ScatterRows(const float* in, const int32_t* from, const int32_t* to, const float* scale,
                 int64_t m, int64_t d, float* out) {
  for (int64_t k = 0; k < m; ++k) {
    const float* src = in + static_cast<int64_t>(from[k]) * d;
    float* dst = out + static_cast<int64_t>(to[k]) * d;
    const float s = scale[k];
    for (int64_t j = 0; j < d; ++j) dst[j] += s * src[j];
  }
}

class BagCombineKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& rows = ctx.input(0);
    if (rows.rank() != 2) {
      return ctx.Error(absl::StrCat("rows must be [u, d], got ", rows.shape().DebugString()));
    }
    const int64_t batch = ctx.input(4).dim(0), d = rows.dim(1);
    TANDEM_RETURN_IF_ERROR(CheckBag(ctx, rows.dim(0), batch));
    Tensor* out = ctx.allocate_output(0, TensorShape({batch, d}));
    std::fill_n(out->data<float>(), batch * d, 0.f);
    ScatterRows(rows.data<float>(), ctx.input(1).data<int32_t>(), ctx.input(2).data<int32_t>(),
                ctx.input(3).data<float>(), ctx.input(1).NumElements(), d, out->data<float>());
    return absl::OkStatus();
  }
};

class BagCombineGradKernel : public OpKernel {
 public:
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& dy = ctx.input(0);
    const Tensor& rows = ctx.input(4);
    if (dy.rank() != 2 || rows.rank() != 2 || dy.dim(1) != rows.dim(1)) {
      return ctx.Error(absl::StrCat("gradient ", dy.shape().DebugString(), " does not fit rows ",
                                    rows.shape().DebugString()));
    }
    const int64_t u = rows.dim(0), d = rows.dim(1);
    TANDEM_RETURN_IF_ERROR(CheckBag(ctx, u, dy.dim(0)));
    Tensor* out = ctx.allocate_output(0, TensorShape({u, d}));
    std::fill_n(out->data<float>(), u * d, 0.f);
    ScatterRows(dy.data<float>(), ctx.input(2).data<int32_t>(), ctx.input(1).data<int32_t>(),
                ctx.input(3).data<float>(), ctx.input(1).NumElements(), d, out->data<float>());
    return absl::OkStatus();
  }
};

class MultiHotKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(depth_, GetAttr<int64_t>(node.attrs(), "depth"));
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& ids = ctx.input(0);
    TANDEM_ASSIGN_OR_RETURN(TensorShape shape, IdsShape(ctx, 0));
    TANDEM_ASSIGN_OR_RETURN(const float* w, Weights(ctx, 1, ids));
    const int64_t batch = shape.dim(0), n = shape.dim(1);
    if (batch > 0 && depth_ > kMaxIds / batch) {
      return ctx.Error(absl::StrCat("a multi-hot of ", batch, " rows of ", depth_,
                                    " buckets is more than ", kMaxIds, " values"));
    }
    Tensor* out = ctx.allocate_output(0, TensorShape({batch, depth_}));
    float* o = out->data<float>();
    std::fill_n(o, batch * depth_, 0.f);
    const int64_t* id = ids.data<int64_t>();
    for (int64_t j = 0; j < batch * n; ++j) {
      if (id[j] < 0) continue;
      if (id[j] >= depth_) {
        return ctx.Error(absl::StrCat("id ", id[j], " is outside [0, ", depth_, ")"));
      }
      o[(j / n) * depth_ + id[j]] += w == nullptr ? 1.f : w[j];
    }
    return absl::OkStatus();
  }

 private:
  int64_t depth_ = 1;
};

class IdsToStringsKernel : public OpKernel {
 public:
  absl::Status Init(const Node& node) override {
    TANDEM_ASSIGN_OR_RETURN(vocabulary_,
                            GetAttr<std::vector<std::string>>(node.attrs(), "vocabulary"));
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& ids = ctx.input(0);
    Tensor* out = ctx.allocate_output(0, ids.shape());
    std::string* o = out->data<std::string>();
    const int64_t size = static_cast<int64_t>(vocabulary_.size());
    absl::Status status;
    ForEachInt(ids, [&](int64_t i, int64_t v) {
      if (v >= 0 && v < size) {
        o[i] = vocabulary_[v];
      } else if (status.ok()) {
        status = ctx.Error(absl::StrCat("id ", v, " is outside the vocabulary of ", size));
      }
    });
    return status;
  }

 private:
  std::vector<std::string> vocabulary_;
};

}  // namespace

void RegisterCpuFeatureKernels(KernelRegistry* r) {
  r->Register<CategoricalHashKernel>("CategoricalHash", kDeviceCpu);
  r->Register<CategoricalVocabularyKernel>("CategoricalVocabulary", kDeviceCpu);
  r->Register<CategoricalIdentityKernel>("CategoricalIdentity", kDeviceCpu);
  r->Register<CategoricalBucketizeKernel>("CategoricalBucketize", kDeviceCpu);
  r->Register<CategoricalCrossKernel>("CategoricalCross", kDeviceCpu);
  r->Register<PrepareBagKernel>("PrepareBag", kDeviceCpu);
  r->Register<BagCombineKernel>("BagCombine", kDeviceCpu);
  r->Register<BagCombineGradKernel>("BagCombineGrad", kDeviceCpu);
  r->Register<MultiHotKernel>("MultiHot", kDeviceCpu);
  r->Register<IdsToStringsKernel>("IdsToStrings", kDeviceCpu);
}

}  // namespace tandem
