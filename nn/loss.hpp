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
#include <vector>

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

/// The discrepancy in spread of a response at each energy: the residuals @p r_fake (about a mean
/// curve fitted on the reference) of generated samples at conditions @p x_fake, against the
/// reference's residuals @p r_real at @p x_real (from a fit of @p fitted parameters on those same
/// samples). The samples are grouped into @p bins bins of x whose edges are the reference's
/// quantiles, so that each holds about as many of either kind; in bin b the mean squares
///   m_f = mean_b r_fake^2,   m_r = mean_b r_real^2 * n_real / (n_real - fitted)
/// (the factor undoes the in-sample fit's shrinking of the reference's residuals), and
///   L = sum_b (n_b / N) (ln(m_f / m_r) / 2)^2,
/// the squared log of the ratio of spreads (rms about the curve), weighted by the generated
/// samples' share of each bin. Equal counts on both sides make the small-sample bias of the logs
/// cancel, so that its minimum in expectation is the reference's spread. A bin with fewer than
/// two samples of either kind is left out. When @p grad_r is non-empty it receives dL/dr_fake.
double binned_spread_loss(std::span<const double> x_fake, std::span<const double> r_fake,
                          std::span<const double> x_real, std::span<const double> r_real, int bins, int fitted,
                          std::span<double> grad_r);

/// The unbiased estimate of the squared maximum mean discrepancy between the rows of @p x (n x d)
/// and of @p y (m x d), n, m >= 2, under a sum of rational-quadratic kernels
///   k(a, b) = sum_{alpha in {0.2, 0.5, 1, 2, 5}} (1 + s / (2 alpha))^-alpha,
///   s = sum_k (scale_k (a_k - b_k))^2 / d
/// (the mixture of Binkowski et al., "Demystifying MMD GANs", 2018; heavy tails, so a sample far
/// from the other still feels a gradient):
///   MMD^2 = sum_{i != j} k(x_i, x_j) / (n (n-1)) + sum_{i != j} k(y_i, y_j) / (m (m-1))
///           - 2 sum_{i,j} k(x_i, y_j) / (n m).
/// It is 0 in expectation when x and y are drawn from the same distribution and, the kernel being
/// characteristic, positive otherwise. When @p grad_x is non-empty it receives dMMD^2/dx (n x d);
/// y is a constant. A training loss on a batch: pairwise, in double, with its gradient. The
/// validation's KPD (physics::mmd2_unbiased_polynomial) is the same estimator with JetNet's
/// polynomial kernel on samples of thousands, value only, through Eigen's GEMM.
double mmd2_rq(std::span<const double> x, std::span<const double> y, std::size_t d, std::span<const double> scale,
               std::span<double> grad_x);

/// Features in units of their spread at the sample's energy, so that one kernel compares showers of
/// all energies with the precision each energy has. Column 0 of a row (d values) is the
/// conditioning variable x (log10 E), kept as it is; for every other column k the constructor fits,
/// on a reference sample (n x d, the real batch), the mean mu_k(x) as a quadratic in x by least
/// squares and the variance v_k(x) as a line in x through the squared residuals, and apply() maps
///   f_k -> (f_k - mu_k(x)) / sigma_k(x),   sigma_k(x) = sqrt(max(v_k(x), floor^2)).
/// For a sample drawn like the reference, each standardised column has mean 0 and spread 1 at every
/// x, where a scale taken over the whole batch (the spread of all energies together) would weigh a
/// feature's error at high energy, where showers fluctuate least, the least.
class EnergyStandardiser {
 public:
  EnergyStandardiser(std::span<const double> reference, std::size_t d, double floor);
  /// @p out (same size as @p in, rows of d values) receives the standardised rows.
  void apply(std::span<const double> in, std::span<double> out) const;
  /// mu_k(x) and sigma_k(x) of column k >= 1; d f'_k / d f_k = 1 / sigma_k(x).
  double mean(std::size_t k, double x) const;
  double sigma(std::size_t k, double x) const;

 private:
  std::size_t m_row;  // values per row: x and the features
  double m_x0 = 0.0, m_floor;
  std::vector<double> m_mean, m_var;  // per column: 3 and 2 coefficients in (x - x0)
};

}  // namespace mpigan::nn
