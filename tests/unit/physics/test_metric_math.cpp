// The metrics' building blocks against closed forms and hand computations: separation power,
// common binning, quantiles, the non-negative line fit, the Frechet distance (1-D, commuting and
// non-commuting 2x2 covariances), the unbiased polynomial MMD^2, bins, feature scaling, and the
// distortions on hand-built showers.
//
// Tolerances: closed forms are evaluated in double; 1e-12 relative unless an eigen-solver is
// involved (1e-9: its iterations stop at machine precision times the matrix norm).
#include <doctest/doctest.h>

#include "mpigan/core/error.hpp"
#include "mpigan/physics/binning.hpp"
#include "mpigan/physics/distortions.hpp"
#include "mpigan/physics/features.hpp"
#include "mpigan/physics/frechet.hpp"
#include "mpigan/physics/histogram.hpp"
#include "mpigan/physics/kernel_distance.hpp"
#include "mpigan/physics/observables.hpp"
#include "mpigan/physics/stats.hpp"

#include <cmath>
#include <set>
#include <vector>

using namespace mpigan;
using namespace mpigan::physics;

TEST_CASE("separation power: identical 0, disjoint 1, a hand example, empty NaN") {
  const std::vector<double> a = {1, 1}, b = {1, 3}, c = {2, 2}, d = {0, 5}, e = {5, 0}, z = {0, 0};
  CHECK(separation_power(a, c) == 0.0);  // same shape, other normalisation
  CHECK(separation_power(d, e) == doctest::Approx(1.0).epsilon(1e-12));
  // p = (1/2, 1/2), q = (1/4, 3/4): 1/2 (1/16 / (3/4) + 1/16 / (5/4)) = 1/15.
  CHECK(separation_power(a, b) == doctest::Approx(1.0 / 15.0).epsilon(1e-12));
  CHECK(std::isnan(separation_power(a, z)));
  CHECK_THROWS_AS(separation_power(a, std::vector<double>{1, 2, 3}), ShapeError);
}

TEST_CASE("histogram: equal bins, overflow folded into the edge bins, NaN skipped, common range") {
  Histogram h(4, 0.0, 2.0);
  h.fill(std::vector<double>{-5.0, 0.1, 0.6, 1.99, 2.0, 7.0, std::nan("")});
  CHECK(h.counts() == std::vector<double>{2, 1, 0, 3});
  CHECK(h.total() == 6);
  Histogram flat(3, 1.0, 1.0);  // a constant observable: one bin around it
  flat.fill(1.0);
  CHECK(flat.lo() == 0.5);
  CHECK(flat.counts()[1] == 1);
  std::vector<double> a, b;
  for (int i = 0; i <= 1000; ++i) a.push_back(i);
  for (int i = 0; i <= 1000; ++i) b.push_back(500 + i);
  const auto [lo, hi] = common_range(a, b, 0.005);
  CHECK(lo == doctest::Approx(5.0));     // 0.5 % quantile of a
  CHECK(hi == doctest::Approx(1495.0));  // 99.5 % quantile of b
}

TEST_CASE("stats: numpy quantiles, variance, the non-negative line fit") {
  const std::vector<double> v = {4, 1, 3, 2};
  CHECK(quantile(v, 0.5) == 2.5);
  CHECK(quantile(v, 0.25) == 1.75);  // np.quantile([1,2,3,4], .25)
  CHECK(quantile(v, 1.0) == 4.0);
  CHECK(mean(v) == 2.5);
  CHECK(variance(v) == doctest::Approx(5.0 / 3.0));
  // Exact line y = 2 + 3x.
  const std::vector<double> x = {1, 2, 3, 4}, y = {5, 8, 11, 14};
  LineFit f = fit_line_nonnegative(x, y);
  CHECK(f.intercept == doctest::Approx(2.0));
  CHECK(f.slope == doctest::Approx(3.0));
  CHECK(f.intercept_error == doctest::Approx(0.0));
  // y = -1 + 3x would need a negative intercept: fit through the origin, slope sum xy / sum x^2.
  const std::vector<double> x3 = {1, 2, 3}, y3 = {2, 5, 8};
  f = fit_line_nonnegative(x3, y3);
  CHECK(f.intercept == 0.0);
  CHECK(f.slope == doctest::Approx(36.0 / 14.0));
  // Falling data would need a negative slope: the constant mean.
  const std::vector<double> yd = {3, 2, 1};
  f = fit_line_nonnegative(x3, yd);
  CHECK(f.slope == 0.0);
  CHECK(f.intercept == doctest::Approx(2.0));
  Rng rng(1, 2);
  const auto s = sample_without_replacement(10, 7, rng);
  CHECK(std::set<std::int64_t>(s.begin(), s.end()).size() == 7);
  CHECK(sample_without_replacement(5, 9, rng).size() == 5);
}

TEST_CASE("frechet distance: closed forms in 1-D and for commuting and non-commuting 2x2 covariances") {
  // 1-D: (mu1 - mu2)^2 + (sigma1 - sigma2)^2 = 4 + 1.
  CHECK(frechet_distance(std::vector<double>{0}, std::vector<double>{1}, std::vector<double>{2},
                         std::vector<double>{4}) == doctest::Approx(5.0).epsilon(1e-9));
  // Diagonal: sum (sigma1_i - sigma2_i)^2 = (1 - 3)^2 + (2 - 2)^2, plus |dmu|^2 = 1 + 1.
  CHECK(frechet_distance(std::vector<double>{0, 0}, std::vector<double>{1, 0, 0, 4}, std::vector<double>{1, 1},
                         std::vector<double>{9, 0, 0, 4}) == doctest::Approx(6.0).epsilon(1e-9));
  // A = [[2,1],[1,2]], B = diag(1, 3) do not commute. For 2x2 PSD matrices
  // tr sqrt(A^1/2 B A^1/2) = sqrt(tr(AB) + 2 sqrt(det(AB))) = sqrt(8 + 2*3), so
  // FD = tr A + tr B - 2 sqrt(14).
  const std::vector<double> mu = {0, 0}, A = {2, 1, 1, 2}, B = {1, 0, 0, 3};
  CHECK(frechet_distance(mu, A, mu, B) == doctest::Approx(8.0 - 2.0 * std::sqrt(14.0)).epsilon(1e-9));
  CHECK(frechet_distance(mu, A, mu, A) == doctest::Approx(0.0).scale(1.0).epsilon(1e-9));
  // A singular covariance (a constant feature) is fine.
  CHECK(frechet_distance(mu, std::vector<double>{1, 0, 0, 0}, mu, std::vector<double>{4, 0, 0, 0}) ==
        doctest::Approx(1.0).epsilon(1e-9));
  FeatureMatrix m;
  m.rows = 4;
  m.cols = 2;
  m.values = {0, 1, 1, 0, 2, 2, 3, 1};
  CHECK(frechet_distance(m, m) == doctest::Approx(0.0).scale(1.0).epsilon(1e-9));
}

TEST_CASE("kpd: the unbiased MMD^2 of a hand example, degrees 1 and 2") {
  // X = {0, 1}, Y = {1, 2}, one feature, k = (x y + 1)^p.
  // p = 1: XX off-diagonal 1, YY off-diagonal 3, XY mean (1 + 1 + 2 + 3)/4: 1 + 3 - 2*7/4 = 0.5.
  // p = 2: 1 + 9 - 2 (1 + 1 + 4 + 9)/4 = 2.5.
  FeatureMatrix x, y;
  x.rows = y.rows = 2;
  x.cols = y.cols = 1;
  x.values = {0, 1};
  y.values = {1, 2};
  CHECK(mmd2_unbiased_polynomial(x, y, 1) == doctest::Approx(0.5).epsilon(1e-12));
  CHECK(mmd2_unbiased_polynomial(x, y, 2) == doctest::Approx(2.5).epsilon(1e-12));
  // Blocked sums: 600 rows span three Gram blocks; equal to the direct double loop.
  FeatureMatrix a, b;
  a.rows = 600;
  b.rows = 300;
  a.cols = b.cols = 3;
  Rng rng(5, 6);
  for (int i = 0; i < 1800; ++i) a.values.push_back(rng.normal_double());
  for (int i = 0; i < 900; ++i) b.values.push_back(0.5 + rng.normal_double());
  auto k = [](const FeatureMatrix& p, std::int64_t i, const FeatureMatrix& q, std::int64_t j) {
    double dot = 0;
    for (int c = 0; c < 3; ++c) dot += p.at(i, c) * q.at(j, c);
    return std::pow(dot / 3.0 + 1.0, 4);
  };
  double xx = 0, yy = 0, xy = 0;
  for (std::int64_t i = 0; i < 600; ++i) {
    for (std::int64_t j = 0; j < 600; ++j) xx += i != j ? k(a, i, a, j) : 0.0;
    for (std::int64_t j = 0; j < 300; ++j) xy += k(a, i, b, j);
  }
  for (std::int64_t i = 0; i < 300; ++i) {
    for (std::int64_t j = 0; j < 300; ++j) yy += i != j ? k(b, i, b, j) : 0.0;
  }
  const double want = xx / (600.0 * 599) + yy / (300.0 * 299) - 2 * xy / (600.0 * 300);
  // The Gram blocks are float (kernel_distance.cpp): each kernel value is good to ~1e-6 relative
  // and the sums are double, so 1e-5 relative.
  CHECK(mmd2_unbiased_polynomial(a, b, 4) == doctest::Approx(want).epsilon(1e-5));
}

TEST_CASE("bins: the reference's open +-5 GeV windows, angle windows, halves") {
  const auto bins = make_bins({});
  REQUIRE(bins.size() == 6);
  CHECK(bins[0].label == "50 GeV");
  CHECK(bins[5].label == "500 GeV");
  CHECK(bins[1].contains(104.9, 0));
  CHECK_FALSE(bins[1].contains(105.0, 0));  // open interval, as np.where((y > E-5) & (y < E+5))
  BinningOptions o;
  o.energies = {100};
  o.angles = {1.0, 1.5};
  o.all = true;
  const auto ba = make_bins(o);
  REQUIRE(ba.size() == 3);
  CHECK(ba[0].label == "all");
  CHECK(ba[2].uses_angle());
  CHECK(ba[2].contains(100, 1.55));
  CHECK_FALSE(ba[2].contains(100, 1.65));
  o.energy_half_width = 0;
  CHECK_THROWS_AS(make_bins(o), ConfigError);
  // Selection on observables of three one-cell showers.
  const Dims3 d{2, 2, 2};
  std::vector<float> cells(24, 0.f);
  cells[0] = cells[8] = cells[16] = 1.f;
  const Observables obs = compute_observables(cells, d, std::vector<float>{99.f, 150.f, 101.f});
  CHECK(select_bin(obs, bins[1]) == std::vector<std::int64_t>{0, 2});
  CHECK_THROWS_AS(select_bin(obs, ba[1]), Error);  // angle bins need angles
  std::vector<std::int64_t> ev(11);
  for (int i = 0; i < 11; ++i) ev[static_cast<std::size_t>(i)] = i;
  const auto [h1, h2] = split_halves(ev, 3);
  CHECK(h1.size() == 5);
  CHECK(h2.size() == 6);
  std::set<std::int64_t> all(h1.begin(), h1.end());
  all.insert(h2.begin(), h2.end());
  CHECK(all.size() == 11);
}

TEST_CASE("features: names and values, scaling fitted on the reference") {
  const Dims3 d{3, 3, 2};
  std::vector<float> cells(36, 0.f);
  cells[(1 * 3 + 1) * 2 + 0] = 1.f;        // event 0: 1 GeV in layer 0 at the centre
  cells[18 + (2 * 3 + 1) * 2 + 1] = 10.f;  // event 1: 10 GeV in layer 1 at x = 2
  const Observables o = compute_observables(cells, d, std::vector<float>{100.f, 1000.f});
  const FeatureMatrix f = high_level_features(o);
  REQUIRE(f.cols == 2 + 5 * 2);
  CHECK(f.names[0] == "log10_primary_energy");
  CHECK(f.names[1] == "log10_sampling_fraction");
  CHECK(f.names[7] == "log10_layer_energy_over_ep[1]");
  CHECK(f.at(0, 0) == doctest::Approx(2.0));
  CHECK(f.at(0, 1) == doctest::Approx(-2.0));   // SF = 1 / 100
  CHECK(f.at(1, 1) == doctest::Approx(-2.0));   // SF = 10 / 1000
  CHECK(f.at(0, 2) == doctest::Approx(-2.0));   // log10((1 + 1e-8) / 100)
  CHECK(f.at(0, 7) == doctest::Approx(-10.0));  // empty layer 1: log10(1e-8 / 100)
  CHECK(f.at(1, 8) == doctest::Approx(1.0));    // centre_x[1] = 2 - 1
  FeatureOptions with_sparsity;
  with_sparsity.sparsity = true;
  const FeatureMatrix fs = high_level_features(o, with_sparsity);
  REQUIRE(fs.cols == 2 + 6 * 2);
  CHECK(fs.names[7] == "sparsity[0]");
  CHECK(fs.at(0, 7) == doctest::Approx(1.0 - 1.0 / 9));
  FeatureMatrix g = f;
  const FeatureScaler s = FeatureScaler::fit(f, FeatureScaling::standardise);
  s.apply(g);
  CHECK(g.at(0, 0) == doctest::Approx(-1.0 / std::sqrt(2.0)));  // (2 - 2.5) / std(2, 3)
  CHECK(g.at(1, 0) == doctest::Approx(1.0 / std::sqrt(2.0)));
  CHECK(g.at(0, 4) == 0.0);  // centre_y[0] is 0 in both events: zero spread keeps scale 1
  FeatureMatrix h = f;
  FeatureScaler::fit(f, FeatureScaling::max_abs).apply(h);
  CHECK(h.at(0, 0) == doctest::Approx(2.0 / 3.0));
  CHECK(h.at(0, 7) == doctest::Approx(-1.0));
}

TEST_CASE("distortions: energy scale, depth shift, width scale, dropped high-energy events") {
  const Dims3 d{5, 5, 4};
  std::vector<float> cells(100, 0.f);
  auto at = [&](std::int64_t x, std::int64_t y, std::int64_t z) -> float& {
    return cells[static_cast<std::size_t>((x * 5 + y) * 4 + z)];
  };
  at(2, 2, 0) = 4.f;
  at(1, 2, 1) = 2.f;
  at(3, 2, 1) = 2.f;
  at(2, 2, 3) = 1.f;
  std::vector<float> scaled = cells;
  scale_energy(scaled, 1.03);
  CHECK(scaled[static_cast<std::size_t>((2 * 5 + 2) * 4)] == doctest::Approx(4.12));
  // One layer deeper: the last layer's energy leaves; half a layer: half of each moves.
  std::vector<float> deep = cells;
  shift_depth(deep, d, 1.0);
  CHECK(deep[static_cast<std::size_t>((2 * 5 + 2) * 4 + 1)] == 4.f);
  CHECK(deep[static_cast<std::size_t>((1 * 5 + 2) * 4 + 2)] == 2.f);
  CHECK(deep[static_cast<std::size_t>((2 * 5 + 2) * 4 + 0)] == 0.f);
  std::vector<float> half = cells;
  shift_depth(half, d, 0.5);
  CHECK(half[static_cast<std::size_t>((2 * 5 + 2) * 4 + 0)] == 2.f);
  CHECK(half[static_cast<std::size_t>((2 * 5 + 2) * 4 + 1)] == 2.f);
  CHECK(half[static_cast<std::size_t>((2 * 5 + 2) * 4 + 3)] == 0.5f);  // half of layer 3 leaks out
  // Width x 2 about the barycentre (2.5, 2.5), cell i covering [i, i+1) -> [2.5 + 2 (i - 2.5), + 2):
  // cell 1 -> [-0.5, 1.5): 1/4 leaves the window, 1/2 to cell 0, 1/4 to cell 1; cell 2 ->
  // [1.5, 3.5): 1/4, 1/2, 1/4 to cells 1, 2, 3; cell 3 -> [3.5, 5.5): 1/4 to cell 3, 1/2 to cell
  // 4, 1/4 leaves. In y every cell is at y = 2: 1/4, 1/2, 1/4 to y = 1, 2, 3.
  std::vector<float> wide = cells;
  scale_width(wide, d, 2.0);
  double total = 0;
  for (float c : wide) total += c;
  CHECK(total == doctest::Approx(9.0 - 2 * 2.0 / 4));  // layer 1's cells 1 and 3 lose 1/4 each
  auto wat = [&](std::int64_t x, std::int64_t y, std::int64_t z) {
    return wide[static_cast<std::size_t>((x * 5 + y) * 4 + z)];
  };
  CHECK(wat(2, 2, 0) == doctest::Approx(4.0 * 0.5 * 0.5));  // 1/2 in x times 1/2 in y
  CHECK(wat(1, 2, 0) == doctest::Approx(4.0 * 0.25 * 0.5));
  CHECK(wat(0, 2, 1) == doctest::Approx(2.0 * 0.5 * 0.5));
  CHECK(wat(4, 1, 1) == doctest::Approx(2.0 * 0.5 * 0.25));
  const Observables o0 = compute_observables(cells, d, std::vector<float>{100.f});
  const Observables o1 = compute_observables(wide, d, std::vector<float>{100.f});
  CHECK(o1.m2[0][0] > 3.0 * o0.m2[0][0]);              // second moment ~ f^2 (plus the cell width's share)
  CHECK(o1.m1[1][0] == doctest::Approx(o0.m1[1][0]));  // y: symmetric, nothing leaves
  // Dropping the top third by energy.
  const std::vector<float> e = {50, 500, 100, 300, 200, 400};
  CHECK(drop_highest_energy(e, 1.0 / 3.0) == std::vector<std::int64_t>{0, 2, 3, 4});
  CHECK(drop_highest_energy(e, 0.0).size() == 6);
  CHECK_THROWS_AS(shift_depth(std::span<float>(cells).first(99), d, 1.0), ShapeError);
}
