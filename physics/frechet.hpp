// Frechet physics distance (FPD; Kansal et al., arXiv:2211.10295, JetNet's evaluation.fpd): the
// Frechet distance between Gaussian fits of the reference's and the generated sample's
// high-level features (features.hpp), extrapolated to infinite sample size.
//
// Frechet distance of N(mu1, C1) and N(mu2, C2):
//   FD = |mu1 - mu2|^2 + tr C1 + tr C2 - 2 tr (C1 C2)^(1/2).
// C1 C2 is not symmetric; its eigenvalues are those of the symmetric PSD matrix
// M = C1^(1/2) C2 C1^(1/2), so tr (C1 C2)^(1/2) = sum_i sqrt(lambda_i(M)). Any factor C1 = B B^T
// gives the same eigenvalues through B^T C2 B; B comes from Eigen's pivoted LDL^T,
// B = P^T L D^(1/2) (D clamped at 0, so semi-definite C1 is fine), and the eigenvalues of the
// symmetric form B^T C2 B from Eigen's SelfAdjointEigenSolver (values only, clamped at 0). Real
// arithmetic throughout: no complex sqrtm and no imaginary part to discard as scipy's sqrtm needs,
// and about a third of the cost of forming C1^(1/2) from eigenvectors.
//
// Extrapolation: FD of finite samples is biased upwards by about (tr C1 + tr C2)/N. FD is computed
// on `batches` random subsamples of each sample at `points` sizes N evenly spaced in 1/N between
// min_samples and max_samples, averaged per size, and FD(N) = FPD_inf + k/N is fitted with
// FPD_inf, k >= 0 (stats.hpp); FPD is the intercept and its error the fit's standard error, as in
// JetNet. Unlike JetNet the subsamples are drawn WITHOUT replacement: then E[FD(N)] =
// FD_true + (tr C1 + tr C2)/N to first order even when N approaches the sample size, so the
// intercept is unbiased, while resampling with replacement converges to the FD between the two
// finite samples, which is biased by (tr C1 + tr C2)/n.
#pragma once

#include "mpigan/physics/features.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace mpigan::physics {

/// FD of two Gaussians in d = mu1.size() dimensions; covariances are d*d (symmetric).
/// @f$ \mathrm{FD} = \lVert\mu_1-\mu_2\rVert^2 + \mathrm{tr}\,C_1 + \mathrm{tr}\,C_2 - 2\,\mathrm{tr}\sqrt{C_1^{1/2}
/// C_2 C_1^{1/2}} @f$
double frechet_distance(std::span<const double> mu1, std::span<const double> cov1, std::span<const double> mu2,
                        std::span<const double> cov2);

/// FD of the Gaussian fits (mean, covariance with n - 1) of two feature matrices, no extrapolation.
double frechet_distance(const FeatureMatrix& a, const FeatureMatrix& b);

struct FpdOptions {
  int points = 10;               ///< subsample sizes (JetNet: 10)
  int batches = 20;              ///< subsamples per size (JetNet: 20)
  std::int64_t max_samples = 0;  ///< largest N; 0 = min(n_ref, n_gen)
  std::int64_t min_samples = 0;  ///< smallest N; 0 = max_samples / 3
  FeatureScaling scaling = FeatureScaling::standardise;
  std::uint64_t seed = 42;
  int threads = 0;  ///< OpenMP threads; 0 = default
};

struct FpdPoint {
  std::int64_t n = 0;
  double mean = 0;  ///< mean FD over the batches of this size
};

struct Fpd {
  double value = 0;  ///< FPD_inf, the intercept
  double error = 0;  ///< its standard error
  double slope = 0;  ///< k of FD(N) = FPD_inf + k / N
  std::vector<FpdPoint> points;
};

/// FPD of the (unscaled) feature matrices @p ref and @p gen; scaling is fitted on @p ref.
/// Throws Error when a sample has fewer than 10 events or the columns differ.
Fpd fpd(const FeatureMatrix& ref, const FeatureMatrix& gen, const FpdOptions& options = {});

/// FPD under each of @p scalings (options.scaling is ignored) on the same subsamples: each
/// subsample's Gaussian is fitted once on the raw features and scaled for each scaling (a
/// diagonal affine map of mean and covariance), so a second scaling costs only its Frechet
/// distances. fpd_hlf (standardise) and fpd_cc (max_abs) come from one call.
std::vector<Fpd> fpd(const FeatureMatrix& ref, const FeatureMatrix& gen, const FpdOptions& options,
                     std::span<const FeatureScaling> scalings);

}  // namespace mpigan::physics
