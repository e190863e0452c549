#include "framework/tensor/tensor_codec.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace tandem {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "tensor content is little-endian; big-endian hosts need a byte swap here");

void TensorToProto(const Tensor& t, proto::TensorProto* out) {
  out->Clear();
  out->set_dtype(static_cast<proto::DataType>(t.dtype()));
  PartialShapeToProto(PartialShape(t.shape()), out->mutable_shape());
  if (t.dtype() == DType::kResource) {
    const ResourceHandle& h = t.resource_handle();
    auto* p = out->add_resource_handle();
    p->set_device(h.device);
    p->set_container(h.container);
    p->set_name(h.name);
    return;
  }
  if (t.dtype() == DType::kString) {
    for (int64_t i = 0; i < t.NumElements(); ++i) out->add_string_val(t.StringAt(i));
    return;
  }
  out->set_content(t.raw_data(), t.TotalBytes());
}

absl::StatusOr<Tensor> TensorFromProto(const proto::TensorProto& p) {
  if (!IsValidDType(p.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat("TensorProto has unknown dtype ", p.dtype()));
  }
  DType dtype = static_cast<DType>(p.dtype());
  if (p.shape().unknown_rank()) {
    return absl::InvalidArgumentError("TensorProto shape has unknown rank");
  }
  auto shape = TensorShape::Create(p.shape().dim());
  if (!shape.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("TensorProto: ", shape.status().message()));
  }
  if (dtype == DType::kResource) {
    if (p.resource_handle_size() != 1 || shape->num_elements() != 1) {
      return absl::InvalidArgumentError("resource TensorProto must hold exactly one handle");
    }
    const auto& h = p.resource_handle(0);
    return Tensor::Resource({h.device(), h.container(), h.name()});
  }
  if (dtype == DType::kString) {
    if (p.string_val_size() != shape->num_elements() || !p.content().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("string TensorProto of shape ", shape->DebugString(), " needs ",
                       shape->num_elements(), " string_val entries and no content, has ",
                       p.string_val_size(), " and ", p.content().size(), " content bytes"));
    }
    Tensor t(dtype, *shape);
    for (int i = 0; i < p.string_val_size(); ++i) t.data<std::string>()[i] = p.string_val(i);
    return t;
  }
  if (p.string_val_size() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(DTypeName(dtype), " TensorProto holds string_val entries"));
  }
  size_t want = static_cast<size_t>(shape->num_elements()) * DTypeSize(dtype);
  if (p.content().size() != want) {
    return absl::InvalidArgumentError(absl::StrCat("TensorProto of ", DTypeName(dtype),
                                                   shape->DebugString(), " needs ", want,
                                                   " content bytes, has ", p.content().size()));
  }
  if (dtype == DType::kBool) {
    for (unsigned char c : p.content()) {
      if (c > 1) return absl::InvalidArgumentError("bool TensorProto holds a byte other than 0/1");
    }
  }
  Tensor t(dtype, *shape);
  if (want > 0) std::memcpy(t.raw_data(), p.content().data(), want);
  return t;
}

void PartialShapeToProto(const PartialShape& s, proto::TensorShapeProto* out) {
  out->Clear();
  if (!s.known_rank()) {
    out->set_unknown_rank(true);
    return;
  }
  for (int64_t d : s.dims()) out->add_dim(d);
}

absl::StatusOr<PartialShape> PartialShapeFromProto(const proto::TensorShapeProto& p) {
  if (p.unknown_rank()) return PartialShape::UnknownRank();
  if (p.dim_size() > TensorShape::kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat("shape has rank ", p.dim_size()));
  }
  for (int64_t d : p.dim()) {
    if (d < -1) return absl::InvalidArgumentError(absl::StrCat("shape has dimension ", d));
  }
  return PartialShape(absl::MakeConstSpan(p.dim().data(), p.dim_size()));
}

}  // namespace tandem
