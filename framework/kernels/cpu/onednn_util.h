// framework/kernels/cpu/onednn_util.h
//
// Shared oneDNN plumbing for the CPU kernels: one process-wide CPU engine, one stream
// per thread, a primitive cache (each primitive is created once per shape and attrs,
// then reused by every kernel and step), views of tensor buffers as dnnl::memory
// without copying, and conversion of oneDNN exceptions into absl::Status so that no
// exception escapes a kernel.
//
// Thread safety: every function here may be called from any thread. Cached
// primitives are immutable and may run on several threads at once: they are created
// with Attr() (a user-managed scratchpad) and ExecuteCached hands each execution its
// thread's own scratchpad. oneDNN's default, library-managed scratchpad is shared by
// the primitives of the thread that created them, so a primitive run from another
// thread, or from two at once, races on it: two towers of one shape in one process
// produced each other's results.
#ifndef TANDEM_FRAMEWORK_KERNELS_CPU_ONEDNN_UTIL_H_
#define TANDEM_FRAMEWORK_KERNELS_CPU_ONEDNN_UTIL_H_

#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "framework/kernels/op_kernel.h"
#include "framework/tensor/tensor.h"

namespace tandem::onednn {

// The CPU engine (index 0), created on first use.
const dnnl::engine& CpuEngine();
// This thread's stream on CpuEngine(). Execution on it is synchronous (OpenMP runtime).
dnnl::stream& ThreadStream();

// The attributes every cached primitive is created with: a user-managed scratchpad.
const dnnl::primitive_attr& Attr();

// Attr() plus, when `relu`, a ReLU post-op (for the fused Conv2D / MatMul kernels). A
// new object each call: primitive_attr copies share one handle, so Attr() must never
// be modified.
dnnl::primitive_attr AttrWithRelu(bool relu);

// oneDNN's data type for a tensor dtype the kernels compute in (float32 or bfloat16).
dnnl::memory::data_type DataType(DType dtype);

// Whether oneDNN has bfloat16 kernels on this CPU: AVX-512 or better (AVX512-BF16 and
// AMX run bf16 natively; plain AVX-512 emulates it). Below that, the bf16 kernels
// compute in float32 on widened copies (ToFloat / StoreAs), which is correct but slower.
bool HasBf16Kernels();
// Whether this CPU computes bfloat16 dot products in hardware (oneDNN's ISA is
// avx512_core_bf16 or avx512_core_amx). Without it oneDNN emulates bf16 products, and
// a bf16 GEMM runs at a fifth of float32's rate or less.
bool HasNativeBf16();
// The ISA oneDNN dispatches to, e.g. "avx512_core_amx", "avx512_core_bf16", "avx2".
std::string EffectiveIsaName();

// A float32 copy of a bfloat16 tensor (the fallback path of HasBf16Kernels()).
Tensor ToFloat(const Tensor& t);
// Writes the float32 tensor `f` into `out` (same shape), rounding to out's dtype.
void StoreAs(const Tensor& f, Tensor* out);

// Runs compute(x, y, out) directly, or, for bfloat16 operands on a CPU without oneDNN
// bf16 kernels, on float32 copies with the result stored into `out` (rounded when
// out is bfloat16).
template <typename F>
absl::Status RunWidenedIfNeeded(const Tensor& x, const Tensor& y, Tensor* out, const F& compute) {
  if (x.dtype() != DType::kBFloat16 || HasBf16Kernels()) return compute(x, y, out);
  Tensor wide(DType::kFloat, out->shape());
  absl::Status s = compute(ToFloat(x), ToFloat(y), &wide);
  if (s.ok()) StoreAs(wide, out);
  return s;
}

// A dense memory descriptor with explicit strides (f32 unless `dt` says otherwise).
dnnl::memory::desc StridedDesc(const dnnl::memory::dims& dims, const dnnl::memory::dims& strides,
                               dnnl::memory::data_type dt = dnnl::memory::data_type::f32);
// A dense memory descriptor in a plain format tag (nhwc, hwio, nc, ...).
dnnl::memory::desc TagDesc(const dnnl::memory::dims& dims, dnnl::memory::format_tag tag,
                           dnnl::memory::data_type dt = dnnl::memory::data_type::f32);

// A dnnl::memory over `t`'s buffer (no copy). The tensor must outlive the memory and,
// when the primitive writes to it, be owned by the caller.
dnnl::memory Wrap(const dnnl::memory::desc& md, const Tensor& t);
dnnl::memory WrapPtr(const dnnl::memory::desc& md, void* ptr);

// A reorder from the layout `from` to `to` (created with Attr()), or none when they
// are the same layout.
std::optional<dnnl::reorder> ReorderIfNeeded(const dnnl::memory::desc& from,
                                             const dnnl::memory::desc& to);
// A scratch tensor big enough for `md`.
Tensor ScratchFor(const dnnl::memory::desc& md);
// `data` (laid out as `from`) in the layout `to`: `data` itself when `reorder` is
// empty, else its copy made by `reorder` into `*scratch`.
const void* InLayout(const std::optional<dnnl::reorder>& reorder, const dnnl::memory::desc& from,
                     const void* data, const dnnl::memory::desc& to, Tensor* scratch);

// A process-wide map from a key (the primitive kind, shapes and attrs) to an immutable
// object holding primitives. Entries are never evicted: a training job has a small,
// fixed set of shapes.
class PrimitiveCache {
 public:
  static PrimitiveCache* Global();

  // Returns the entry for `key`, calling `create` (which may throw dnnl::error) to make
  // it the first time. Errors from `create` are returned, not cached.
  template <typename T, typename F>
  absl::StatusOr<std::shared_ptr<const T>> GetOrCreate(const std::string& key, const F& create) {
    {
      absl::ReaderMutexLock lock(&mu_);
      auto it = entries_.find(key);
      if (it != entries_.end()) return std::static_pointer_cast<const T>(it->second);
    }
    std::shared_ptr<const T> made;
    try {
      made = std::make_shared<const T>(create());
    } catch (const dnnl::error& e) {
      return absl::InternalError(absl::StrCat("creating oneDNN primitive ", key, ": ", e.what(),
                                              " (status ", static_cast<int>(e.status), ")"));
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("creating oneDNN primitive ", key, ": ", e.what()));
    }
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = entries_.emplace(key, made);
    return std::static_pointer_cast<const T>(it->second);
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const void>> entries_ ABSL_GUARDED_BY(mu_);
};

// PrimitiveCache::Global()->GetOrCreate with errors annotated with ctx's node.
template <typename T, typename F>
absl::StatusOr<std::shared_ptr<const T>> Cached(const OpKernelContext& ctx, const std::string& key,
                                                const F& create) {
  auto entry = PrimitiveCache::Global()->GetOrCreate<T>(key, create);
  if (!entry.ok()) return ctx.Annotate(entry.status());
  return entry;
}

// Runs `fn` (which executes primitives), turning a dnnl::error or other exception into
// INTERNAL naming the kernel's node.
template <typename F>
absl::Status Guard(const OpKernelContext& ctx, F&& fn) {
  try {
    return fn();
  } catch (const dnnl::error& e) {
    return ctx.Annotate(absl::InternalError(
        absl::StrCat("oneDNN error: ", e.what(), " (status ", static_cast<int>(e.status), ")")));
  } catch (const std::exception& e) {
    return ctx.Annotate(absl::InternalError(absl::StrCat("oneDNN kernel failed: ", e.what())));
  }
}

// One argument of ExecuteCached: the DNNL_ARG_* id, its layout and the buffer.
struct Arg {
  int id;
  const dnnl::memory::desc& md;
  const void* data;  // Written through when the primitive writes this argument.
};
// Executes `prim` (created with Attr()) on this thread's stream with this thread's
// scratchpad, and waits. Reuses this thread's dnnl::memory objects for `prim` (only
// their data handles change), which saves creating memory objects on every call (about
// 2us for three). REQUIRES: `prim` outlives the thread's use of it (cached primitives
// live for the process) and is always called with the same ids and descriptors.
void ExecuteCached(const dnnl::primitive& prim, std::initializer_list<Arg> args);

}  // namespace tandem::onednn

#endif  // TANDEM_FRAMEWORK_KERNELS_CPU_ONEDNN_UTIL_H_
