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

/// The response loss of the ECAL-sum head that pins a generator's mean response without pulling
/// each shower to it: the N predictions are grouped by @p key into @p bins equal bins of [lo, hi]
/// (keys outside go to the first or last), and
///   L = 100 * sum_b (n_b / N) |mean_{i in b}(pred_i / target_i) - 1|,
/// so the spread of pred/target within a bin costs nothing. Writes weight * dL/dpred into @p diff
/// when it is non-empty: 100 sign(m_b - 1) / (N target_i).
double binned_mean_ratio_loss(std::span<const float> pred, std::span<const float> target, std::span<const float> key,
                              int bins, float lo, float hi, float weight, std::span<float> diff);

}  // namespace mpigan::nn
