// Separation power of every observable in every event bin, generated vs reference, with the
// statistical floor of the sample sizes beside it (docs/physics.md "Separation power").
//
// Observables: every scalar of scalar_observables() (per-layer features included by default) as
// event histograms with a common binning, and four histogram observables summed over the events
// of the bin: "spectrum" (cell counts in the log bins of SpectrumBinning) and "profile_x/y/z" (the
// energy-weighted profiles, i.e. the event-summed S_a(i) as a histogram over i).
//
// Floor: S of two reference samples drawn from the same distribution is not 0 but, for histograms
// of counts with p_i the bin probabilities,
//   E[S] ~ 1/4 sum_i (1 - p_i) (1/N1 + 1/N2)  (to first order in 1/N),
// so it scales as 1/N1 + 1/N2. The floor is measured, not assumed: the reference events of the bin
// are split at random in two halves (sizes h1, h2), S(half 1, half 2) is averaged over
// floor_splits (8) splits, and scaled to the sizes being compared:
//   floor = S_halves (1/N_ref + 1/N_gen) / (1/h1 + 1/h2).
// A generator is indistinguishable from the reference by an observable when S is within a few
// times its floor. How far S/floor strays at the floor depends on the histogram: over ~30
// populated bins it is a chi^2 over ~30 degrees of freedom (S/floor within 0.5..1.6), but the
// energy-weighted profiles and discrete observables (max_x, max_y) are dominated by 2 or 3 bins,
// and S/floor then spreads like chi^2_2 / 2 (5 % of such rows above 3). For the histogram
// observables the independent units are still the events, and the same scaling is used (cells of
// one shower are correlated, which the measured floor accounts for); they average 4 x floor_splits
// splits, which costs little and steadies their few-degree-of-freedom floors.
#pragma once

#include "mpigan/physics/binning.hpp"
#include "mpigan/physics/observables.hpp"

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mpigan::physics {

struct SeparationOptions {
  int bins = 30;                      ///< equal bins of each scalar histogram
  double tail = 0.005;                ///< range: 0.5 % .. 99.5 % quantiles of both samples (histogram.hpp)
  bool per_layer = true;              ///< include the per-layer CaloChallenge features
  bool histogram_observables = true;  ///< include spectrum and profile_x/y/z
  int floor_splits = 8;               ///< random half splits of the reference averaged for the floor
  std::uint64_t seed = 1;
  int threads = 0;  ///< OpenMP threads over observables; 0 = default
};

struct SeparationRow {
  std::string observable;
  std::string bin;
  std::int64_t n_ref = 0, n_gen = 0;
  double s = std::numeric_limits<double>::quiet_NaN();      ///< generated vs reference
  double floor = std::numeric_limits<double>::quiet_NaN();  ///< expected S for two reference samples of these sizes
  /// The spread of S for two reference samples of these sizes: the standard deviation of the
  /// rescaled S over the floor's splits (NaN with fewer than 2). (s - floor) / floor_error is how
  /// many standard deviations S stands above its floor.
  double floor_error = std::numeric_limits<double>::quiet_NaN();
};

struct SeparationTable {
  std::vector<SeparationRow> rows;  ///< bin-major: every observable of bins[0], then bins[1], ...
  /// The row of @p observable in @p bin, or nullptr.
  const SeparationRow* find(std::string_view observable, std::string_view bin) const;
};

/// S and its floor for every observable and bin. A bin with fewer than 2 reference or 1 generated
/// events gets NaN in s (and in floor with fewer than 4 reference events).
SeparationTable separation_powers(const Observables& ref, const Observables& gen, std::span<const EventBin> bins,
                                  const SeparationOptions& options = {});

}  // namespace mpigan::physics
