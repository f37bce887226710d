// The verdict on generated showers: mpigan's one physics figure of merit, and every metric of
// generated vs reference showers in one call (separation powers with floors, the 3DGAN metric, the
// sampling-fraction error, FPD, KPD), with the time each took. The entry point of
// `mpigan validate` and of validation during training.
//
// Both samples are Observables (compute_observables) of the same geometry and units convention;
// bins come from CompareOptions::binning (the reference's E +- 5 GeV bins by default).
//
// The figure of merit (lower is better) is FPD_inf of the standardised high-level features, named
// "fpd_hlf" (docs/physics.md "Figure of merit" has the evidence). Why this one:
//  - It sees every failure mode we test, each growing with its size (tests/unit/physics:
//    energy scale, depth, width and missing high-energy showers), because its features hold the
//    response (E/Ep), the longitudinal profile (layer energies over Ep), the lateral centre and
//    width of every layer, and the primary energy.
//  - It sees fluctuations and correlations, not only means: the 3DGAN metric and the
//    sampling-fraction error compare event averages per bin, so a generator that always emits the
//    average shower of its energy (mode collapse, the classic GAN failure) scores perfectly on
//    them; its covariance term makes FPD large.
//  - Extrapolated to N -> infinity (frechet.hpp), it does not depend on the validation sample
//    size, so runs validated on different numbers of events, and trials of a hyper-parameter
//    search, compare directly; and it comes with an error.
//  - Kansal et al. (arXiv:2211.10295) found FPD the most sensitive of the metrics they studied to
//    every distortion they tried, and the CaloChallenge reports it (arXiv:2410.21611).
// Its floor (reference vs reference) is 0 within its error. Standardisation (features.hpp) makes
// it a sum of squared shifts in units of the reference's spreads plus the covariance mismatch.
// Its blind spot: a small global energy scale (1 %) moves it less than its error at a few thousand
// events, where the sampling-fraction MRE, an average over events, sees it at 9 standard errors
// (1800 events); report both (compare() does), and the per-bin response with its pulls
// (response.hpp), which names what is wrong and by how many standard errors.
//
// Errors: FigureOfMerit::error is the subsampling error of FPD's extrapolation, which measures the
// noise of subsampling the two samples at hand; bootstrap_error resamples both samples and covers
// how the value moves from one pair of samples to the next (4-9 times the former, measured).
#pragma once

#include "mpigan/physics/binning.hpp"
#include "mpigan/physics/bootstrap.hpp"
#include "mpigan/physics/classifier.hpp"
#include "mpigan/physics/features.hpp"
#include "mpigan/physics/frechet.hpp"
#include "mpigan/physics/gan3d_metric.hpp"
#include "mpigan/physics/kernel_distance.hpp"
#include "mpigan/physics/observables.hpp"
#include "mpigan/physics/response.hpp"
#include "mpigan/physics/sampling_fraction.hpp"
#include "mpigan/physics/separation.hpp"

#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace mpigan::physics {

inline constexpr const char* kFigureOfMeritName = "fpd_hlf";

struct FigureOfMerit {
  std::string name = kFigureOfMeritName;
  double value = 0;  ///< FPD_inf
  double error = 0;  ///< its standard error from the subsampling of the extrapolation (frechet.hpp)
  /// The bootstrap error: both samples resampled with replacement, FPD_inf recomputed
  /// (bootstrap.hpp); NaN when the bootstrap is off. It covers the sample-to-sample variation
  /// that `error` does not.
  double bootstrap_error = std::numeric_limits<double>::quiet_NaN();
};

/// The CaloChallenge convention (its evaluate.py, through JetNet's fpd and kpd): the same
/// high-level features, each scaled by the reference's largest absolute value (max_abs) instead
/// of standardised, FPD extrapolated to N -> infinity, both quoted x 10^3. For numbers on the
/// published scale; the figure of merit stays fpd_hlf (standardised features).
inline constexpr double kCaloChallengeScale = 1e3;

struct CaloChallengeDistances {
  double fpd = std::numeric_limits<double>::quiet_NaN();        ///< fpd_cc: FPD_inf of max_abs-scaled features x 10^3
  double fpd_error = std::numeric_limits<double>::quiet_NaN();  ///< x 10^3, subsampling
  double fpd_bootstrap_error = std::numeric_limits<double>::quiet_NaN();  ///< x 10^3, bootstrap
  double kpd = std::numeric_limits<double>::quiet_NaN();        ///< kpd_cc: KPD of max_abs-scaled features x 10^3
  double kpd_error = std::numeric_limits<double>::quiet_NaN();  ///< x 10^3
};

struct FomOptions {
  FeatureOptions features;
  FpdOptions fpd;  ///< scaling standardise by default
};

/// FPD_inf of high_level_features(ref) vs high_level_features(gen):
/// @f$ \mathrm{FoM} = \lim_{N\to\infty} \mathrm{FD}_N\big(\mathcal N(\hat\mu_{ref}, \hat C_{ref}),\ \mathcal
/// N(\hat\mu_{gen}, \hat C_{gen})\big) @f$ on standardised features.
FigureOfMerit figure_of_merit(const Observables& ref, const Observables& gen, const FomOptions& options = {});

/// The figure of merit of an FPD already computed with the FoM's features and options.
FigureOfMerit figure_of_merit(const Fpd& fpd);

struct CompareOptions {
  BinningOptions binning;
  SeparationOptions separation;
  Gan3dOptions gan3d;
  FeatureOptions features;
  FpdOptions fpd;
  KpdOptions kpd;
  bool separation_enabled = true;
  bool kpd_enabled = true;
  bool calochallenge_enabled = true;  ///< fpd_cc and kpd_cc (max_abs scaling, x 10^3)
  bool response_enabled = true;       ///< resolution, linearity, occupancy, shape per bin (response.hpp)
  /// Bootstrap errors of fpd_hlf and fpd_cc (replicas 0 or 1: off). Each replica recomputes both
  /// FPD_inf with `bootstrap_fpd`'s sizes and subsamples (its scaling is ignored): fewer than
  /// `fpd`'s, whose noise adds to the replicas' spread, so the error errs high. 8 replicas cost
  /// 1.5 s at 2 000 vs 2 000 showers of 25^3 on 2 cores (docs/physics.md "Statistics").
  BootstrapOptions bootstrap;
  FpdOptions bootstrap_fpd = {.points = 5, .batches = 4};
  /// The classifier test (~0.1 s at 2 000 events; not in the figure of merit). Skipped, leaving
  /// Comparison::classifier empty, when a sample has fewer than kClassifierMinEvents events.
  bool classifier_enabled = true;
  ClassifierOptions classifier;
};

struct Comparison {
  std::vector<EventBin> bins;
  SeparationTable separation;
  Gan3dMetric gan3d;
  SamplingFractionMre sampling_fraction;
  Fpd fpd;
  Kpd kpd;
  FigureOfMerit fom;
  CaloChallengeDistances cc;
  EnergyResponse response;
  std::optional<ClassifierResult> classifier;
  struct Seconds {
    double separation = 0, gan3d = 0, sampling_fraction = 0, features = 0, fpd = 0, kpd = 0;
    /// calochallenge: kpd_cc (fpd_cc shares fpd_hlf's subsamples and is counted in fpd).
    double calochallenge = 0, bootstrap = 0, response = 0, classifier = 0;
    double total() const {
      return separation + gan3d + sampling_fraction + features + fpd + kpd + calochallenge + bootstrap + response +
             classifier;
    }
  } seconds;
};

/// All metrics of @p gen against @p ref (see the header comment).
Comparison compare(const Observables& ref, const Observables& gen, const CompareOptions& options = {});

}  // namespace mpigan::physics
