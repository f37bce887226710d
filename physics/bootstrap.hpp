// The bootstrap error of a two-sample statistic: both samples resampled with replacement (each to
// its own size), the statistic recomputed on every replica, the error the standard deviation of
// the replicas. It covers what moves when both the generated and the reference sample are drawn
// again, which the subsampling error of FPD's extrapolation (frechet.hpp), measured on the two
// samples at hand, does not (docs/physics.md "Statistics").
//
//   error = sqrt( sum_b (T_b - mean T)^2 / (B - 1) ),   T_b = T(ref*_b, gen*_b),  b = 1..B
//
// Replicas are deterministic for a seed: replica b draws its reference rows from Rng(seed, 2b) and
// its generated rows from Rng(seed, 2b + 1).
#pragma once

#include "mpigan/physics/features.hpp"

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <vector>

namespace mpigan::physics {

struct BootstrapOptions {
  int replicas = 8;  ///< B; 0 switches the bootstrap off (docs/physics.md: the cost per replica)
  std::uint64_t seed = 7;
};

struct BootstrapResult {
  /// Per component of the statistic: the standard deviation of the replicas (NaN unless B >= 2).
  std::vector<double> errors;
  std::vector<std::vector<double>> values;  ///< T_b per replica (each a vector of components)
};

/// The statistic of one replica, from the rows (with repeats) of the reference and of the
/// generated sample: one or more components (fpd_hlf and fpd_cc come from one FPD call), the same
/// number every time.
using TwoSampleStatistic =
    std::function<std::vector<double>(std::span<const std::int64_t>, std::span<const std::int64_t>)>;

/// Runs @p statistic on options.replicas replicas of samples of @p n_ref and @p n_gen rows.
BootstrapResult bootstrap(std::int64_t n_ref, std::int64_t n_gen, const TwoSampleStatistic& statistic,
                          const BootstrapOptions& options = {});

/// The rows @p rows of @p m, in that order (repeats allowed): a bootstrap replica's features.
FeatureMatrix select_rows(const FeatureMatrix& m, std::span<const std::int64_t> rows);

}  // namespace mpigan::physics
