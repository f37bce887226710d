// Validation of the parametrised shower simulator against the published CLIC/3DGAN figures
// (docs/data.md, the simulator): sampling fraction, resolution, shower maximum, hit counts.
#include <doctest/doctest.h>

#include "mpigan/data/angle_measure.hpp"
#include "mpigan/data/simulator/gflash.hpp"
#include "mpigan/data/simulator/shower_simulator.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <vector>

using namespace mpigan;
using namespace mpigan::data;
using namespace mpigan::data::sim;

namespace {

struct Stats {
  double sf_mean = 0;         // mean of sum(ECAL)/E
  double raw_spread = 0;      // sigma(sum) / mean(sum), uncalibrated
  double resolution = 0;      // sigma/mean of the calibrated energy sum_l visible_l / SF_l
  double leakage = 0;         // sigma/E of the energy deposited inside the calorimeter depth (rear leakage)
  int max_layer = 0;          // layer with the largest mean deposit
  double hits = 0;            // mean cells above 3e-4 GeV
  double thick_share_sd = 0;  // sd over events of the calibrated energy share in the thick layers
};

Stats run(const ShowerSimulator& sim, double energy, int events, std::uint64_t seed) {
  std::vector<float> cells(static_cast<std::size_t>(sim.dims().product()));
  std::vector<double> sums, calibrated, thick_share, deposited, profile(25, 0.0);
  double hits = 0;
  const int thin = sim.calorimeter().config().thin_layers;
  for (int i = 0; i < events; ++i) {
    Rng rng(seed, static_cast<std::uint64_t>(i));
    deposited.push_back(sim.simulate(energy, std::numbers::pi / 2, rng, cells).deposited_gev);
    double s = 0, c = 0, c_thick = 0;
    for (std::size_t k = 0; k < cells.size(); ++k) {
      s += cells[k];
      const double e = cells[k] / sim.calorimeter().layers()[k % 25].sampling_fraction;
      c += e;
      if (static_cast<int>(k % 25) >= thin) c_thick += e;
      profile[k % 25] += cells[k];
      hits += cells[k] > 3e-4f;
    }
    sums.push_back(s);
    calibrated.push_back(c);
    thick_share.push_back(c_thick / c);
  }
  auto spread = [&](const std::vector<double>& v, double& mean) {
    mean = std::accumulate(v.begin(), v.end(), 0.0) / events;
    double var = 0;
    for (double x : v) var += (x - mean) * (x - mean);
    return std::sqrt(var / (events - 1)) / mean;
  };
  Stats st;
  double mean = 0, cmean = 0;
  st.raw_spread = spread(sums, mean);
  st.resolution = spread(calibrated, cmean);
  double dmean = 0;
  st.leakage = spread(deposited, dmean) * dmean / energy;
  double share_mean = 0;
  st.thick_share_sd = spread(thick_share, share_mean) * share_mean;
  st.sf_mean = mean / energy;
  st.max_layer = static_cast<int>(std::max_element(profile.begin(), profile.end()) - profile.begin());
  st.hits = hits / events;
  return st;
}

// The data fit GetEcalFit: sum(ECAL)/E in percent as a function of x = E/100.
double ecal_fit_percent(double energy) {
  const double x = energy / 100.0;
  return 0.0018 * std::pow(x, 4) - 0.023 * std::pow(x, 3) + 0.11 * x * x - 0.28 * x + 2.21;
}

}  // namespace

TEST_CASE("calorimeter: derived W/Si constants match the hand computation") {
  const Calorimeter calo;
  CHECK(calo.num_layers() == 25);
  CHECK(calo.x0_eff_mm() == doctest::Approx(4.20).epsilon(0.01));
  CHECK(calo.z_eff() == doctest::Approx(72.5).epsilon(0.01));
  CHECK(calo.ec_eff_mev() == doctest::Approx(8.2).epsilon(0.02));
  CHECK(calo.ehat() == doctest::Approx(0.704).epsilon(0.01));
  CHECK(calo.fs_inv() == doctest::Approx(0.69).epsilon(0.01));
  CHECK(calo.layers().back().x0_size == doctest::Approx(1.38).epsilon(0.01));
  CHECK(calo.total_x0() == doctest::Approx(22.7).epsilon(0.01));
  CHECK(calo.total_depth_mm() == doctest::Approx(159.2).epsilon(0.001));
  CHECK(calo.layers().front().sampling_fraction == doctest::Approx(0.0248).epsilon(0.02));
  CHECK(calo.layers().back().sampling_fraction == doctest::Approx(0.0126).epsilon(0.02));
  CHECK(calo.layer_at_depth(0.0) == 0);
  CHECK(calo.layer_at_depth(5.59) == 0);
  CHECK(calo.layer_at_depth(5.61) == 1);
  CHECK(calo.layer_at_depth(159.3) == 25);
  CHECK(calo.depth_of_x0(calo.fs_inv()) == doctest::Approx(5.6));
}

TEST_CASE("gflash: longitudinal parameters reproduce the worked values") {
  const Calorimeter calo;
  const LongitudinalModel m10 = longitudinal_model(10, calo), m100 = longitudinal_model(100, calo),
                          m500 = longitudinal_model(500, calo);
  CHECK(m10.mean_t() == doctest::Approx(5.7).epsilon(0.03));
  CHECK(m10.mean_alpha() == doctest::Approx(3.96).epsilon(0.03));
  CHECK(m100.mean_t() == doctest::Approx(8.0).epsilon(0.03));
  CHECK(m100.mean_alpha() == doctest::Approx(5.08).epsilon(0.03));
  CHECK(m100.sigma_ln_t == doctest::Approx(0.108).epsilon(0.03));
  CHECK(m100.sigma_ln_alpha == doctest::Approx(0.151).epsilon(0.03));
  CHECK(m100.rho == doctest::Approx(0.57).epsilon(0.03));
  CHECK(m500.mean_t() == doctest::Approx(9.6).epsilon(0.03));
  // Rear leakage beyond 22.7 X0 of the mean shower: 0.3 % / 1.1 % / 2.5 %.
  auto leak = [&](const LongitudinalModel& m) {
    const Profile p{m.mean_t(), m.mean_alpha(), (m.mean_alpha() - 1) / m.mean_t()};
    return 1.0 - profile_fraction(p, 0, calo.total_x0());
  };
  CHECK(leak(m10) == doctest::Approx(0.003).epsilon(0.5));
  CHECK(leak(m100) == doctest::Approx(0.011).epsilon(0.4));
  CHECK(leak(m500) == doctest::Approx(0.025).epsilon(0.4));
  const RadialModel r = radial_model(100, 1.0, calo);
  CHECK(r.rc == doctest::Approx(0.13).epsilon(0.1));
  CHECK(r.rt == doctest::Approx(0.54).epsilon(0.05));
  CHECK(r.p == doctest::Approx(0.83).epsilon(0.05));
}

TEST_CASE("gflash: incomplete gamma function") {
  CHECK(gamma_p(1.0, 1.0) == doctest::Approx(1.0 - std::exp(-1.0)).epsilon(1e-12));
  CHECK(gamma_p(3.0, 2.0) == doctest::Approx(1.0 - std::exp(-2.0) * (1 + 2 + 2)).epsilon(1e-12));
  CHECK(gamma_p(5.5, 30.0) == doctest::Approx(1.0 - 8.0e-9).epsilon(1e-9));  // Q(5.5, 30) ~ 8e-9
  CHECK(gamma_p(2.5, 0.0) == 0.0);
}

// The resolution of the calorimeter is that of its calibrated (layer-weighted)
// energy: within 30 % of CALICE's 16.6 %/sqrt(E) (+) 1.1 % from 10 to 500 GeV. The unweighted
// sum(ECAL)/E is wider (4.7-6.9 %) and must be: thick layers sample at half the thin layers' SF, so
// sum(ECAL) = E_cal (SF_thin - (SF_thin - SF_thick) f) with f the shower's share in the thick
// layers, and f fluctuates by ~0.07 from shower to shower (GFlash's sigma(ln T) ~ 0.1). That term
// alone, (SF_thin - SF_thick) sd(f) / SF, accounts for most of the raw spread.
TEST_CASE("simulator: sampling fraction, resolution, shower maximum and hits match the data") {
  const ShowerSimulator sim({}, Geometry::ecal25);
  const auto& layers = sim.calorimeter().layers();
  const double sf_gap = layers.front().sampling_fraction - layers.back().sampling_fraction;
  std::vector<Stats> stats;
  for (double energy : {10.0, 50.0, 100.0, 200.0, 500.0}) {
    const Stats st = run(sim, energy, 400, 7);
    const double fit = ecal_fit_percent(energy) / 100.0;
    const double stochastic = 0.166 / std::sqrt(energy), constant = 0.011;
    const double published = std::sqrt(stochastic * stochastic + constant * constant);
    const double share_term = sf_gap * st.thick_share_sd / st.sf_mean;
    MESSAGE("E = " << energy << " GeV: SF " << 100 * st.sf_mean << " % (data fit " << 100 * fit
                   << " %), sigma/E (calibrated) " << 100 * st.resolution << " % (CALICE " << 100 * published
                   << " %, rear leakage " << 100 * st.leakage << " %), max layer " << st.max_layer
                   << ", hits > 3e-4 GeV " << st.hits << ", raw sum spread " << 100 * st.raw_spread
                   << " % of which thick-layer share " << 100 * share_term << " %");
    CHECK(std::fabs(st.sf_mean / fit - 1.0) < 0.10);
    // Within 30 % of CALICE up to 200 GeV. At 500 GeV the 23 X0 stack leaks 2.7 % at the rear with
    // an RMS of 1.5 %, more than CALICE's 1.1 % constant term (measured at 6-45 GeV, where leakage is
    // small); without it, what remains is the stochastic term.
    CHECK(std::fabs(st.resolution / published - 1.0) < (energy <= 200 ? 0.30 : 0.45));
    const double no_leakage = std::sqrt(st.resolution * st.resolution - st.leakage * st.leakage);
    CHECK(std::fabs(no_leakage / stochastic - 1.0) < 0.30);
    CHECK(st.raw_spread > st.resolution);
    CHECK(std::sqrt(st.raw_spread * st.raw_spread - st.resolution * st.resolution) ==
          doctest::Approx(share_term).epsilon(0.25));
    CHECK(st.hits > 20);
    CHECK(st.hits < 4000);
    stats.push_back(st);
  }
  stats.erase(stats.begin() + 3);  // 10, 50, 100, 500 GeV below
  stats.erase(stats.begin() + 1);  // 10, 100, 500 GeV below
  // Shower maximum grows like ln E: about 1.44 X0 (2 thin layers) per factor e, 10 -> 500 GeV is 3.9.
  CHECK(stats[0].max_layer < stats[1].max_layer);
  CHECK(stats[1].max_layer <= stats[2].max_layer);
  const double slope = (stats[2].max_layer - stats[0].max_layer) / std::log(50.0);
  CHECK(slope > 0.8);
  CHECK(slope < 3.0);
  // Hits grow with energy, sampling fraction falls (more rear leakage, thick layers).
  CHECK(stats[0].hits < stats[1].hits);
  CHECK(stats[1].hits < stats[2].hits);
  CHECK(stats[0].sf_mean > stats[2].sf_mean);
}

TEST_CASE("simulator: tilted showers drift along y and measPython sees the angle") {
  const ShowerSimulator sim({}, Geometry::ecal51);
  std::vector<float> cells(static_cast<std::size_t>(sim.dims().product()));
  for (double deg : {60.0, 90.0, 120.0}) {
    double mean = 0;
    const int n = 20;
    for (int i = 0; i < n; ++i) {
      Rng rng(3, static_cast<std::uint64_t>(i));
      sim.simulate(100, deg * std::numbers::pi / 180, rng, cells);
      mean += measure_angle(cells, sim.dims());
    }
    mean /= n;
    MESSAGE("theta " << deg << " deg: mean measured angle " << mean * 180 / std::numbers::pi << " deg");
    // Cells are 5.1 mm wide and layers 5.6 mm deep, so the measured angle is biased towards 90;
    // it must be on the right side and within 15 degrees.
    CHECK(std::fabs(mean * 180 / std::numbers::pi - deg) < 15.0);
    if (deg < 90) CHECK(mean * 180 / std::numbers::pi < 85.0);
    if (deg > 90) CHECK(mean * 180 / std::numbers::pi > 95.0);
  }
}

TEST_CASE("simulator: same seed, same shower; another seed, another shower") {
  const ShowerSimulator sim({}, Geometry::ecal25);
  std::vector<float> a(15625), b(15625), c(15625);
  Rng r1(11, 5), r2(11, 5), r3(12, 5);
  sim.simulate(50, std::numbers::pi / 2, r1, a);
  sim.simulate(50, std::numbers::pi / 2, r2, b);
  sim.simulate(50, std::numbers::pi / 2, r3, c);
  CHECK(a == b);
  CHECK(a != c);
}
