// The calorimeter response per energy bin, generated against reference, each figure with its
// statistical error and a pull: the observables that an average over events cannot hide
// (docs/physics.md "Statistics").
//
// Per bin b, r = E / Ep the response (sum of cells over the primary energy, the sampling fraction)
// of each of the bin's n events, m its mean, s its standard deviation (n - 1), mu_k its k-th
// central moment:
//   linearity   m,      error s / sqrt(n)                       (ratio gen / ref: the linearity)
//   resolution  R = s / m,  error by the delta method with the sample's own moments:
//               var(m) = s^2 / n,  var(s) = (mu_4 - s^4) / (4 s^2 n),  cov(m, s) = mu_3 / (2 s n),
//               var(R) = R^2 [var(s)/s^2 + var(m)/m^2 - 2 cov(m, s) / (s m)]
//               (mu_4 - s^4 is 2 s^4 for a Gaussian: the textbook s / sqrt(2n); the moments make it
//               right for the response's skewed, heavy-tailed distribution)
//   occupancy   the mean number of cells above ObservableOptions::hit_threshold_gev (`hits`),
//               error s_hits / sqrt(n)
//   shape       the separation power S of the r histograms (separation.hpp), its floor and the
//               floor's spread over the reference's half splits
// and for each: ratio = gen / ref, its error from the two relative errors in quadrature, and
//   pull = (gen - ref) / sqrt(error_gen^2 + error_ref^2),   shape: (S - floor) / floor_error,
// the number of standard errors between the samples: |pull| < ~3 for two samples of one
// distribution, >= 5 a difference no statistical fluctuation explains.
#pragma once

#include "mpigan/physics/binning.hpp"
#include "mpigan/physics/observables.hpp"
#include "mpigan/physics/separation.hpp"

#include <limits>
#include <span>
#include <string>
#include <vector>

namespace mpigan::physics {

/// One figure in both samples, with errors, ratio and pull (see the header comment). NaN where a
/// sample has too few events (2 for a mean, 4 for a resolution).
struct ComparedValue {
  double ref = std::numeric_limits<double>::quiet_NaN(), ref_error = std::numeric_limits<double>::quiet_NaN();
  double gen = std::numeric_limits<double>::quiet_NaN(), gen_error = std::numeric_limits<double>::quiet_NaN();
  double ratio = std::numeric_limits<double>::quiet_NaN();        ///< gen / ref
  double ratio_error = std::numeric_limits<double>::quiet_NaN();  ///< first-order
  double pull = std::numeric_limits<double>::quiet_NaN();         ///< (gen - ref) / combined error
};

struct ResponseBin {
  std::string bin;
  std::int64_t n_ref = 0, n_gen = 0;
  ComparedValue linearity;   ///< mean E / Ep
  ComparedValue resolution;  ///< sigma / mean of E / Ep
  ComparedValue occupancy;   ///< mean cells above the hit threshold
  /// Separation power of the E / Ep histograms, its floor and the floor's spread; pull =
  /// (s - floor) / floor_error.
  double shape_s = std::numeric_limits<double>::quiet_NaN(), shape_floor = std::numeric_limits<double>::quiet_NaN();
  double shape_floor_error = std::numeric_limits<double>::quiet_NaN();
  double shape_pull = std::numeric_limits<double>::quiet_NaN();
};

struct EnergyResponse {
  std::vector<ResponseBin> bins;
  /// The largest |pull| of each figure over the bins (NaN when no bin has one): the headline of
  /// "how many standard errors apart".
  double max_abs_pull_linearity = std::numeric_limits<double>::quiet_NaN();
  double max_abs_pull_resolution = std::numeric_limits<double>::quiet_NaN();
  double max_abs_pull_occupancy = std::numeric_limits<double>::quiet_NaN();
  double max_abs_pull_shape = std::numeric_limits<double>::quiet_NaN();
};

/// The mean of @p v and its standard error, and the resolution s / m with its delta-method error
/// (see the header comment). NaN below 2 (mean) or 4 (resolution) values.
struct MomentSummary {
  double mean = std::numeric_limits<double>::quiet_NaN(), mean_error = std::numeric_limits<double>::quiet_NaN();
  double resolution = std::numeric_limits<double>::quiet_NaN();
  double resolution_error = std::numeric_limits<double>::quiet_NaN();
};
MomentSummary summarise(std::span<const double> v);

/// @p ref and @p gen (each a value with its error) as ComparedValue: ratio, its error, pull.
ComparedValue compare_values(double ref, double ref_error, double gen, double gen_error);

/// Every figure of the header comment for every bin of @p bins. @p separation: the options of the
/// shape's separation power and floor (its bins, floor splits and seed; the per-layer and
/// histogram observables are not needed and not computed).
EnergyResponse energy_response(const Observables& ref, const Observables& gen, std::span<const EventBin> bins,
                               const SeparationOptions& separation = {});

}  // namespace mpigan::physics
