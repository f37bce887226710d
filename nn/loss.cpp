// The Keras losses (loss.hpp): batch-mean value and weighted gradient of each, and their names.
#include "mpigan/nn/loss.hpp"

#include "mpigan/core/error.hpp"

#include <algorithm>
#include <cmath>

namespace mpigan::nn {
namespace {
constexpr double kEps = 1e-7;  // Keras backend epsilon()
double sign(double x) {
  return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
}
}  // namespace

const char* to_string(LossKind k) {
  switch (k) {
    case LossKind::bce:
      return "bce";
    case LossKind::mape:
      return "mape";
    case LossKind::mae:
      return "mae";
    case LossKind::mse:
      return "mse";
  }
  return "?";
}

LossKind parse_loss(const std::string& name) {
  if (name == "bce" || name == "binary_crossentropy") return LossKind::bce;
  if (name == "mape" || name == "mean_absolute_percentage_error") return LossKind::mape;
  if (name == "mae" || name == "mean_absolute_error") return LossKind::mae;
  if (name == "mse" || name == "mean_squared_error") return LossKind::mse;
  MPIGAN_FATAL("unknown loss '{}': expected one of bce, mape, mae, mse", name);
}

double loss_value_and_grad(LossKind kind, std::span<const float> pred, std::span<const float> target, float weight,
                           std::span<float> diff) {
  MPIGAN_CHECK(pred.size() == target.size() && !pred.empty(), "loss {}: {} predictions for {} targets", to_string(kind),
               pred.size(), target.size());
  MPIGAN_CHECK(diff.empty() || diff.size() == pred.size(), "loss {}: gradient buffer of {} for {} predictions",
               to_string(kind), diff.size(), pred.size());
  const double n = static_cast<double>(pred.size());
  const double w = static_cast<double>(weight);
  double total = 0.0;
  for (std::size_t i = 0; i < pred.size(); ++i) {
    const double p = pred[i], y = target[i];
    double l = 0.0, g = 0.0;
    switch (kind) {
      case LossKind::bce: {
        const double pc = std::clamp(p, kEps, 1.0 - kEps);
        l = -(y * std::log(pc + kEps) + (1.0 - y) * std::log(1.0 - pc + kEps));
        const bool clipped = p < kEps || p > 1.0 - kEps;
        g = clipped ? 0.0 : -(y / (pc + kEps) - (1.0 - y) / (1.0 - pc + kEps));
        break;
      }
      case LossKind::mape: {
        const double c = std::max(std::abs(y), kEps);
        l = 100.0 * std::abs(y - p) / c;
        g = 100.0 * sign(p - y) / c;
        break;
      }
      case LossKind::mae:
        l = std::abs(y - p);
        g = sign(p - y);
        break;
      case LossKind::mse:
        l = (y - p) * (y - p);
        g = 2.0 * (p - y);
        break;
    }
    total += l;
    if (!diff.empty()) diff[i] = static_cast<float>(w * g / n);
  }
  return total / n;
}

}  // namespace mpigan::nn
