// The 3DGAN validation metric (GANutils.metric / OptAnalysisAngle in svalleco/3Dgan),
// written once and guarded: per energy bin, the mean relative errors of the event-averaged
// shower moments and of the event-averaged profiles (and of the measured angle when both samples
// have it), each averaged over bins and summed.
//
// Differences from the reference code, on purpose (docs/physics.md):
//  - the moment term is counted once (the reference computes and adds it twice);
//  - relative errors whose reference value is 0 are skipped, and the mean is over the terms kept:
//    profile cells with an empty event-averaged reference profile, moments with a zero reference
//    mean (the reference divides by zero there and returns inf or nan);
//  - a bin without reference events is skipped and counted; a bin with reference events but no
//    generated ones has generated averages 0 (the mean over no events), so each of its relative
//    errors is 1: a generator that cannot populate a bin is penalised, not ignored;
//  - the angle term compares event-averaged measured angles; the reference averages per-event
//    errors of showers generated at the reference events' own (E, theta), a pairing this function
//    does not assume.
#pragma once

#include "mpigan/physics/binning.hpp"
#include "mpigan/physics/observables.hpp"

#include <limits>
#include <span>
#include <string>
#include <vector>

namespace mpigan::physics {

struct Gan3dOptions {
  bool angle = true;  ///< add the angle term when both samples have measured angles
  /// Profile cells with a reference mean <= this fraction of the profile's maximum are skipped.
  /// 0 (default) skips only empty cells, as close to the reference as a finite metric can be.
  double profile_min_fraction = 0.0;
};

struct Gan3dBin {
  std::string bin;
  std::int64_t n_ref = 0, n_gen = 0;
  double moments = std::numeric_limits<double>::quiet_NaN();   ///< pos_b
  double profiles = std::numeric_limits<double>::quiet_NaN();  ///< prof_b
  double angle = std::numeric_limits<double>::quiet_NaN();     ///< ang_b (NaN when not used)
  int moment_terms_skipped = 0;
  int profile_cells_skipped = 0;
};

struct Gan3dMetric {
  double total = std::numeric_limits<double>::quiet_NaN();  ///< moments + profiles (+ angle)
  double moments = std::numeric_limits<double>::quiet_NaN();
  double profiles = std::numeric_limits<double>::quiet_NaN();
  double angle = std::numeric_limits<double>::quiet_NaN();
  int bins_used = 0;
  int bins_without_reference = 0;
  std::vector<Gan3dBin> bins;
};

/// Per bin b, with <.> the mean over the bin's events and m_{k,a} the k-th moment along axis a:
/// @f$ \mathrm{pos}_b = \frac{1}{|T|}\sum_{(k,a)\in T} \frac{|\langle m_{k,a}\rangle_{ref} - \langle
/// m_{k,a}\rangle_{gen}|}{|\langle m_{k,a}\rangle_{ref}|} @f$, T = {k = 1, 2} x {x, y, z} less terms with a zero
/// reference mean;
/// @f$ \mathrm{prof}_b = \frac13 \sum_a \frac{1}{|C_a|} \sum_{i \in C_a} \frac{|\bar S_{a,ref}(i) - \bar
/// S_{a,gen}(i)|}{\bar S_{a,ref}(i)} @f$, C_a = cells with a non-empty reference mean profile;
/// @f$ \mathrm{ang}_b = |\langle\theta_{ref}\rangle - \langle\theta_{gen}\rangle| / \langle\theta_{ref}\rangle @f$.
/// total = mean_b pos + mean_b prof (+ mean_b ang). NaN when no bin has reference events.
Gan3dMetric gan3d_metric(const Observables& ref, const Observables& gen, std::span<const EventBin> bins,
                         const Gan3dOptions& options = {});

}  // namespace mpigan::physics
