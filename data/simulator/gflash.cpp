// GFlash parametrisation (see gflash.hpp).
#include "mpigan/data/simulator/gflash.hpp"

#include "mpigan/core/error.hpp"

#include <algorithm>
#include <cmath>

namespace mpigan::data::sim {

double LongitudinalModel::mean_t() const {
  return std::exp(mu_ln_t);
}
double LongitudinalModel::mean_alpha() const {
  return std::exp(mu_ln_alpha);
}

LongitudinalModel longitudinal_model(double energy_gev, const Calorimeter& calo) {
  MPIGAN_CHECK(energy_gev > 0, "GFlash: energy {} GeV must be > 0", energy_gev);
  const double z = calo.z_eff();
  const double ln_y = std::log(std::max(energy_gev * 1000.0 / calo.ec_eff_mev(), 3.0));
  const double fs_inv = calo.fs_inv();
  const double one_minus_ehat = 1.0 - calo.ehat();
  const double t_hom = std::max(ln_y - 0.812, 0.1);
  const double alpha_hom = std::max(0.81 + (0.458 + 2.26 / z) * ln_y, 0.1);
  LongitudinalModel m;
  m.mu_ln_t = std::log(std::max(t_hom - 0.55 * fs_inv - 0.69 * one_minus_ehat, 0.5));
  m.mu_ln_alpha = std::log(std::max(alpha_hom - 0.476 * fs_inv, 1.1));
  m.sigma_ln_t = std::min(0.5, 1.0 / std::max(-2.5 + 1.25 * ln_y, 2.0));
  m.sigma_ln_alpha = std::min(0.5, 1.0 / std::max(-0.82 + 0.79 * ln_y, 2.0));
  m.rho = std::clamp(0.784 - 0.023 * ln_y, -1.0, 1.0);
  return m;
}

Profile sample_profile(const LongitudinalModel& m, Rng& rng) {
  const double r1 = rng.normal_double(), r2 = rng.normal_double();
  const double a = std::sqrt((1.0 + m.rho) / 2.0), b = std::sqrt((1.0 - m.rho) / 2.0);
  Profile p;
  p.t_max = std::max(1.0, std::exp(m.mu_ln_t + m.sigma_ln_t * (a * r1 + b * r2)));
  p.alpha = std::max(1.1, std::exp(m.mu_ln_alpha + m.sigma_ln_alpha * (a * r1 - b * r2)));
  p.beta = (p.alpha - 1.0) / p.t_max;
  return p;
}

RadialModel radial_model(double energy_gev, double tau, const Calorimeter& calo) {
  const double z = calo.z_eff();
  const double ln_e = std::log(energy_gev);
  const double fs_inv = calo.fs_inv();
  const double one_minus_ehat = 1.0 - calo.ehat();
  const double e_tau = std::exp(-tau);
  RadialModel r;
  r.rc = 0.0251 + 0.00319 * ln_e + (0.1162 - 0.000381 * z) * tau - 0.0203 * one_minus_ehat + 0.0397 * fs_inv * e_tau;
  const double k1 = 0.659 - 0.00309 * z, k2 = 0.645, k3 = -2.59, k4 = 0.3585 + 0.0412 * ln_e;
  r.rt = k1 * (std::exp(k3 * (tau - k2)) + std::exp(k4 * (tau - k2))) - 0.14 * one_minus_ehat - 0.495 * fs_inv * e_tau;
  const double p1 = 2.632 - 0.00094 * z, p2 = 0.401 + 0.00187 * z, p3 = 1.313 - 0.0686 * ln_e;
  const double q = (p2 - tau) / p3;
  r.p =
      p1 * std::exp(q - std::exp(q)) + one_minus_ehat * (0.348 - 0.642 * fs_inv * std::exp(-(tau - 1.0) * (tau - 1.0)));
  // Keep the parametrisation inside its domain far from the maximum (tau >> 1 or << 1).
  r.rc = std::max(r.rc, 0.01);
  r.rt = std::max(r.rt, r.rc);
  r.p = std::clamp(r.p, 0.0, 1.0);
  return r;
}

double gamma_p(double a, double x) {
  if (x <= 0) return 0.0;
  const double gln = std::lgamma(a);
  if (x < a + 1.0) {
    double ap = a, sum = 1.0 / a, del = sum;
    for (int n = 0; n < 500; ++n) {
      ap += 1.0;
      del *= x / ap;
      sum += del;
      if (std::fabs(del) < std::fabs(sum) * 1e-15) break;
    }
    return sum * std::exp(-x + a * std::log(x) - gln);
  }
  // Continued fraction for Q(a, x) (modified Lentz).
  const double tiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int i = 1; i < 500; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1.0) < 1e-15) break;
  }
  return 1.0 - std::exp(-x + a * std::log(x) - gln) * h;
}

double spot_count(double energy_gev, double scale) {
  return scale * (10.3 / 0.11) * std::pow(energy_gev, 0.959);
}

}  // namespace mpigan::data::sim
