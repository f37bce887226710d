// Observables of tiny hand-built showers against values computed by hand (physics/observables.hpp):
// a 3x3x3 shower and a 4x2x5 one (unequal extents catch any mix-up of the axis order), the empty
// shower, units, the spectrum's log bins, and the batch API (order, threads, selection).
//
// Tolerances: observables are accumulated in double from float cells holding exactly
// representable values (0.5, 1, 2, 3), so sums and moments are exact to ~1e-12; profiles and
// per-layer features are stored as float (rel 1e-6).
#include <doctest/doctest.h>

#include "mpigan/core/error.hpp"
#include "mpigan/core/rng.hpp"
#include "mpigan/data/angle_measure.hpp"
#include "mpigan/data/layout.hpp"
#include "mpigan/data/simulator/shower_simulator.hpp"
#include "mpigan/physics/observables.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

using namespace mpigan;
using namespace mpigan::physics;

namespace {

struct Cell {
  std::int64_t x, y, z;
  float gev;
};

std::vector<float> shower(const Dims3& d, std::initializer_list<Cell> cells) {
  std::vector<float> v(static_cast<std::size_t>(d.product()), 0.f);
  for (const Cell& c : cells) v[static_cast<std::size_t>((c.x * d.h + c.y) * d.w + c.z)] = c.gev;
  return v;
}

const auto approx = [](double v) { return doctest::Approx(v).epsilon(1e-9); };
const auto approx_f = [](double v) { return doctest::Approx(v).epsilon(1e-6); };

}  // namespace

TEST_CASE("observables: a 3x3x3 shower against the hand computation") {
  // E = 4 GeV: (1,1,0) 2.0, (1,1,1) 1.0, (0,1,1) 0.5, (2,2,2) 0.5; Ep = 200 GeV.
  const Dims3 d{3, 3, 3};
  const auto cells = shower(d, {{1, 1, 0, 2.0f}, {1, 1, 1, 1.0f}, {0, 1, 1, 0.5f}, {2, 2, 2, 0.5f}});
  const std::vector<float> ep = {200.f};
  const Observables o = compute_observables(cells, d, ep);
  REQUIRE(o.events == 1);
  CHECK(o.ecal_sum[0] == approx(4.0));
  CHECK(o.sampling_fraction[0] == approx(0.02));
  // Profiles S_x = (0.5, 3, 0.5), S_y = (0, 3.5, 0.5), S_z = (2, 1.5, 0.5).
  const std::vector<std::vector<float>> want = {{0.5f, 3.0f, 0.5f}, {0.0f, 3.5f, 0.5f}, {2.0f, 1.5f, 0.5f}};
  for (int a = 0; a < 3; ++a) {
    const auto p = o.profile_of(a, 0);
    CHECK(std::vector<float>(p.begin(), p.end()) == want[static_cast<std::size_t>(a)]);
  }
  // m1_x = (0*0.5 + 1*3 + 2*0.5)/4 = 1; m2_x = (1*0.5 + 1*0.5)/4 = 0.25.
  CHECK(o.m1[0][0] == approx(1.0));
  CHECK(o.m2[0][0] == approx(0.25));
  // m1_y = (3.5 + 1)/4 = 1.125; m2_y = (0.125^2*3.5 + 0.875^2*0.5)/4 = 0.109375.
  CHECK(o.m1[1][0] == approx(1.125));
  CHECK(o.m2[1][0] == approx(0.109375));
  // m1_z = (1.5 + 1)/4 = 0.625; m2_z = (0.625^2*2 + 0.375^2*1.5 + 1.375^2*0.5)/4 = 0.484375.
  CHECK(o.m1[2][0] == approx(0.625));
  CHECK(o.m2[2][0] == approx(0.484375));
  CHECK(o.max_pos[0][0] == 1);
  CHECK(o.max_pos[1][0] == 1);
  CHECK(o.max_pos[2][0] == 0);
  CHECK(o.hits[0] == 4);                             // all four > 2e-4 GeV
  CHECK(o.sparsity[0] == approx(1.0 - 4.0 / 27.0));  // 4 of 27 cells > 1e-6 GeV
  CHECK(o.thirds[0][0] == approx(0.5));              // Z = 3: one layer per third
  CHECK(o.thirds[1][0] == approx(0.375));
  CHECK(o.thirds[2][0] == approx(0.125));
  // Per layer, coordinates relative to the centre (1, 1):
  // z=0: (0,0) only; z=1: 1.0 at (0,0) and 0.5 at (-1,0): c_x = -1/3, w_x^2 = 1/3 - 1/9; z=2: (1,1).
  CHECK(o.centre_x[0] == approx_f(0.0));
  CHECK(o.width_x[0] == approx_f(0.0));
  CHECK(o.layer_sparsity[0] == approx_f(1.0 - 1.0 / 9.0));
  CHECK(o.centre_x[1] == approx_f(-1.0 / 3.0));
  CHECK(o.centre_y[1] == approx_f(0.0));
  CHECK(o.width_x[1] == approx_f(std::sqrt(2.0) / 3.0));
  CHECK(o.width_y[1] == approx_f(0.0));
  CHECK(o.layer_sparsity[1] == approx_f(1.0 - 2.0 / 9.0));
  CHECK(o.centre_x[2] == approx_f(1.0));
  CHECK(o.centre_y[2] == approx_f(1.0));
  CHECK(o.layer_sparsity[2] == approx_f(1.0 - 1.0 / 9.0));
  const auto spec = o.spectrum_of(0);
  std::uint32_t counted = 0;
  for (std::uint32_t c : spec) counted += c;
  CHECK(counted == 4);
  CHECK(o.measured_angle.empty());
}

TEST_CASE("observables: a 4x2x5 shower keeps the axes apart") {
  // (3,0,4) 1.0 and (0,1,2) 3.0: flat indices 34 and 7 of the (x, y, depth) row-major order.
  const Dims3 d{4, 2, 5};
  const auto cells = shower(d, {{3, 0, 4, 1.0f}, {0, 1, 2, 3.0f}});
  REQUIRE(cells[34] == 1.0f);
  REQUIRE(cells[7] == 3.0f);
  const std::vector<float> ep = {100.f};
  const Observables o = compute_observables(cells, d, ep);
  CHECK(o.ecal_sum[0] == approx(4.0));
  CHECK(o.sampling_fraction[0] == approx(0.04));
  CHECK(o.profile_of(0, 0).size() == 4);
  CHECK(o.profile_of(1, 0).size() == 2);
  CHECK(o.profile_of(2, 0).size() == 5);
  // x: 3 at 0, 1 at 3 -> m1 = 0.75, m2 = (0.75^2*3 + 2.25^2)/4 = 1.6875.
  CHECK(o.m1[0][0] == approx(0.75));
  CHECK(o.m2[0][0] == approx(1.6875));
  // y: 1 at 0, 3 at 1 -> m1 = 0.75, m2 = (0.75^2 + 0.25^2*3)/4 = 0.1875.
  CHECK(o.m1[1][0] == approx(0.75));
  CHECK(o.m2[1][0] == approx(0.1875));
  // z: 3 at 2, 1 at 4 -> m1 = 2.5, m2 = (0.25*3 + 2.25)/4 = 0.75.
  CHECK(o.m1[2][0] == approx(2.5));
  CHECK(o.m2[2][0] == approx(0.75));
  CHECK(o.max_pos[0][0] == 0);
  CHECK(o.max_pos[1][0] == 1);
  CHECK(o.max_pos[2][0] == 2);
  // Thirds of Z = 5: [0,1), [1,3), [3,5).
  CHECK(o.thirds[0][0] == approx(0.0));
  CHECK(o.thirds[1][0] == approx(0.75));
  CHECK(o.thirds[2][0] == approx(0.25));
  // Layers 2 and 4 hold one cell each; centre (1.5, 0.5).
  CHECK(o.centre_x[2] == approx_f(-1.5));
  CHECK(o.centre_y[2] == approx_f(0.5));
  CHECK(o.centre_x[4] == approx_f(1.5));
  CHECK(o.centre_y[4] == approx_f(-0.5));
  CHECK(o.width_x[4] == approx_f(0.0));
  CHECK(o.layer_sparsity[2] == approx_f(1.0 - 1.0 / 8.0));
  // Empty layers: energy-weighted features 0, sparsity 1.
  for (int z : {0, 1, 3}) {
    CHECK(o.profile[2][static_cast<std::size_t>(z)] == 0.f);
    CHECK(o.centre_x[static_cast<std::size_t>(z)] == 0.f);
    CHECK(o.width_y[static_cast<std::size_t>(z)] == 0.f);
    CHECK(o.layer_sparsity[static_cast<std::size_t>(z)] == 1.f);
  }
  // The same image through scalar_observables(): names and values.
  const auto scalars = scalar_observables(o);
  CHECK(scalars.size() == 17 + 6 * 5);
  CHECK(scalars[0].name == "primary_energy");
  CHECK(scalars[0].value(0) == 100.0);
  CHECK(scalars[5].name == "m1_z");
  CHECK(scalars[5].value(0) == approx(2.5));
  const auto it =
      std::find_if(scalars.begin(), scalars.end(), [](const ScalarObservable& s) { return s.name == "centre_x[4]"; });
  REQUIRE(it != scalars.end());
  CHECK(it->value(0) == approx_f(1.5));
  const auto le = std::find_if(scalars.begin(), scalars.end(),
                               [](const ScalarObservable& s) { return s.name == "layer_energy[2]"; });
  REQUIRE(le != scalars.end());
  CHECK(le->value(0) == approx(3.0));
}

TEST_CASE("observables: the empty shower has zero moments, not NaN; hits and thresholds") {
  const Dims3 d{3, 3, 3};
  std::vector<float> cells(27, 0.f);
  // Second event: cells on both sides of the hit (2e-4) and sparsity (1e-6) thresholds.
  auto two = shower(d, {{0, 0, 0, 3e-4f}, {0, 0, 1, 1e-4f}, {0, 0, 2, 5e-7f}, {1, 0, 0, 2e-6f}});
  cells.insert(cells.end(), two.begin(), two.end());
  const std::vector<float> ep = {50.f, 50.f};
  const Observables o = compute_observables(cells, d, ep);
  REQUIRE(o.events == 2);
  CHECK(o.ecal_sum[0] == 0.0);
  CHECK(o.sampling_fraction[0] == 0.0);
  for (int a = 0; a < 3; ++a) {
    CHECK(o.m1[static_cast<std::size_t>(a)][0] == 0.0);
    CHECK(o.m2[static_cast<std::size_t>(a)][0] == 0.0);
    CHECK(o.max_pos[static_cast<std::size_t>(a)][0] == 0.0);
    CHECK(o.thirds[static_cast<std::size_t>(a)][0] == 0.0);
  }
  CHECK(o.hits[0] == 0);
  CHECK(o.sparsity[0] == 1.0);
  CHECK(o.hits[1] == 1);                             // only 3e-4 > 2e-4
  CHECK(o.sparsity[1] == approx(1.0 - 3.0 / 27.0));  // 3e-4, 1e-4, 2e-6 > 1e-6; 5e-7 is not
}

TEST_CASE("observables: GeV x 50 input with cell_scale 1/50 gives the GeV observables") {
  const Dims3 d{4, 2, 5};
  const auto gev = shower(d, {{3, 0, 4, 1.0f}, {0, 1, 2, 3.0f}, {1, 1, 1, 2.5e-4f}});
  std::vector<float> x50 = gev;
  for (float& c : x50) c *= 50.f;
  const std::vector<float> ep = {100.f};
  ObservableOptions opt;
  opt.cell_scale = 1.0 / 50.0;
  const Observables a = compute_observables(gev, d, ep), b = compute_observables(x50, d, ep, {}, opt);
  CHECK(b.ecal_sum[0] == doctest::Approx(a.ecal_sum[0]).epsilon(1e-7));
  CHECK(b.hits[0] == a.hits[0]);
  CHECK(b.hits[0] == 3);
  CHECK(b.m2[0][0] == doctest::Approx(a.m2[0][0]).epsilon(1e-7));
  CHECK(std::vector<std::uint32_t>(b.spectrum.begin(), b.spectrum.end()) ==
        std::vector<std::uint32_t>(a.spectrum.begin(), a.spectrum.end()));
}

TEST_CASE("observables: spectrum bins are exact log bins, with under- and overflow") {
  const SpectrumBinning b;  // 1e-7 GeV .. 100 GeV, 5 bins per decade: 45 + 2 bins
  CHECK(b.bins() == 47);
  CHECK(b.hi_gev() == doctest::Approx(100.0));
  CHECK(b.bin_of(5e-8) == 0);
  CHECK(b.bin_of(1e-7) == 1);
  CHECK(b.bin_of(3e-7) == 3);  // log10(3) * 5 = 2.39 -> third bin
  CHECK(b.bin_of(150.0) == 46);
  CHECK(b.bin_of(2.0) == 37);  // log10(2e7) * 5 = 36.5
  // The fast bin finder of compute_observables agrees with the exact edges on random log-uniform
  // cells, including values within float rounding of an edge.
  const Dims3 d{10, 10, 10};
  std::vector<float> cells(1000);
  std::uint64_t state = 12345;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = static_cast<double>(state >> 11) / 9007199254740992.0;
    cells[i] = static_cast<float>(std::pow(10.0, -8.0 + 11.0 * u));  // 1e-8 .. 1e3 GeV
    if (i % 10 == 0) cells[i] = static_cast<float>(b.edge(1 + static_cast<int>(i % 45)));
  }
  const std::vector<float> ep = {100.f};
  const Observables o = compute_observables(cells, d, ep);
  std::vector<std::uint32_t> want(47, 0);
  for (float c : cells) {
    int k = 0;
    while (k + 1 < 47 && static_cast<double>(c) >= b.edge(k + 1)) ++k;
    ++want[static_cast<std::size_t>(k)];
  }
  CHECK(std::vector<std::uint32_t>(o.spectrum.begin(), o.spectrum.end()) == want);
}

TEST_CASE("observables: batches are per-event, thread-independent, selectable; bad input is named") {
  const Dims3 d{4, 2, 5};
  const auto e0 = shower(d, {{3, 0, 4, 1.0f}, {0, 1, 2, 3.0f}});
  const auto e1 = shower(d, {{1, 1, 1, 2.0f}});
  const auto e2 = shower(d, {{2, 0, 3, 0.5f}, {2, 1, 3, 0.5f}});
  std::vector<float> cells;
  for (const auto* e : {&e0, &e1, &e2}) cells.insert(cells.end(), e->begin(), e->end());
  const std::vector<float> ep = {100.f, 20.f, 300.f}, angle = {1.5f, 1.6f, 1.7f};
  ObservableOptions one, two;
  one.threads = 1;
  two.threads = 2;
  two.measure_angle = true;
  const Observables a = compute_observables(cells, d, ep, angle, one),
                    b = compute_observables(cells, d, ep, angle, two);
  CHECK(a.m2[0] == b.m2[0]);
  CHECK(a.centre_y == b.centre_y);
  CHECK(a.spectrum == b.spectrum);
  const Observables single = compute_observables(e1, d, std::vector<float>{20.f});
  CHECK(a.m1[2][1] == single.m1[2][0]);
  CHECK(a.ecal_sum[1] == single.ecal_sum[0]);
  REQUIRE(b.measured_angle.size() == 3);
  CHECK(b.measured_angle[2] == data::measure_angle(e2, d));
  // select_events keeps every per-event field, in the order asked for.
  const std::vector<std::int64_t> pick = {2, 0};
  const Observables s = select_events(b, pick);
  CHECK(s.events == 2);
  CHECK(s.energy == std::vector<double>{300.0, 100.0});
  CHECK(s.angle[0] == doctest::Approx(1.7));
  CHECK(s.m1[0][1] == b.m1[0][0]);
  CHECK(s.measured_angle[0] == b.measured_angle[2]);
  const auto p = s.profile_of(0, 0), q = b.profile_of(0, 2);
  CHECK(std::vector<float>(p.begin(), p.end()) == std::vector<float>(q.begin(), q.end()));
  CHECK(std::equal(s.width_x.begin(), s.width_x.begin() + 5, b.width_x.begin() + 10));
  // Errors name what is wrong.
  CHECK_THROWS_AS(compute_observables(std::span<const float>(cells).first(39), d, ep), ShapeError);
  CHECK_THROWS_WITH_AS(compute_observables(cells, d, std::vector<float>{100.f, 0.f, 1.f}),
                       doctest::Contains("event 1: primary energy 0 GeV"), Error);
  CHECK_THROWS_AS(compute_observables(cells, d, ep, std::vector<float>{1.f}), ShapeError);
  CHECK_THROWS_AS(select_events(b, std::vector<std::int64_t>{3}), Error);
  std::vector<float> bad = cells;
  bad[2 * 40 + 17] = std::nanf("");
  CHECK_THROWS_WITH_AS(compute_observables(bad, d, ep), doctest::Contains("event 2 of 3 has non-finite cells"),
                       NumericError);
}

TEST_CASE("observables: 51x51x25 showers in GeV x 50, tilted, with the measured angle") {
  // The variable-angle layout: cells in GeV x 50 (data::unit_factor converts), the beam axis y.
  const data::sim::ShowerSimulator sim({}, data::Geometry::ecal51);
  const Dims3 d = sim.dims();
  REQUIRE(d == Dims3{51, 51, 25});
  const auto cells_per = static_cast<std::size_t>(d.product());
  std::vector<float> gev(3 * cells_per), x50;
  const std::vector<float> ep = {120.f, 150.f, 180.f}, theta = {1.2f, 1.5708f, 1.9f};
  for (std::size_t i = 0; i < 3; ++i) {
    Rng rng(9, i);
    sim.simulate(ep[i], theta[i], rng, std::span<float>(gev.data() + i * cells_per, cells_per));
  }
  x50 = gev;
  for (float& c : x50) c *= static_cast<float>(data::kX50);
  ObservableOptions opt;
  opt.measure_angle = true;
  const Observables a = compute_observables(gev, d, ep, theta, opt);
  opt.cell_scale = data::unit_factor(data::Units::gev_x50, data::Units::gev);
  CHECK(opt.cell_scale == doctest::Approx(0.02));
  const Observables b = compute_observables(x50, d, ep, theta, opt);
  REQUIRE(b.events == 3);
  CHECK(b.profile_of(0, 2).size() == 51);
  CHECK(b.profile_of(2, 2).size() == 25);
  for (std::size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    // Same showers, same physics: the sums agree to float rounding of the x50 cells.
    CHECK(b.ecal_sum[i] == doctest::Approx(a.ecal_sum[i]).epsilon(1e-6));
    CHECK(b.sampling_fraction[i] == doctest::Approx(0.02).epsilon(0.2));  // raw SF ~ 2 %
    CHECK(b.hits[i] == a.hits[i]);
    CHECK(b.m1[1][i] == doctest::Approx(a.m1[1][i]).epsilon(1e-6));
    // The window is centred on the shower: the first moments sit near cell 25.
    CHECK(std::fabs(b.m1[0][i] - 25.0) < 1.5);
    CHECK(b.measured_angle[i] == data::measure_angle(std::span<const float>(x50.data() + i * cells_per, cells_per), d));
  }
  // Tilt: theta < 90 degrees drifts the shower to larger y with depth, so the measured angles
  // order like the true ones.
  CHECK(b.measured_angle[0] < b.measured_angle[1]);
  CHECK(b.measured_angle[1] < b.measured_angle[2]);
  const auto scalars = scalar_observables(b);
  CHECK(scalars[17].name == "measured_angle");
}
