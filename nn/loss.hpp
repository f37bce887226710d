// Losses exactly as Keras (TF 2 backend) defines them, on (N, 1) predictions. Each returns the
// batch mean and, optionally, weight * dL/dpred (the gradient of the weighted mean).
//
//   bce   -mean( y log(p' + e) + (1 - y) log(1 - p' + e) ),  p' = clip(p, e, 1 - e), e = 1e-7
//         (gradient 0 where p is clipped; clip passes the gradient at its bounds, like TF)
//   mape  100 * mean( |y - p| / max(|y|, e) )
//   mae   mean |y - p|
//   mse   mean (y - p)^2
// |.| has derivative sign(.), with sign(0) = 0 (TF's Abs gradient).
#pragma once

#include <span>
#include <string>

namespace mpigan::nn {

enum class LossKind { bce, mape, mae, mse };
const char* to_string(LossKind k);
/// Parses "bce" / "binary_crossentropy", "mape", "mae", "mse"; throws Error listing the names.
LossKind parse_loss(const std::string& name);

/// The loss of @p pred against @p target (same length N). When @p diff is non-empty, writes
/// weight * dL/dpred into it.
double loss_value_and_grad(LossKind kind, std::span<const float> pred, std::span<const float> target, float weight,
                           std::span<float> diff);

}  // namespace mpigan::nn
