// Sampling-fraction agreement per energy bin: the mean relative error of the mean sampling
// fraction, 3DGAN's epoch-selection criterion (SelectEpoch.py 'mre' mode
// in svalleco/3Dgan), with a statistical error from the spread of the samples.
//
// Per bin b (mu, sigma: mean and standard deviation of SF = E/Ep over the bin's events):
//   mre_b   = |mu_gen - mu_ref| / mu_ref
//   error_b = sqrt(sigma_gen^2 / N_gen + (mu_gen / mu_ref)^2 sigma_ref^2 / N_ref) / mu_ref
// (first-order propagation of the errors of both means through the ratio), and over the B bins
// that have reference events
//   mre = (1/B) sum_b mre_b,   error = sqrt(sum_b error_b^2) / B.
// The reference script's error, sqrt(mean_b[((sigma_gan/mu_G4)^2 + (sigma_G4/mu_GAN)^2)/N]), has
// the same leading term; this one propagates the ratio exactly to first order and allows
// N_ref != N_gen. A bin with no generated events counts mre_b = 1 (mu_gen = 0, as in
// gan3d_metric.hpp) with error 0. |.| makes mre_b biased upwards at the floor: for identical
// distributions E[mre_b] = error_b sqrt(2/pi).
#pragma once

#include "mpigan/physics/binning.hpp"
#include "mpigan/physics/observables.hpp"

#include <limits>
#include <span>
#include <string>
#include <vector>

namespace mpigan::physics {

struct SamplingFractionBin {
  std::string bin;
  std::int64_t n_ref = 0, n_gen = 0;
  double mean_ref = 0, mean_gen = 0;    ///< mean E/Ep
  double sigma_ref = 0, sigma_gen = 0;  ///< standard deviation of E/Ep
  double mre = std::numeric_limits<double>::quiet_NaN();
  double error = std::numeric_limits<double>::quiet_NaN();
};

struct SamplingFractionMre {
  double mre = std::numeric_limits<double>::quiet_NaN();
  double error = std::numeric_limits<double>::quiet_NaN();
  int bins_used = 0;
  std::vector<SamplingFractionBin> bins;
};

/// See the header comment for the formulas. NaN when no bin has reference events.
SamplingFractionMre sampling_fraction_mre(const Observables& ref, const Observables& gen,
                                          std::span<const EventBin> bins);

}  // namespace mpigan::physics
