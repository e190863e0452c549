// estimator/optimizer_params.cc
#include "estimator/optimizer_params.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "framework/core/status.h"
#include "framework/ops/optimizers.h"

namespace tandem {

absl::StatusOr<std::unique_ptr<ops::Optimizer>> OptimizerFromParams(
    const ModelSection& params, absl::string_view prefix, absl::string_view default_name,
    double default_learning_rate) {
  auto key = [&](absl::string_view k) { return absl::StrCat(prefix, k); };
  // A number in range, or a config error naming its key.
  auto number = [&](absl::string_view k, double def, double lo, double hi,
                    bool lo_open) -> absl::StatusOr<float> {
    TANDEM_ASSIGN_OR_RETURN(double v, params.GetDouble(key(k), def));
    if (!std::isfinite(v) || v < lo || (lo_open && v == lo) || v > hi) {
      return ConfigError(absl::StrCat("[model.params] ", key(k), " must be in ",
                                      lo_open ? "(" : "[", lo, ", ", hi, "], got ", v));
    }
    return static_cast<float>(v);
  };
  TANDEM_ASSIGN_OR_RETURN(std::string name, params.GetString(key("optimizer"), default_name));
  TANDEM_ASSIGN_OR_RETURN(float lr, number("learning_rate", default_learning_rate, 0, 1e6, true));
  if (name == "sgd") return std::make_unique<ops::GradientDescentOptimizer>(lr);
  if (name == "momentum") {
    TANDEM_ASSIGN_OR_RETURN(float m, number("momentum", 0.9, 0, 1, false));
    return std::make_unique<ops::MomentumOptimizer>(lr, m);
  }
  if (name == "adagrad") {
    TANDEM_ASSIGN_OR_RETURN(float init, number("initial_accumulator_value", 0.1, 0, 1e6, true));
    return std::make_unique<ops::AdagradOptimizer>(lr, init);
  }
  if (name == "adam") return std::make_unique<ops::AdamOptimizer>(lr);
  if (name == "lazy_adam") return std::make_unique<ops::LazyAdamOptimizer>(lr);
  if (name == "rmsprop") return std::make_unique<ops::RMSPropOptimizer>(lr);
  if (name == "ftrl") {
    TANDEM_ASSIGN_OR_RETURN(float power, number("learning_rate_power", -0.5, -1e6, 0, false));
    TANDEM_ASSIGN_OR_RETURN(float init, number("initial_accumulator_value", 0.1, 0, 1e6, true));
    TANDEM_ASSIGN_OR_RETURN(float l1, number("l1_regularization_strength", 0, 0, 1e6, false));
    TANDEM_ASSIGN_OR_RETURN(float l2, number("l2_regularization_strength", 0, 0, 1e6, false));
    return std::make_unique<ops::FtrlOptimizer>(lr, power, init, l1, l2);
  }
  return ConfigError(absl::StrCat("[model.params] ", key("optimizer"), ": unknown '", name,
                                  "' (sgd, momentum, adagrad, adam, lazy_adam, rmsprop, ftrl)"));
}

}  // namespace tandem
