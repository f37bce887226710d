// Small statistics used by the metrics: means and variances, numpy-compatible quantiles, and the
// least-squares line with non-negative coefficients that extrapolates FPD(N) to N -> infinity.
//
// Conventions: variance() is the unbiased sample variance (n - 1); quantile() interpolates
// linearly between order statistics (numpy's default "linear" method), so median and the 16-84 %
// range match numpy and scipy.stats.iqr, which JetNet's KPD error uses.
#pragma once

#include "mpigan/core/rng.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace mpigan::physics {

/// Arithmetic mean; 0 for an empty span.
double mean(std::span<const double> v);
/// Unbiased sample variance @f$ \sum (v_i - \bar v)^2 / (n-1) @f$; 0 when n < 2.
double variance(std::span<const double> v);
/// Quantile @p q in [0, 1] with numpy's linear interpolation: position q (n-1) between the sorted
/// values. Takes a copy; NaN for an empty span.
double quantile(std::span<const double> v, double q);
double median(std::span<const double> v);

/// @p k distinct indices of [0, n) drawn uniformly (partial Fisher-Yates; k is clamped to n).
/// FPD and KPD subsample without replacement: see frechet.hpp for why.
std::vector<std::int64_t> sample_without_replacement(std::int64_t n, std::int64_t k, Rng& rng);
/// 0, 1, ..., n-1: every row, where a subsample of rows is expected.
std::vector<std::int64_t> every_row(std::int64_t n);

/// y = intercept + slope x fitted by least squares with intercept >= 0 and slope >= 0 (the bounds
/// JetNet's curve_fit uses for FPD(1/N)). When the unconstrained optimum violates a bound the
/// coefficient is fixed at 0 and the other refitted. intercept_error is the standard error of the
/// intercept, sqrt(s^2 [(A^T A)^-1]_00) with s^2 = RSS / (n - 2) of the chosen fit, as
/// scipy.optimize.curve_fit reports it.
struct LineFit {
  double intercept = 0;
  double slope = 0;
  double intercept_error = 0;
};
/// Needs at least 3 points with at least 2 distinct x; throws Error otherwise.
LineFit fit_line_nonnegative(std::span<const double> x, std::span<const double> y);

}  // namespace mpigan::physics
