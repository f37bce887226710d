// Event bins by primary energy and angle, as the 3DGAN analysis makes them
// (keras/analysis: E +- 5 GeV around 50, 100, 200, 300, 400, 500 GeV; angle +- 0.1 rad), and the
// selection of the events of a bin.
//
// Conventions: a bin is the open interval (centre - half width, centre + half width) in energy
// and, when given, in angle, like the reference's np.where((y > E - 5) & (y < E + 5)). Bins may
// overlap (an event can be in several); the optional "all" bin holds every event. Angles are the
// true (conditioning) angles of Observables::angle, in radians.
#pragma once

#include "mpigan/physics/observables.hpp"

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace mpigan::physics {

struct EventBin {
  std::string label;                                            ///< "100 GeV", "100 GeV, 1.57 rad", "all"
  double energy_lo = -std::numeric_limits<double>::infinity();  ///< GeV, exclusive
  double energy_hi = std::numeric_limits<double>::infinity();   ///< GeV, exclusive
  double angle_lo = -std::numeric_limits<double>::infinity();   ///< rad, exclusive
  double angle_hi = std::numeric_limits<double>::infinity();    ///< rad, exclusive
  bool uses_angle() const;
  /// @f$ E_{lo} < E_p < E_{hi} @f$ and, when the bin has an angle window, @f$ \theta_{lo} < \theta < \theta_{hi} @f$.
  bool contains(double energy_gev, double angle_rad) const;
};

/// The energy half width of `mpigan validate` and of the physics validation during training:
/// +-10 GeV, twice the reference's +-5. Showers uniform in 10..500 GeV put 2 % of a sample in a
/// +-5 GeV bin, 40 of 2 000 showers, where the per-event spread of E/Ep (5.0-5.5 %) gives the
/// generated-vs-reference comparison of a bin's mean sampling fraction a statistical error of
/// 1.2 %; +-10 GeV puts ~80 in each bin and brings it to ~0.85 % (<= 1 % down to 56 events per
/// bin), without a larger sample. The mean E/Ep changes by < 0.1 % per GeV, and the compared
/// samples share their energies, so the wider bin costs no bias (docs/physics.md "Statistics").
inline constexpr double kValidationEnergyHalfWidthGev = 10.0;

struct BinningOptions {
  std::vector<double> energies = {50, 100, 200, 300, 400, 500};  ///< bin centres, GeV
  double energy_half_width = 5.0;                                ///< GeV
  std::vector<double> angles;                                    ///< bin centres, rad; empty = no angle bins
  double angle_half_width = 0.1;                                 ///< rad
  bool all = false;                                              ///< add the "all events" bin first
};

/// The bins of @p options: the energy bins (x the angle bins when angles are given, energy-major),
/// preceded by "all" when requested. Throws ConfigError on a non-positive half width.
std::vector<EventBin> make_bins(const BinningOptions& options = {});

/// Indices (increasing) of the events of @p o in @p bin. Throws Error when the bin has an angle
/// window and @p o has no angles.
std::vector<std::int64_t> select_bin(const Observables& o, const EventBin& bin);

/// A random half split of @p events (sizes floor(n/2) and ceil(n/2)), deterministic for @p seed:
/// the two halves of a reference sample give the statistical floor of a metric.
std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> split_halves(std::span<const std::int64_t> events,
                                                                             std::uint64_t seed);

}  // namespace mpigan::physics
