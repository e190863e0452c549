// framework/kernels/cpu/onednn_util.cc
//
// The engine, per-thread streams and the primitive cache of onednn_util.h.
#include "framework/kernels/cpu/onednn_util.h"

#include <algorithm>
#include <cstdlib>
#include <new>

#include "framework/kernels/cpu/bf16_convert.h"

namespace tandem::onednn {

const dnnl::engine& CpuEngine() {
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& ThreadStream() {
  thread_local dnnl::stream stream(CpuEngine());
  return stream;
}

dnnl::memory::data_type DataType(DType dtype) {
  return dtype == DType::kBFloat16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
}

bool HasBf16Kernels() {
  static const bool has = [] {
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    for (dnnl::cpu_isa ok : {dnnl::cpu_isa::avx512_core, dnnl::cpu_isa::avx512_core_vnni,
                             dnnl::cpu_isa::avx512_core_bf16, dnnl::cpu_isa::avx512_core_amx}) {
      if (isa == ok) return true;
    }
    return false;
  }();
  return has;
}

bool HasNativeBf16() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

std::string EffectiveIsaName() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic:
    case dnnl::cpu_isa::avx512_mic_4ops:
      return "avx512_mic";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "unknown";
  }
}

Tensor ToFloat(const Tensor& t) {
  Tensor f(DType::kFloat, t.shape());
  nn::WidenBf16(t.data<bfloat16>(), f.data<float>(), t.NumElements());
  return f;
}

void StoreAs(const Tensor& f, Tensor* out) {
  if (out->dtype() == DType::kFloat) {
    std::copy_n(f.data<float>(), f.NumElements(), out->data<float>());
    return;
  }
  nn::NarrowToBf16(f.data<float>(), out->data<bfloat16>(), f.NumElements());
}

dnnl::memory::desc StridedDesc(const dnnl::memory::dims& dims, const dnnl::memory::dims& strides,
                               dnnl::memory::data_type dt) {
  return dnnl::memory::desc(dims, dt, strides);
}

dnnl::memory::desc TagDesc(const dnnl::memory::dims& dims, dnnl::memory::format_tag tag,
                           dnnl::memory::data_type dt) {
  return dnnl::memory::desc(dims, dt, tag);
}

dnnl::memory Wrap(const dnnl::memory::desc& md, const Tensor& t) {
  return dnnl::memory(md, CpuEngine(), static_cast<void*>(t.raw_data()));
}

dnnl::memory WrapPtr(const dnnl::memory::desc& md, void* ptr) {
  return dnnl::memory(md, CpuEngine(), ptr);
}

PrimitiveCache* PrimitiveCache::Global() {
  static PrimitiveCache* cache = new PrimitiveCache;
  return cache;
}

const dnnl::primitive_attr& Attr() {
  static const dnnl::primitive_attr* attr = [] {
    auto* a = new dnnl::primitive_attr;
    a->set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return a;
  }();
  return *attr;
}

dnnl::primitive_attr AttrWithRelu(bool relu) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  return attr;
}

namespace {

// This thread's scratchpad, grown to the largest any primitive has asked for.
void* ThreadScratchpad(size_t bytes) {
  struct Buffer {
    void* data = nullptr;
    size_t size = 0;
    ~Buffer() { std::free(data); }
  };
  thread_local Buffer buffer;
  if (bytes > buffer.size) {
    std::free(buffer.data);
    constexpr size_t kAlign = 64;
    buffer.size = (bytes + kAlign - 1) / kAlign * kAlign;
    buffer.data = std::aligned_alloc(kAlign, buffer.size);
    if (buffer.data == nullptr) {
      buffer.size = 0;
      throw std::bad_alloc();
    }
  }
  return buffer.data;
}

}  // namespace

std::optional<dnnl::reorder> ReorderIfNeeded(const dnnl::memory::desc& from,
                                             const dnnl::memory::desc& to) {
  if (from == to) return std::nullopt;
  return dnnl::reorder(dnnl::reorder::primitive_desc(CpuEngine(), from, CpuEngine(), to, Attr()));
}

Tensor ScratchFor(const dnnl::memory::desc& md) {
  return Tensor(DType::kUInt8, TensorShape({static_cast<int64_t>(md.get_size())}));
}

const void* InLayout(const std::optional<dnnl::reorder>& reorder, const dnnl::memory::desc& from,
                     const void* data, const dnnl::memory::desc& to, Tensor* scratch) {
  if (!reorder) return data;
  *scratch = ScratchFor(to);
  ExecuteCached(*reorder, {{DNNL_ARG_FROM, from, data}, {DNNL_ARG_TO, to, scratch->raw_data()}});
  return scratch->raw_data();
}

void ExecuteCached(const dnnl::primitive& prim, std::initializer_list<Arg> args) {
  struct Memories {
    std::unordered_map<int, dnnl::memory> args;
    size_t scratchpad_bytes = 0;
  };
  thread_local absl::flat_hash_map<const void*, Memories> cache;
  Memories& mems = cache[&prim];
  if (mems.args.empty()) {
    for (const Arg& a : args) {
      mems.args.emplace(a.id, dnnl::memory(a.md, CpuEngine(), DNNL_MEMORY_NONE));
    }
    const dnnl_memory_desc_t* sd =
        dnnl_primitive_desc_query_md(prim.get_primitive_desc(), dnnl_query_scratchpad_md, 0);
    mems.scratchpad_bytes = sd == nullptr ? 0 : dnnl_memory_desc_get_size(sd);
    if (mems.scratchpad_bytes > 0) {
      mems.args.emplace(DNNL_ARG_SCRATCHPAD,
                        dnnl::memory(dnnl::memory::desc(*sd), CpuEngine(), DNNL_MEMORY_NONE));
    }
  }
  for (const Arg& a : args) mems.args.at(a.id).set_data_handle(const_cast<void*>(a.data));
  if (mems.scratchpad_bytes > 0) {
    mems.args.at(DNNL_ARG_SCRATCHPAD).set_data_handle(ThreadScratchpad(mems.scratchpad_bytes));
  }
  dnnl::stream& s = ThreadStream();
  prim.execute(s, mems.args);
  s.wait();
}

}  // namespace tandem::onednn
