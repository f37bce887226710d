// ShowerSimulator: one GFlash-style electromagnetic shower in the W/Si ECAL, binned into the
// 3DGAN window (25x25x25 or 51x51x25 cells of x, y, depth) in raw visible GeV.
//
// Per event (docs/data.md has the figures this reproduces):
//  1. (T, alpha) drawn with correlated fluctuations (gflash.hpp); N = 94 E^0.959 energy spots of
//     E/N each.
//  2. Each spot: depth along the shower axis t ~ Gamma(alpha, beta) in X0; material depth
//     t sin(theta); radial distance r = R_M R sqrt(u/(1-u)) with R = Rc (probability p) or Rt at
//     tau = t/T, azimuth uniform, in the plane perpendicular to the axis. The axis enters at a
//     uniform point of a cell and is tilted in the (y, depth) plane: direction (0, cos theta,
//     sin theta), so y drifts by depth * cot(theta) (the beam axis is y, as measPython expects).
//     Spots beyond the last layer (rear leakage) or in front of the first are lost.
//  3. The window is centred on the cell holding the visible-energy barycentre, as the LCD converter
//     centres it; deposits outside it are lost (lateral leakage).
//  4. Sampling fluctuations per cell: deposit e (GeV, all material) -> Gamma(e/a_l^2, a_l^2), then
//     visible = SF_l times that. Gamma variates with one scale add up, so this equals fluctuating
//     every spot (GFlash ApplySampling) at a fraction of the cost. a_l^2 = a^2 F_S,l^-1 / F_S,thin^-1
//     (thicker absorbers sample worse), a = 0.166 GeV^1/2 by default.
//  5. Visible cells below min_cell_gev (1e-13, the smallest Geant4 deposits seen in the data)
//     are set to 0.
// Deterministic: the output depends only on (config, E, theta, the Rng's state).
#pragma once

#include "mpigan/core/rng.hpp"
#include "mpigan/data/layout.hpp"
#include "mpigan/data/simulator/calorimeter.hpp"
#include "mpigan/data/simulator/gflash.hpp"

#include <span>

namespace mpigan::data::sim {

struct ShowerConfig {
  CalorimeterConfig calorimeter;
  double stochastic_term = 0.166;  ///< a (GeV^1/2) for the thin layers
  double spot_scale = 1.0;         ///< multiplies the GFlash spot count
  double min_cell_gev = 1e-13;     ///< visible cells below are 0
};

/// Truth of one simulated shower, for validation.
struct ShowerTruth {
  Profile profile;
  std::int64_t spots = 0;
  double deposited_gev = 0;  ///< energy of spots inside the calorimeter depth (all material)
  double contained_gev = 0;  ///< ... and inside the window
};

class ShowerSimulator {
 public:
  ShowerSimulator(const ShowerConfig& config, Geometry geometry);

  const ShowerConfig& config() const { return m_config; }
  const Calorimeter& calorimeter() const { return m_calo; }
  Geometry geometry() const { return m_geometry; }
  Dims3 dims() const { return m_dims; }

  /// Simulates one shower of @p energy_gev at polar angle @p theta (radians, pi/2 = normal
  /// incidence) into @p cells (dims().product() floats, x-major, depth fastest) in visible GeV.
  ShowerTruth simulate(double energy_gev, double theta, Rng& rng, std::span<float> cells) const;

 private:
  ShowerConfig m_config;
  Calorimeter m_calo;
  Geometry m_geometry;
  Dims3 m_dims;
  std::vector<double> m_a2;  ///< per layer a_l^2 (GeV)
};

}  // namespace mpigan::data::sim
