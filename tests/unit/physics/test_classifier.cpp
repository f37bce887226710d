// The classifier test (physics/classifier.hpp): the AUC against hand-computed values, Monte Carlo
// against Monte Carlo at 0.5 within its error, distortions (transverse width, energy scale) told
// apart, more so the larger they are, the same seed giving the same AUC bit for bit on either entry
// point, and bad input named. Samples: the two 1 800-shower simulator references of
// physics_test_util.hpp (25^3, 50/100/200 GeV), so the test split holds 360 showers per class.
#include <doctest/doctest.h>

#include "physics_test_util.hpp"

#include "mpigan/core/backend.hpp"
#include "mpigan/core/error.hpp"
#include "mpigan/physics/classifier.hpp"
#include "mpigan/physics/distortions.hpp"

#include <fmt/format.h>
#include <cmath>

#include <functional>
#include <vector>

using namespace mpigan;
using namespace mpigan::physics;
using namespace mpigan::physics::test;

namespace {

const Observables& obs_a() {
  static const Observables o = observables_of(reference_a());
  return o;
}

/// Reference B (an independent Monte Carlo sample) with @p distort applied to its cells.
Observables b_with(const std::function<void(std::vector<float>&)>& distort) {
  std::vector<float> cells = reference_b().cells;
  if (distort) distort(cells);
  return compute_observables(cells, reference_b().dims, reference_b().energy);
}

Observables b_width(double f) {
  return b_with([f](std::vector<float>& c) { scale_width(c, reference_b().dims, f); });
}

Observables b_energy(double f) {
  return b_with([f](std::vector<float>& c) { scale_energy(c, f); });
}

std::string describe(const char* what, const ClassifierResult& r) {
  return fmt::format("{}: AUC {:.4f} +- {:.4f}, JSD {:.3f}, {} epochs (best {}), {:.2f} s", what, r.auc, r.auc_error,
                     r.jsd, r.epochs_run, r.best_epoch, r.seconds);
}

}  // namespace

TEST_CASE("roc_auc: hand-computed values, ties counted half") {
  // Positives 0.8, 0.4; negatives 0.5, 0.1: pairs (0.8>0.5, 0.8>0.1, 0.4<0.5, 0.4>0.1) -> 3/4.
  CHECK(roc_auc(std::vector<double>{0.8, 0.4, 0.5, 0.1}, std::vector<int>{1, 1, 0, 0}) == doctest::Approx(0.75));
  // A tie between a positive and a negative counts 1/2: (0.5=0.5 -> 1/2, 0.5>0.2 -> 1) / 2.
  CHECK(roc_auc(std::vector<double>{0.5, 0.5, 0.2}, std::vector<int>{1, 0, 0}) == doctest::Approx(0.75));
  // Ties inside one class change nothing: positives 0.7, 0.7, 0.2 vs negatives 0.5, 0.2 ->
  // (1 + 1 + 1 + 1 + 0 + 1/2) / 6 = 4.5 / 6.
  CHECK(roc_auc(std::vector<double>{0.7, 0.5, 0.7, 0.2, 0.2}, std::vector<int>{1, 0, 1, 1, 0}) ==
        doctest::Approx(0.75));
  // Perfect, inverted and uninformative separations; the order of the events does not matter.
  CHECK(roc_auc(std::vector<double>{0.9, 0.8, 0.2, 0.1}, std::vector<int>{1, 1, 0, 0}) == 1.0);
  CHECK(roc_auc(std::vector<double>{0.2, 0.9, 0.1, 0.8}, std::vector<int>{0, 1, 0, 1}) == 1.0);
  CHECK(roc_auc(std::vector<double>{0.1, 0.2, 0.8, 0.9}, std::vector<int>{1, 1, 0, 0}) == 0.0);
  CHECK(roc_auc(std::vector<double>{0.3, 0.3, 0.3, 0.3}, std::vector<int>{1, 0, 1, 0}) == 0.5);
  CHECK_THROWS_WITH_AS(roc_auc(std::vector<double>{0.3, 0.4}, std::vector<int>{1, 1}),
                       doctest::Contains("2 positives and 0 negatives"), Error);
  CHECK_THROWS_WITH_AS(roc_auc(std::vector<double>{0.3, 0.4}, std::vector<int>{1, 2}),
                       doctest::Contains("label 1 is 2"), Error);
  CHECK_THROWS_WITH_AS(roc_auc(std::vector<double>{0.3, NAN}, std::vector<int>{1, 0}),
                       doctest::Contains("score 1 is nan"), Error);
  CHECK_THROWS_WITH_AS(roc_auc(std::vector<double>{0.3}, std::vector<int>{1, 0}),
                       doctest::Contains("1 scores for 2 labels"), Error);
}

TEST_CASE("classifier: Monte Carlo vs Monte Carlo is 0.5; wider showers and a higher energy scale are told apart") {
  ClassifierOptions o;
  o.seed = 3;
  const ClassifierResult same = classifier_test(obs_a(), b_with({}), o);
  const ClassifierResult w105 = classifier_test(obs_a(), b_width(1.05), o);
  const ClassifierResult w120 = classifier_test(obs_a(), b_width(1.2), o);
  const ClassifierResult e103 = classifier_test(obs_a(), b_energy(1.03), o);
  const ClassifierResult e110 = classifier_test(obs_a(), b_energy(1.10), o);
  MESSAGE(describe("MC vs MC", same));
  MESSAGE(describe("width x1.05", w105));
  MESSAGE(describe("width x1.2", w120));
  MESSAGE(describe("energy x1.03", e103));
  MESSAGE(describe("energy x1.10", e110));

  // 1800 events per class: 1080 + 360 + 360 of each.
  CHECK(same.train_events == 2 * 1080);
  CHECK(same.validation_events == 2 * 360);
  CHECK(same.test_events == 2 * 360);
  // Indistinguishable samples: 0.5 within 3 standard errors (sigma ~ 0.022 at 360 + 360 events),
  // and a test BCE no better than guessing (JSD ~ 0).
  CHECK(std::fabs(same.auc - 0.5) < 3 * same.auc_error);
  CHECK(same.auc_error == doctest::Approx(0.0215).epsilon(0.05));
  CHECK(same.jsd < 0.05);
  // Distortions: well above 0.5, growing with their size by more than the errors.
  CHECK(w105.auc > 0.5 + 5 * w105.auc_error);
  CHECK(w120.auc > 0.95);
  CHECK(w120.auc > w105.auc + 3 * w105.auc_error);
  CHECK(w120.jsd > w105.jsd);
  CHECK(w105.jsd > same.jsd);
  CHECK(e103.auc > 0.5 + 5 * e103.auc_error);
  CHECK(e110.auc > 0.9);
  CHECK(e110.auc > e103.auc + 3 * e103.auc_error);
  CHECK(e110.jsd > e103.jsd);
}

TEST_CASE("classifier: the same seed gives the same result bit for bit, another seed another split") {
  const Observables wide = b_width(1.05);
  ClassifierOptions o;
  o.seed = 5;
  const ClassifierResult r1 = classifier_test(obs_a(), wide, o);
  const auto be = make_backend("cpu");  // the caller's backend: the same arithmetic
  const ClassifierResult r2 = classifier_test(obs_a(), wide, *be, o);
  CHECK(r2.auc == r1.auc);
  CHECK(r2.test_bce == r1.test_bce);
  CHECK(r2.epochs_run == r1.epochs_run);
  o.seed = 6;
  const ClassifierResult r3 = classifier_test(obs_a(), wide, *be, o);
  MESSAGE("width x1.05, seed 5: AUC " << r1.auc << ", seed 6: " << r3.auc);
  CHECK(r3.auc != r1.auc);
  // Another seed draws another split and other weights, not another verdict: within 4 errors.
  CHECK(std::fabs(r3.auc - r1.auc) < 4 * r1.auc_error);
  // A deeper, narrower network (layers, hidden) is built and trains to the same verdict.
  o.layers = 3;
  o.hidden = 32;
  const ClassifierResult r4 = classifier_test(obs_a(), wide, *be, o);
  MESSAGE("3 x 32 hidden: AUC " << r4.auc);
  CHECK(r4.auc > 0.5 + 5 * r4.auc_error);
}

TEST_CASE("classifier: max_events scores both classes at one size, drawn with the seed") {
  const Observables wide = b_width(1.05);
  ClassifierOptions o;
  o.seed = 5;
  const ClassifierResult all = classifier_test(obs_a(), wide, o);
  CHECK(all.train_events + all.validation_events + all.test_events == 2 * 1800);
  o.max_events = 400;
  const ClassifierResult cut = classifier_test(obs_a(), wide, o);
  // 400 of each class: 240 + 80 + 80 per class.
  CHECK(cut.train_events == 480);
  CHECK(cut.validation_events == 160);
  CHECK(cut.test_events == 160);
  MESSAGE("width x1.05: AUC " << all.auc << " on all 1 800 per class, " << cut.auc << " on 400");
  CHECK(cut.auc != all.auc);
  // A larger cap than either sample changes nothing, bit for bit.
  o.max_events = 100000;
  const ClassifierResult big = classifier_test(obs_a(), wide, o);
  CHECK(big.auc == all.auc);
  CHECK(big.test_events == all.test_events);
}

TEST_CASE("classifier: repeats average classifiers of consecutive seeds, with their spread") {
  const Observables wide = b_width(1.05);
  ClassifierOptions o;
  o.max_events = 600;
  std::vector<double> aucs;
  double hm = 0;
  for (std::uint64_t seed = 7; seed < 10; ++seed) {
    o.seed = seed;
    const ClassifierResult one = classifier_test(obs_a(), wide, o);
    CHECK(one.repeats == 1);
    CHECK(one.auc_spread == 0);
    aucs.push_back(one.auc);
    hm += one.auc_error / 3;
  }
  o.seed = 7;
  o.repeats = 3;
  const ClassifierResult r = classifier_test(obs_a(), wide, o);
  const double mean = (aucs[0] + aucs[1] + aucs[2]) / 3;
  double ss = 0;
  for (const double a : aucs) ss += (a - mean) * (a - mean);
  MESSAGE("width x1.05, 600 per class, seeds 7-9: AUC " << aucs[0] << " " << aucs[1] << " " << aucs[2]
                                                        << ", one's Hanley-McNeil error " << hm);
  CHECK(r.repeats == 3);
  CHECK(r.auc == doctest::Approx(mean).epsilon(1e-12));
  CHECK(r.auc_spread == doctest::Approx(std::sqrt(ss / 2)).epsilon(1e-12));
  CHECK(r.auc_error == doctest::Approx(hm).epsilon(1e-12));
  CHECK(r.auc_spread > 0);
  CHECK(r.test_events == 240);  // the first classifier's counts: 120 of 600 per class
}

TEST_CASE("classifier: samples too small, empty or of different shapes and bad options are named") {
  const Observables few = select_events(obs_a(), std::vector<std::int64_t>{0, 1, 2, 3, 4});
  CHECK_THROWS_WITH_AS(classifier_test(obs_a(), few), doctest::Contains("5 generated events; at least 50 of each"),
                       Error);
  const Observables none = select_events(obs_a(), std::vector<std::int64_t>{});
  CHECK_THROWS_WITH_AS(classifier_test(none, obs_a()), doctest::Contains("0 reference and 1800 generated events"),
                       Error);

  // 60 showers cut to their first 20 layers: 25x25x20, whose feature vector is shorter.
  const Sample& a = reference_a();
  const Dims3 cut{a.dims.d, a.dims.h, 20};
  std::vector<float> cells;
  for (std::int64_t e = 0; e < 60; ++e)
    for (std::int64_t xy = 0; xy < a.dims.d * a.dims.h; ++xy) {
      const auto from = a.cells.begin() + static_cast<std::ptrdiff_t>(e * a.dims.product() + xy * a.dims.w);
      cells.insert(cells.end(), from, from + cut.w);
    }
  const Observables short_showers =
      compute_observables(cells, cut, std::span(a.energy).first(static_cast<std::size_t>(60)));
  CHECK_THROWS_WITH_AS(classifier_test(obs_a(), short_showers), doctest::Contains("generated of (25,25,20)"),
                       ShapeError);

  ClassifierOptions bad;
  bad.train_fraction = 0.9;
  bad.validation_fraction = 0.1;
  CHECK_THROWS_WITH_AS(classifier_test(obs_a(), obs_a(), bad), doctest::Contains("their sum < 1"), Error);
  bad = {};
  bad.layers = 0;
  CHECK_THROWS_WITH_AS(classifier_test(obs_a(), obs_a(), bad), doctest::Contains("layers = 0"), Error);
  bad = {};
  bad.max_events = 20;
  CHECK_THROWS_WITH_AS(classifier_test(obs_a(), obs_a(), bad), doctest::Contains("max_events = 20; it must be 0"),
                       Error);
  bad = {};
  bad.repeats = 0;
  CHECK_THROWS_WITH_AS(classifier_test(obs_a(), obs_a(), bad), doctest::Contains("repeats = 0; it must be >= 1"),
                       Error);
}
