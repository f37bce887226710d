// One parametrised shower (see shower_simulator.hpp).
#include "mpigan/data/simulator/shower_simulator.hpp"

#include "mpigan/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

namespace mpigan::data::sim {
namespace {

struct Spot {
  std::int32_t ix, iy;  ///< cell on the unbounded grid
  std::int32_t layer;
};

// Marsaglia-Tsang Gamma(a) for the fixed shape of one shower (a >= 1: alpha is clamped to >= 1.1),
// with both Box-Muller normals used and 24-bit uniforms: the per-spot cost dominates the simulator,
// and this is about twice as fast as Rng::gamma while exact in distribution.
class SpotGamma {
 public:
  explicit SpotGamma(double a) : m_d(a - 1.0 / 3.0), m_c(1.0 / std::sqrt(9.0 * (a - 1.0 / 3.0))) {}
  double operator()(Rng& rng) {
    for (;;) {
      const double x = normal(rng);
      double v = 1.0 + m_c * x;
      if (v <= 0.0) continue;
      v = v * v * v;
      const double u = 1.0 - static_cast<double>(rng.uniform());  // (0, 1]
      if (u < 1.0 - 0.0331 * x * x * x * x) return m_d * v;
      if (std::log(u) < 0.5 * x * x + m_d * (1.0 - v + std::log(v))) return m_d * v;
    }
  }

 private:
  // Marsaglia's polar method: two normals per accepted pair, no trigonometry.
  double normal(Rng& rng) {
    if (m_has_spare) {
      m_has_spare = false;
      return m_spare;
    }
    double a, b, s;
    do {
      a = 2.0 * rng.uniform() - 1.0;
      b = 2.0 * rng.uniform() - 1.0;
      s = a * a + b * b;
    } while (s >= 1.0 || s == 0.0);
    const double f = std::sqrt(-2.0 * std::log(s) / s);
    m_spare = b * f;
    m_has_spare = true;
    return a * f;
  }
  double m_d, m_c;  // Marsaglia and Tsang's d = a - 1/3 and c = 1 / sqrt(9 d)
  double m_spare = 0;
  bool m_has_spare = false;
};

// The radial parameters change slowly with tau; a table at steps of 1/32 up to tau = 8 keeps the
// per-spot cost to a lookup (the error, < 0.5 % on Rc and Rt, is far below the model's own).
constexpr int kTauSteps = 32;
constexpr double kTauMax = 8.0;

}  // namespace

ShowerSimulator::ShowerSimulator(const ShowerConfig& config, Geometry geometry)
    : m_config(config), m_calo(config.calorimeter), m_geometry(geometry), m_dims(geometry_dims(geometry)) {
  MPIGAN_CHECK(m_calo.num_layers() == m_dims.w, "simulator: {} layers but geometry {} has {} depth cells",
               m_calo.num_layers(), to_string(geometry), m_dims.w);
  MPIGAN_CHECK(config.stochastic_term > 0 && config.spot_scale > 0,
               "simulator: stochastic term {} and spot scale {} must be > 0", config.stochastic_term,
               config.spot_scale);
  const double thin = m_calo.layers().front().x0_size;
  for (const Layer& l : m_calo.layers())
    m_a2.push_back(config.stochastic_term * config.stochastic_term * l.x0_size / thin);
}

// Long on purpose (~100 lines): one shower, sampled in the order of the GFlash recipe (longitudinal
// profile, then per layer the spots and their radial positions); the RNG draws must keep this order
// for the same showers from the same seed (docs/data.md).
ShowerTruth ShowerSimulator::simulate(double energy_gev, double theta, Rng& rng, std::span<float> cells) const {
  MPIGAN_CHECK(energy_gev > 0 && std::isfinite(energy_gev), "simulator: energy {} GeV must be finite and > 0",
               energy_gev);
  MPIGAN_CHECK(theta > 0.1 && theta < std::numbers::pi - 0.1, "simulator: theta {} rad is outside (0.1, pi-0.1)",
               theta);
  MPIGAN_CHECK(static_cast<std::int64_t>(cells.size()) == m_dims.product(), "simulator: {} cells for geometry {}",
               cells.size(), to_string(m_geometry));
  const Calorimeter& calo = m_calo;
  const std::vector<Layer>& layers = calo.layers();
  const int nlayers = calo.num_layers();
  const double cell = calo.cell_mm();
  const double rm = calo.moliere_mm();
  const double sin_t = std::sin(theta), cos_t = std::cos(theta), cot_t = cos_t / sin_t;
  const double total_x0 = calo.total_x0();

  ShowerTruth truth;
  truth.profile = sample_profile(longitudinal_model(energy_gev, calo), rng);
  const Profile& prof = truth.profile;
  const auto nspots = std::max<std::int64_t>(1, std::llround(spot_count(energy_gev, m_config.spot_scale)));
  truth.spots = nspots;
  const double e_spot = energy_gev / static_cast<double>(nspots);

  // Radial parameters tabulated in tau for this energy.
  thread_local std::vector<RadialModel> table;
  table.resize(static_cast<std::size_t>(kTauMax * kTauSteps) + 1);
  for (std::size_t i = 0; i < table.size(); ++i)
    table[i] = radial_model(energy_gev, static_cast<double>(i) / kTauSteps, calo);

  // Entry point: uniform inside a cell of the grid (the converter centres on a cell, not a point).
  const double ux = rng.uniform_double() * cell, uy = rng.uniform_double() * cell;

  thread_local std::vector<Spot> spots;
  spots.clear();
  spots.reserve(static_cast<std::size_t>(nspots));
  double wsum = 0, wx = 0, wy = 0;
  SpotGamma gamma(prof.alpha);
  const double inv_beta = 1.0 / prof.beta;
  for (std::int64_t s = 0; s < nspots; ++s) {
    const double t = gamma(rng) * inv_beta;  // X0 along the axis
    const double t_mat = t * sin_t;          // material depth along the normal
    const double tau = t / prof.t_max;
    const RadialModel& rmod = table[static_cast<std::size_t>(std::min(tau, kTauMax) * kTauSteps + 0.5)];
    const double radius_scale = rng.uniform() < rmod.p ? rmod.rc : rmod.rt;
    const double u = rng.uniform();  // [0, 1 - 2^-24]: r below 4096 R, far outside any window
    const double r = rm * radius_scale * std::sqrt(u / (1.0 - u));
    // Uniform azimuth as a point of the unit disc (no sin/cos): (cos, sin) = ((a^2-b^2), 2ab)/(a^2+b^2).
    double a, b, q;
    do {
      a = 2.0 * rng.uniform() - 1.0;
      b = 2.0 * rng.uniform() - 1.0;
      q = a * a + b * b;
    } while (q >= 1.0 || q == 0.0);
    const double cos_phi = (a * a - b * b) / q, sin_phi = 2.0 * a * b / q;
    if (t_mat >= total_x0) continue;  // rear leakage
    const double d_axis = calo.depth_of_x0(t_mat);
    const double d_perp = r * sin_phi;
    const double x = r * cos_phi + ux;
    const double y = d_axis * cot_t + d_perp * sin_t + uy;
    const double depth = d_axis - d_perp * cos_t;
    const int layer = calo.layer_at_depth(depth);
    if (layer < 0 || layer >= nlayers) continue;  // albedo / rear leakage of the tilted spread
    const auto ix = static_cast<std::int32_t>(std::floor(x / cell));
    const auto iy = static_cast<std::int32_t>(std::floor(y / cell));
    spots.push_back({ix, iy, layer});
    const double w = layers[static_cast<std::size_t>(layer)].sampling_fraction;
    wsum += w;
    wx += w * (ix + 0.5);
    wy += w * (iy + 0.5);
  }
  truth.deposited_gev = e_spot * static_cast<double>(spots.size());

  // Window centred on the barycentre cell.
  const std::int64_t nx = m_dims.d, ny = m_dims.h, nz = m_dims.w;
  const auto cx = wsum > 0 ? static_cast<std::int64_t>(std::floor(wx / wsum)) : 0;
  const auto cy = wsum > 0 ? static_cast<std::int64_t>(std::floor(wy / wsum)) : 0;
  const std::int64_t x0 = cx - nx / 2, y0 = cy - ny / 2;

  thread_local std::vector<std::int32_t> count;
  count.assign(static_cast<std::size_t>(m_dims.product()), 0);
  std::int64_t contained = 0;
  for (const Spot& sp : spots) {
    const std::int64_t ix = sp.ix - x0, iy = sp.iy - y0;
    if (ix < 0 || ix >= nx || iy < 0 || iy >= ny) continue;  // lateral leakage out of the window
    ++count[static_cast<std::size_t>((ix * ny + iy) * nz + sp.layer)];
    ++contained;
  }
  truth.contained_gev = e_spot * static_cast<double>(contained);

  const auto min_cell = static_cast<float>(m_config.min_cell_gev);
  for (std::size_t k = 0; k < count.size(); ++k) {
    if (count[k] == 0) {
      cells[k] = 0.0f;
      continue;
    }
    const std::size_t l = k % static_cast<std::size_t>(nz);
    const double deposit = e_spot * count[k];
    const double a2 = m_a2[l];
    const double fluctuated = a2 * rng.gamma(deposit / a2);
    const auto visible = static_cast<float>(fluctuated * layers[l].sampling_fraction);
    cells[k] = visible >= min_cell ? visible : 0.0f;
  }
  return truth;
}

}  // namespace mpigan::data::sim
