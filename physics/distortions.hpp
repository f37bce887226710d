// Controlled distortions of a reference sample: the failure modes a generator can have, applied
// to Monte Carlo showers with a known size, so that each metric can be shown to see the one it is
// meant to see, growing with its size (tests/unit/physics, docs/physics.md "Evidence").
//
//   scale_energy        every cell x f                   (energy scale: sampling fraction)
//   shift_depth         the shower s layers deeper        (longitudinal: z moments, profile, thirds)
//   scale_width         transverse size x f               (lateral: x/y second moments, widths)
//   drop_highest_energy the top fraction of Ep dropped    (a generator that cannot make high-energy showers)
//   scale_response_spread E/Ep spread x f about its mean  (energy resolution; the mean response kept)
//
// Showers are X*Y*Z floats back to back in the data layer's order (observables.hpp); cells.size()
// must be a multiple of X*Y*Z. Energy moved out of the window is lost, as leakage would be.
#pragma once

#include "mpigan/core/shape.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace mpigan::physics {

/// Every cell x @p factor (> 0).
void scale_energy(std::span<float> cells, double factor);

/// Moves every shower @p layers (>= 0, fractional allowed) deeper: with k = floor(layers),
/// f = layers - k, @f$ c'(z) = (1-f)\,c(z-k) + f\,c(z-k-1) @f$ (cells with z - k - 1 < 0 read 0).
/// Energy pushed past the last layer is lost.
void shift_depth(std::span<float> cells, const Dims3& dims, double layers);

/// Scales each shower's transverse size by @p factor (> 0) about its energy barycentre
/// (x_c, y_c), in continuous coordinates where cell i covers [i, i+1): the energy of cell [i, i+1)
/// is spread uniformly over [x_c + f (i - x_c), x_c + f (i + 1 - x_c)) and shared among the cells
/// it overlaps in proportion to the overlap; x first, then y. Energy is conserved except what
/// leaves the window.
void scale_width(std::span<float> cells, const Dims3& dims, double factor);

/// Multiplies the spread of each shower's response r = E / Ep about the mean response of its group
/// by @p factor (> 0), keeping that mean: with m_g the mean r over the events of group g,
/// @f$ r' = m_g + f\,(r - m_g) @f$, i.e. every cell of the shower x r'/r (x 0 where r' < 0, which
/// for f = 3 needs r < 2/3 m_g: never for a calorimeter). @p group: one id >= 0 per event (an
/// energy bin); showers with E <= 0 are left alone. f = 3 is a generator right on average with a
/// three times worse resolution.
void scale_response_spread(std::span<float> cells, const Dims3& dims, std::span<const float> energy_gev,
                           std::span<const std::int64_t> group, double factor);

/// Indices (increasing) of the events kept after dropping the round(@p fraction * n) events with
/// the highest primary energy (ties broken by index).
std::vector<std::int64_t> drop_highest_energy(std::span<const float> energy_gev, double fraction);

}  // namespace mpigan::physics
