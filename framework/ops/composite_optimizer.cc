// framework/ops/composite_optimizer.cc
#include "framework/ops/composite_optimizer.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::ops {

CompositeOptimizer::CompositeOptimizer(
    std::vector<std::pair<std::string, std::unique_ptr<Optimizer>>> parts)
    : Optimizer("Composite", "Apply"), parts_(std::move(parts)) {}

std::vector<std::string> CompositeOptimizer::GetSlotNames() const {
  std::vector<std::string> names;
  for (const auto& [prefix, part] : parts_) {
    for (const std::string& n : part->GetSlotNames()) names.push_back(n);
  }
  return names;
}

Optimizer* CompositeOptimizer::PartOf(const Variable& var) const {
  for (const auto& [prefix, part] : parts_) {
    if (absl::StartsWith(var.name(), prefix)) return part.get();
  }
  return nullptr;
}

absl::Status CompositeOptimizer::CreateSlots(const std::vector<Variable>& vars) {
  std::vector<std::vector<Variable>> per_part(parts_.size());
  for (const Variable& v : vars) {
    size_t i = 0;
    while (i < parts_.size() && !absl::StartsWith(v.name(), parts_[i].first)) ++i;
    if (i == parts_.size()) {
      std::vector<std::string> prefixes;
      for (const auto& [prefix, part] : parts_) prefixes.push_back("'" + prefix + "'");
      return absl::InvalidArgumentError(
          absl::StrCat("CompositeOptimizer: variable ", v.name(), " matches none of the prefixes ",
                       absl::StrJoin(prefixes, ", ")));
    }
    per_part[i].push_back(v);
  }
  for (size_t i = 0; i < parts_.size(); ++i) {
    Optimizer* part = parts_[i].second.get();
    part->graph_ = graph();
    if (!per_part[i].empty()) {
      absl::Status s = part->CreateSlots(per_part[i]);
      if (!s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

void CompositeOptimizer::Prepare(const Scope& scope, absl::string_view prefix) {
  for (const auto& [p, part] : parts_) part->Prepare(scope, absl::StrCat(prefix, "/", part->name()));
}

Node* CompositeOptimizer::ApplyDense(const Scope& scope, Output grad, const Variable& var) {
  return PartOf(var)->ApplyDense(scope, grad, var);
}

Node* CompositeOptimizer::ApplySparse(const Scope& scope, const IndexedSlices& grad,
                                      const Variable& var) {
  return PartOf(var)->ApplySparse(scope, grad, var);
}

std::vector<Node*> CompositeOptimizer::Finish(const Scope& scope, absl::string_view prefix) {
  std::vector<Node*> nodes;
  for (const auto& [p, part] : parts_) {
    for (Node* n : part->Finish(scope, absl::StrCat(prefix, "/", part->name()))) nodes.push_back(n);
  }
  return nodes;
}

}  // namespace tandem::ops
