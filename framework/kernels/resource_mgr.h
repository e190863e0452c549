// framework/kernels/resource_mgr.h
//
// ResourceMgr holds a device's stateful resources (variables, accumulators) by
// (container, name). Resources outlive steps and sessions: on a parameter server they
// are shared by every client that names the same container and name. Var is the
// resource behind a resource variable: a mutex-guarded tensor that reads snapshot
// (sharing the buffer) and in-place updates copy first when a reader still holds it.
//
// Thread safety: ResourceMgr methods are thread-safe; a Var's value is guarded by
// its mutex.
//
// (Kept in kernels/ rather than runtime/ because kernels, which sit below runtime in
// the layer DAG, must look resources up.)
#ifndef TANDEM_FRAMEWORK_KERNELS_RESOURCE_MGR_H_
#define TANDEM_FRAMEWORK_KERNELS_RESOURCE_MGR_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "framework/tensor/tensor.h"

namespace tandem {

class ResourceBase {
 public:
  virtual ~ResourceBase() = default;
  virtual std::string DebugString() const = 0;
};

class Var : public ResourceBase {
 public:
  explicit Var(DType dtype) : dtype_(dtype) {}
  DType dtype() const { return dtype_; }
  absl::Mutex* mu() ABSL_LOCK_RETURNED(mu_) { return &mu_; }
  bool is_initialized() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return initialized_; }
  // The current value; callers copy the Tensor (sharing its buffer) as a snapshot.
  const Tensor& value() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return value_; }
  void Assign(Tensor t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    value_ = std::move(t);
    initialized_ = true;
    bf16_current_ = false;
  }
  // Returns the value for an in-place update, copying it first if any snapshot still
  // shares its buffer (copy-on-write). The bfloat16 copy below no longer holds it.
  Tensor* MutableValue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!value_.BufferIsUnique()) value_ = value_.DeepCopy();
    bf16_current_ = false;
    return &value_;
  }

  // A bfloat16 copy of a float32 value, kept for a reader that wants the variable in
  // bfloat16 every step (_ReadVariableAsBfloat16, a mixed-precision model's weights):
  // once one has asked, the optimizers' update loops write the copy beside the new
  // value, so the step needs no separate cast. Every other write leaves it stale.
  void RequestBf16Copy() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { bf16_wanted_ = true; }
  bool Bf16CopyWanted() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return bf16_wanted_; }
  // The copy, if it holds the current value; else null.
  const Tensor* CurrentBf16Copy() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return bf16_current_ ? &bf16_ : nullptr;
  }
  // The copy's buffer for the value being written, of the value's shape and shared with
  // no snapshot (a reader's earlier copy stays as it was); call MarkBf16CopyCurrent once
  // it holds the new value.
  Tensor* MutableBf16Copy() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (bf16_.shape() != value_.shape() || !bf16_.BufferIsUnique()) {
      bf16_ = Tensor(DType::kBFloat16, value_.shape());
    }
    bf16_current_ = false;
    return &bf16_;
  }
  void MarkBf16CopyCurrent() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { bf16_current_ = true; }

  std::string DebugString() const override { return absl::StrCat("Var<", DTypeName(dtype_), ">"); }

 private:
  const DType dtype_;
  mutable absl::Mutex mu_;
  Tensor value_ ABSL_GUARDED_BY(mu_);
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
  Tensor bf16_ ABSL_GUARDED_BY(mu_);
  bool bf16_wanted_ ABSL_GUARDED_BY(mu_) = false;
  bool bf16_current_ ABSL_GUARDED_BY(mu_) = false;
};

class ResourceMgr {
 public:
  // NOT_FOUND naming the resource when absent; INVALID_ARGUMENT if it has another type.
  template <typename T>
  absl::StatusOr<std::shared_ptr<T>> Lookup(const std::string& container,
                                            const std::string& name) const {
    absl::MutexLock lock(&mu_);
    auto it = resources_.find({container, name});
    if (it == resources_.end()) {
      return absl::NotFoundError(absl::StrCat("resource ", container.empty() ? "" : container + "/",
                                              name, " does not exist"));
    }
    auto typed = std::dynamic_pointer_cast<T>(it->second);
    if (!typed) {
      return absl::InvalidArgumentError(
          absl::StrCat("resource ", name, " is a ", it->second->DebugString()));
    }
    return typed;
  }
  // Returns the existing resource or stores the one `create` makes.
  template <typename T>
  absl::StatusOr<std::shared_ptr<T>> LookupOrCreate(
      const std::string& container, const std::string& name,
      const std::function<std::shared_ptr<T>()>& create) {
    absl::MutexLock lock(&mu_);
    auto& slot = resources_[{container, name}];
    if (!slot) slot = create();
    auto typed = std::dynamic_pointer_cast<T>(slot);
    if (!typed) {
      return absl::InvalidArgumentError(
          absl::StrCat("resource ", name, " is a ", slot->DebugString()));
    }
    return typed;
  }
  absl::Status Delete(const std::string& container, const std::string& name);
  // Drops every resource of `container`.
  void Cleanup(const std::string& container);
  std::vector<std::pair<std::string, std::string>> List() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<ResourceBase>> resources_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_FRAMEWORK_KERNELS_RESOURCE_MGR_H_
