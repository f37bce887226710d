// Statistics a physicist can trust (docs/physics.md "Statistics"): the errors of the per-bin
// response figures against their closed forms, the two-sample bootstrap against the error of a
// mean, and the default validation (compare() with its default options) on Monte Carlo:
//   (a) a generator right on average with a 3x wider E/Ep spread in each bin -> resolution pull >= 5
//   (b) a 2 % energy scale (every cell x 1.02)                               -> linearity pull >= 5
//   Monte Carlo against Monte Carlo of another seed                           -> every pull within ~3
// Samples: test_util's simulator samples, 1 800 showers of 25^3 (600 per 50/100/200 GeV bin).
#include <doctest/doctest.h>

#include "physics_test_util.hpp"

#include "mpigan/physics/compare.hpp"
#include "mpigan/physics/distortions.hpp"
#include "mpigan/physics/stats.hpp"

#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

using namespace mpigan;
using namespace mpigan::physics;
using namespace mpigan::physics::test;

namespace {

// The default validation for the test samples: every option at its default but the bin centres,
// which the samples populate only at 50, 100, 200 GeV.
CompareOptions default_validation() {
  CompareOptions o;
  o.binning.energies = kBinCentres;
  return o;
}

const Observables& obs_a() {
  static const Observables o = observables_of(reference_a());
  return o;
}

Observables distorted_b(const std::function<void(std::vector<float>&)>& distort) {
  std::vector<float> cells = reference_b().cells;
  distort(cells);
  return compute_observables(cells, reference_b().dims, reference_b().energy);
}

void print(const std::string& what, const Comparison& c) {
  MESSAGE(what << ": fpd_hlf " << c.fom.value << " +- " << c.fom.error << " (bootstrap " << c.fom.bootstrap_error
               << "), fpd_cc " << c.cc.fpd << " +- " << c.cc.fpd_error << " (bootstrap " << c.cc.fpd_bootstrap_error
               << "), kpd_cc " << c.cc.kpd << " +- " << c.cc.kpd_error << ", AUC "
               << (c.classifier ? c.classifier->auc : -1.0) << "; " << c.seconds.total() << " s");
  for (const ResponseBin& b : c.response.bins)
    MESSAGE("  " << b.bin << ": resolution " << b.resolution.gen << " / " << b.resolution.ref << " = "
                 << b.resolution.ratio << " +- " << b.resolution.ratio_error << " (pull " << b.resolution.pull
                 << "), linearity " << b.linearity.ratio << " +- " << b.linearity.ratio_error << " (pull "
                 << b.linearity.pull << "), occupancy " << b.occupancy.gen << " / " << b.occupancy.ref << " (pull "
                 << b.occupancy.pull << "), shape S " << b.shape_s << " floor " << b.shape_floor << " +- "
                 << b.shape_floor_error << " (pull " << b.shape_pull << ")");
}

}  // namespace

TEST_CASE("response statistics: mean and resolution errors against their closed forms; ratio and pull") {
  // 20 000 Gaussian values, mean 0.02, sigma 0.001 (R = 5 %): s/sqrt(n), and for a Gaussian the
  // delta method gives var(R)/R^2 = 1/(2n) + R^2/n (mu_3 = 0, mu_4 = 3 s^4). Tolerance 3 %: the
  // sample's own mu_4 fluctuates by ~sqrt(96/n)/3 ~ 2 % relative, halved by the square root.
  Rng rng(5, 0);
  std::vector<double> v(20000);
  for (double& x : v) x = 0.02 + 0.001 * rng.normal_double();
  const MomentSummary s = summarise(v);
  const double n = static_cast<double>(v.size()), R = std::sqrt(variance(v)) / mean(v);
  CHECK(s.mean == doctest::Approx(mean(v)));
  CHECK(s.mean_error == doctest::Approx(std::sqrt(variance(v) / n)));
  CHECK(s.resolution == doctest::Approx(R));
  CHECK(s.resolution_error == doctest::Approx(R * std::sqrt(1 / (2 * n) + R * R / n)).epsilon(0.03));
  // Too few values: NaN, not a made-up error.
  CHECK(std::isnan(summarise(std::vector<double>{1.0}).mean));
  CHECK(std::isnan(summarise(std::vector<double>{1.0, 2.0, 3.0}).resolution));

  // Hand example: 1.1 +- 0.03 against 1.0 +- 0.04: pull 0.1 / 0.05 = 2; ratio 1.1 with relative
  // error sqrt(0.04^2 + (0.03/1.1)^2).
  const ComparedValue c = compare_values(1.0, 0.04, 1.1, 0.03);
  CHECK(c.pull == doctest::Approx(2.0));
  CHECK(c.ratio == doctest::Approx(1.1));
  CHECK(c.ratio_error == doctest::Approx(1.1 * std::hypot(0.04, 0.03 / 1.1)));
}

TEST_CASE("bootstrap: the spread of a two-sample mean difference is the textbook error") {
  // T = mean(a) - mean(b) with sigma 1 and 2, n 400 and 900: error sqrt(1/400 + 4/900) = 0.0833.
  // 400 replicas: the standard deviation of the replicas is known to ~1/sqrt(2 * 400) = 3.5 %;
  // tolerance 10 %.
  Rng rng(9, 0);
  std::vector<double> a(400), b(900);
  for (double& x : a) x = rng.normal_double();
  for (double& x : b) x = 2.0 * rng.normal_double();
  const auto t = [&](std::span<const std::int64_t> ia, std::span<const std::int64_t> ib) {
    double sa = 0, sb = 0;
    for (auto i : ia) sa += a[static_cast<std::size_t>(i)];
    for (auto i : ib) sb += b[static_cast<std::size_t>(i)];
    return std::vector<double>{sa / static_cast<double>(ia.size()) - sb / static_cast<double>(ib.size())};
  };
  BootstrapOptions o;
  o.replicas = 400;
  const BootstrapResult r = bootstrap(400, 900, t, o);
  CHECK(r.values.size() == 400);
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0] == doctest::Approx(std::sqrt(variance(a) / 400 + variance(b) / 900)).epsilon(0.10));
  // Deterministic for a seed; replicas 0 or 1: no error.
  CHECK(bootstrap(400, 900, t, o).values == r.values);
  o.replicas = 1;
  CHECK(std::isnan(bootstrap(400, 900, t, o).errors[0]));
  // select_rows keeps repeats and order.
  FeatureMatrix m{3, 2, {1, 2, 3, 4, 5, 6}, {"a", "b"}};
  const std::vector<std::int64_t> rows{2, 0, 2};
  CHECK(select_rows(m, rows).values == std::vector<double>{5, 6, 1, 2, 5, 6});
}

TEST_CASE("distortion: scale_response_spread triples the spread of E/Ep about each group's mean, keeping it") {
  // Two showers of 1x1x2 per group, Ep 10 GeV: sums 1 and 3 (r 0.1, 0.3; mean 0.2) -> f = 3 gives
  // r' = -0.1 (clamped: 0) and 0.5; sums 2 and 2.2 (mean 0.21) -> 0.18, 0.24.
  const Dims3 dims{1, 1, 2};
  std::vector<float> cells{0.5f, 0.5f, 1.f, 2.f, 1.f, 1.f, 1.f, 1.2f};
  const std::vector<float> energy(4, 10.f);
  const std::vector<std::int64_t> group{0, 0, 1, 1};
  scale_response_spread(cells, dims, energy, group, 3.0);
  CHECK(cells[0] + cells[1] == doctest::Approx(0.0));
  CHECK(cells[2] + cells[3] == doctest::Approx(5.0));
  CHECK(cells[3] / cells[2] == doctest::Approx(2.0));  // the shower's shape is kept
  CHECK(cells[4] + cells[5] == doctest::Approx(1.8));
  CHECK(cells[6] + cells[7] == doctest::Approx(2.4));
  CHECK_THROWS(scale_response_spread(cells, dims, energy, group, 0.0));
  CHECK_THROWS(scale_response_spread(cells, dims, std::vector<float>(3, 10.f), group, 3.0));
}

TEST_CASE("default validation: Monte Carlo vs Monte Carlo is not flagged; 3x resolution and a 2 % scale are") {
  const CompareOptions o = default_validation();
  const Comparison mc = compare(obs_a(), observables_of(reference_b()), o);
  print("Monte Carlo vs Monte Carlo", mc);

  std::vector<std::int64_t> group(static_cast<std::size_t>(reference_b().events()));
  for (std::size_t i = 0; i < group.size(); ++i) group[i] = static_cast<std::int64_t>(i % kBinCentres.size());
  const Comparison wide = compare(obs_a(), distorted_b([&](std::vector<float>& c) {
                                    scale_response_spread(c, reference_b().dims, reference_b().energy, group, 3.0);
                                  }),
                                  o);
  print("E/Ep spread x 3", wide);
  const Comparison scale = compare(obs_a(), distorted_b([](std::vector<float>& c) { scale_energy(c, 1.02); }), o);
  print("cells x 1.02", scale);

  for (const Comparison* c : {&mc, &wide, &scale}) {
    REQUIRE(c->response.bins.size() == 3);
    for (const ResponseBin& b : c->response.bins) CHECK(b.n_ref == 600);
    // The CaloChallenge distances, the bootstrap errors and the classifier come by default.
    CHECK(std::isfinite(c->cc.fpd));
    CHECK(c->cc.fpd_error > 0);
    CHECK(c->cc.fpd_bootstrap_error > 0);
    CHECK(std::isfinite(c->cc.kpd));
    CHECK(c->fom.bootstrap_error > 0);
    REQUIRE(c->classifier.has_value());
  }

  // Monte Carlo vs Monte Carlo: every pull of every bin within 3.5 (12 pulls of about unit
  // spread: P(max |pull| > 3.5) ~ 0.6 %; the shape's pull is a chi^2-like S over its spread and
  // has a longer upper tail), and the distances at their floors.
  CHECK(mc.response.max_abs_pull_linearity < 3.5);
  CHECK(mc.response.max_abs_pull_resolution < 3.5);
  CHECK(mc.response.max_abs_pull_occupancy < 3.5);
  CHECK(mc.response.max_abs_pull_shape < 3.5);
  CHECK(mc.fom.value < 3 * std::max(mc.fom.error, mc.fom.bootstrap_error) + 1e-3);
  CHECK(mc.cc.fpd < 3 * std::max(mc.cc.fpd_error, mc.cc.fpd_bootstrap_error) + 1e-3);
  CHECK(mc.classifier->auc < 0.5 + 3 * mc.classifier->auc_error);

  // (a) Right on average, 3x the spread: the resolution ratio is ~3 and flagged in every bin at
  // >= 5 standard errors; the linearity is not (the mean is kept).
  for (std::size_t k = 0; k < wide.response.bins.size(); ++k) {
    const ResponseBin& b = wide.response.bins[k];
    CAPTURE(b.bin);
    CHECK(b.resolution.ratio == doctest::Approx(3.0 * mc.response.bins[k].resolution.ratio).epsilon(0.01));
    CHECK(b.resolution.pull >= 5.0);
    CHECK(std::fabs(b.linearity.pull) < 3.5);
    CHECK(b.shape_pull >= 5.0);
  }

  // (b) Every cell x 1.02: the linearity is 1.02 and flagged in every bin at >= 5 standard errors,
  // and the sampling-fraction MRE at >= 5 of its errors; the resolution is not (a scale keeps sigma/mean).
  for (std::size_t k = 0; k < scale.response.bins.size(); ++k) {
    const ResponseBin& b = scale.response.bins[k];
    CAPTURE(b.bin);
    CHECK(b.linearity.ratio == doctest::Approx(1.02 * mc.response.bins[k].linearity.ratio).epsilon(1e-4));
    CHECK(b.linearity.pull >= 5.0);
    CHECK(std::fabs(b.resolution.pull) < 3.5);
  }
  CHECK(scale.sampling_fraction.mre >= 5 * scale.sampling_fraction.error);
}

// The cost of the default validation at the default sizes, for docs/physics.md: compare() of
// 2 000 against 2 000 showers of 25^3 and of 5^3 (the 25^3 showers summed in 5^3 blocks). Not in
// the default run: mpigan_test_physics -tc="speed: compare*" --no-skip (OMP_NUM_THREADS=2).
TEST_CASE("speed: compare() of 2 000 vs 2 000 showers with the default options" * doctest::skip()) {
  const Sample a = simulate_sample(303, 667), b = simulate_sample(404, 667);
  const auto coarse = [](const Sample& s) {
    Sample c;
    c.dims = Dims3{5, 5, 5};
    c.energy = s.energy;
    c.cells.assign(static_cast<std::size_t>(s.events() * 125), 0.f);
    for (std::int64_t e = 0; e < s.events(); ++e)
      for (std::int64_t x = 0; x < 25; ++x)
        for (std::int64_t y = 0; y < 25; ++y)
          for (std::int64_t z = 0; z < 25; ++z)
            c.cells[static_cast<std::size_t>(e * 125 + ((x / 5) * 5 + y / 5) * 5 + z / 5)] +=
                s.cells[static_cast<std::size_t>(e * 15625 + (x * 25 + y) * 25 + z)];
    return c;
  };
  for (const auto& [name, ra, rb] :
       {std::tuple{std::string("25^3"), a, b}, std::tuple{std::string("5^3"), coarse(a), coarse(b)}}) {
    const Observables oa = observables_of(ra), ob = observables_of(rb);
    const auto t0 = std::chrono::steady_clock::now();
    const Comparison c = compare(oa, ob, default_validation());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    print(name, c);
    MESSAGE(name << ": compare " << s << " s: separation " << c.seconds.separation << ", response "
                 << c.seconds.response << ", FPD " << c.seconds.fpd << ", KPD " << c.seconds.kpd << ", CaloChallenge "
                 << c.seconds.calochallenge << ", bootstrap " << c.seconds.bootstrap << ", classifier "
                 << c.seconds.classifier);
    CHECK(s < 10.0);
  }
}

// Do the errors cover what moves? fpd_hlf and fpd_cc of independent pairs of Monte Carlo samples
// (and of the same pairs with the generated one 5 % wider): the spread of the values over the
// pairs against the subsampling and bootstrap errors each pair reports. Not in the default run
// (16 samples of 1 800 showers): mpigan_test_physics -tc="calibration*" --no-skip.
TEST_CASE("calibration: the spread of fpd_hlf and fpd_cc over independent Monte Carlo pairs" * doctest::skip()) {
  CompareOptions o = default_validation();
  o.separation_enabled = o.response_enabled = o.kpd_enabled = o.classifier_enabled = false;
  constexpr int kPairs = 8;
  for (const double width : {1.0, 1.05}) {
    std::vector<double> hlf, hlf_sub, hlf_boot, cc, cc_sub, cc_boot;
    for (int k = 0; k < kPairs; ++k) {
      const Sample ra = simulate_sample(1000 + 2 * static_cast<std::uint64_t>(k));
      Sample rb = simulate_sample(1001 + 2 * static_cast<std::uint64_t>(k));
      if (width != 1.0) scale_width(rb.cells, rb.dims, width);
      const Comparison c = compare(observables_of(ra), observables_of(rb), o);
      hlf.push_back(c.fom.value);
      hlf_sub.push_back(c.fom.error);
      hlf_boot.push_back(c.fom.bootstrap_error);
      cc.push_back(c.cc.fpd);
      cc_sub.push_back(c.cc.fpd_error);
      cc_boot.push_back(c.cc.fpd_bootstrap_error);
      MESSAGE("width x " << width << ", pair " << k << ": fpd_hlf " << c.fom.value << " +- " << c.fom.error
                         << " (bootstrap " << c.fom.bootstrap_error << "), fpd_cc " << c.cc.fpd << " +- "
                         << c.cc.fpd_error << " (bootstrap " << c.cc.fpd_bootstrap_error << ")");
    }
    const auto rms = [](const std::vector<double>& v) {
      double s = 0;
      for (double x : v) s += x * x;
      return std::sqrt(s / static_cast<double>(v.size()));
    };
    MESSAGE("width x " << width << ": fpd_hlf mean " << mean(hlf) << ", spread over pairs " << std::sqrt(variance(hlf))
                       << "; rms subsampling error " << rms(hlf_sub) << ", rms bootstrap error " << rms(hlf_boot));
    MESSAGE("width x " << width << ": fpd_cc mean " << mean(cc) << ", spread over pairs " << std::sqrt(variance(cc))
                       << "; rms subsampling error " << rms(cc_sub) << ", rms bootstrap error " << rms(cc_boot));
  }
}
