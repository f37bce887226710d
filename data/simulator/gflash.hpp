// GFlash parametrisation of electromagnetic showers in a sampling calorimeter (Grindhammer &
// Peters, hep-ex/0001020; constants of Geant4 GFlashSamplingShowerTuning / GVFlashHomoShowerTuning).
//
// Longitudinal: dE/dt = E (beta t)^(alpha-1) beta exp(-beta t) / Gamma(alpha), t in X0,
// T = (alpha-1)/beta the depth of the maximum, y = E / E_c,eff:
//   homogeneous <ln T> = ln(ln y - 0.812),   <ln alpha> = ln(0.81 + (0.458 + 2.26/Z) ln y)
//   sampling    T      = T_hom - 0.55 F_S^-1 - 0.69 (1 - e_hat),   alpha = alpha_hom - 0.476 F_S^-1
//   fluctuations sigma(ln T) = 1/(-2.5 + 1.25 ln y), sigma(ln alpha) = 1/(-0.82 + 0.79 ln y) (<= 0.5),
//                rho(ln T, ln alpha) = 0.784 - 0.023 ln y
//   drawn as ln T = mu_T + s_T (sqrt((1+rho)/2) r1 + sqrt((1-rho)/2) r2),
//            ln a = mu_a + s_a (sqrt((1+rho)/2) r1 - sqrt((1-rho)/2) r2),  r1, r2 ~ N(0,1);
//   clamped to T >= 1, alpha >= 1.1 (Geant4 GenerateEnergyProfile).
// Radial, r in units of R_M, tau = t / T:
//   f(r) = p 2 r Rc^2/(r^2+Rc^2)^2 + (1-p) 2 r Rt^2/(r^2+Rt^2)^2
//   Rc = 0.0251 + 0.00319 ln E + (0.1162 - 0.000381 Z) tau - 0.0203 (1-e_hat) + 0.0397 F_S^-1 e^-tau
//   Rt = (0.659 - 0.00309 Z)(e^(-2.59 (tau-0.645)) + e^((0.3585 + 0.0412 ln E)(tau-0.645)))
//        - 0.14 (1-e_hat) - 0.495 F_S^-1 e^-tau
//   p  = (2.632 - 0.00094 Z) exp(q - e^q), q = (0.401 + 0.00187 Z - tau)/(1.313 - 0.0686 ln E)
//        + (1-e_hat)(0.348 - 0.642 F_S^-1 e^(-(tau-1)^2)),  clamped to [0, 1]
// E in GeV where the formulas say ln E; Z = Z_eff.
#pragma once

#include "mpigan/core/rng.hpp"
#include "mpigan/data/simulator/calorimeter.hpp"

namespace mpigan::data::sim {

/// Means, widths and correlation of (ln T, ln alpha) for one energy.
struct LongitudinalModel {
  double mu_ln_t = 0, sigma_ln_t = 0;
  double mu_ln_alpha = 0, sigma_ln_alpha = 0;
  double rho = 0;
  /// T and alpha of the mean shower.
  double mean_t() const;
  double mean_alpha() const;
};

/// One shower's profile.
struct Profile {
  double t_max = 0;  ///< T, depth of the maximum in X0
  double alpha = 0;
  double beta = 0;  ///< (alpha - 1) / T
};

struct RadialModel {
  double rc = 0;  ///< core radius / R_M
  double rt = 0;  ///< tail radius / R_M
  double p = 0;   ///< core probability
};

LongitudinalModel longitudinal_model(double energy_gev, const Calorimeter& calo);
/// Draws the correlated (T, alpha) of one shower.
Profile sample_profile(const LongitudinalModel& m, Rng& rng);
RadialModel radial_model(double energy_gev, double tau, const Calorimeter& calo);

/// Regularised lower incomplete gamma function P(a, x) (series / continued fraction).
double gamma_p(double a, double x);
/// Fraction of a Gamma(alpha, beta) profile between t0 and t1.
inline double profile_fraction(const Profile& p, double t0, double t1) {
  return gamma_p(p.alpha, p.beta * t1) - gamma_p(p.alpha, p.beta * t0);
}

/// Number of energy spots of a shower (GFlash: 10.3/0.11 E^0.959, E in GeV), times @p scale.
double spot_count(double energy_gev, double scale = 1.0);

}  // namespace mpigan::data::sim
