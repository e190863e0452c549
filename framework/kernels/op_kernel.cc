#include "framework/kernels/op_kernel.h"

#include "absl/synchronization/notification.h"
#include "framework/core/status.h"
#include "framework/kernels/kernel_registry.h"
#include "glog/logging.h"

namespace tandem {

Tensor* OpKernelContext::forward_input_or_allocate_output(int input_index, int i,
                                                          const TensorShape& shape) {
  Tensor& in = inputs_[input_index];
  if (in.dtype() == output_dtype(i) && in.NumElements() == shape.num_elements() &&
      in.BufferIsUnique()) {
    outputs_[i] = std::move(in).Reshaped(shape);
    in = Tensor();
    return &outputs_[i];
  }
  return allocate_output(i, shape);
}

absl::Status AsyncOpKernel::Compute(OpKernelContext& ctx) {
  absl::Notification finished;
  absl::Status status;
  ComputeAsync(ctx, [&](const absl::Status& s) {
    status = s;
    finished.Notify();
  });
  finished.WaitForNotification();
  return status;
}

absl::Status OpKernelContext::Annotate(const absl::Status& s) const {
  return AnnotateStatus(s, absl::StrCat("node '", node().name(), "' (", node().op(), ")"));
}

KernelRegistry* KernelRegistry::Global() {
  static KernelRegistry* r = new KernelRegistry;
  return r;
}

void KernelRegistry::Register(const std::string& op, const DeviceType& device, DType dtype,
                              KernelFactory factory, std::string type_attr) {
  absl::MutexLock lock(&mu_);
  bool inserted = kernels_
                      .emplace(std::make_tuple(op, device.name, dtype),
                               Entry{std::move(factory), std::move(type_attr)})
                      .second;
  CHECK(inserted) << "kernel " << op << " on " << device.name << " for " << DTypeName(dtype)
                  << " registered twice";
}

const KernelRegistry::Entry* KernelRegistry::Find(const Node& node, const DeviceType& device,
                                                  DType* dtype) const {
  auto any = kernels_.find({node.op(), device.name, DType::kInvalid});
  // Find the type attr name from any registration of this op on this device.
  auto lo = kernels_.lower_bound({node.op(), device.name, DType::kInvalid});
  std::string type_attr = "T";
  if (lo != kernels_.end() && std::get<0>(lo->first) == node.op() &&
      std::get<1>(lo->first) == device.name) {
    type_attr = lo->second.type_attr;
  }
  *dtype = GetAttrOr<DType>(node.attrs(), type_attr, DType::kInvalid);
  // Without the attr, dispatch on the first non-resource input (else output 0).
  for (int i = 0; *dtype == DType::kInvalid && i < node.num_inputs(); ++i) {
    if (node.input(i).dtype() != DType::kResource) *dtype = node.input(i).dtype();
  }
  if (*dtype == DType::kInvalid && node.num_outputs() > 0) *dtype = node.output_dtype(0);
  auto it = kernels_.find({node.op(), device.name, *dtype});
  if (it != kernels_.end()) return &it->second;
  return any != kernels_.end() ? &any->second : nullptr;
}

std::vector<std::string> KernelRegistry::OpsOn(const DeviceType& device) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> ops;
  for (const auto& [key, entry] : kernels_) {
    if (std::get<1>(key) == device.name && (ops.empty() || ops.back() != std::get<0>(key))) {
      ops.push_back(std::get<0>(key));
    }
  }
  return ops;
}

bool KernelRegistry::Supports(const Node& node, const DeviceType& device) const {
  absl::MutexLock lock(&mu_);
  DType dtype;
  return Find(node, device, &dtype) != nullptr;
}

absl::StatusOr<std::unique_ptr<OpKernel>> KernelRegistry::Create(const Node& node,
                                                                 const DeviceType& device) const {
  const Entry* entry = nullptr;
  DType dtype = DType::kInvalid;
  {
    absl::MutexLock lock(&mu_);
    entry = Find(node, device, &dtype);
  }
  if (entry == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no ", device.name, " kernel for op ", node.op(),
                     dtype == DType::kInvalid ? "" : absl::StrCat(" with dtype ", DTypeName(dtype)),
                     " (node '", node.name(), "')"));
  }
  std::unique_ptr<OpKernel> kernel = entry->factory();
  kernel->node_ = &node;
  absl::Status s = kernel->Init(node);
  if (!s.ok()) {
    return AnnotateStatus(s, absl::StrCat("node '", node.name(), "' (", node.op(), ")"));
  }
  return kernel;
}

bool KernelRegistry::HasKernel(const std::string& op, const DeviceType& device) const {
  absl::MutexLock lock(&mu_);
  auto lo = kernels_.lower_bound({op, device.name, DType::kInvalid});
  return lo != kernels_.end() && std::get<0>(lo->first) == op &&
         std::get<1>(lo->first) == device.name;
}

}  // namespace tandem
