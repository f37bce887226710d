// The classifier test (physics/classifier.hpp): the AUC against hand-computed values, Monte Carlo
// against Monte Carlo at 0.5 within its error, distortions told apart, more so the larger they are,
// the same seed giving the same AUC, and bad input named.
#include <doctest/doctest.h>

#include "physics_test_util.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/physics/classifier.hpp"
#include "mpigan/physics/distortions.hpp"

#include <vector>

using namespace mpigan;
using namespace mpigan::physics;
using namespace mpigan::physics::test;

namespace {

const Observables& obs_a() {
  static const Observables o = observables_of(reference_a());
  return o;
}

Observables b_with(double width) {
  std::vector<float> cells = reference_b().cells;
  if (width != 1.0) scale_width(cells, reference_b().dims, width);
  return compute_observables(cells, reference_b().dims, reference_b().energy);
}

}  // namespace

TEST_CASE("roc_auc: hand-computed values, ties counted half") {
  // Positives 0.8, 0.4; negatives 0.5, 0.1: pairs (0.8>0.5, 0.8>0.1, 0.4<0.5, 0.4>0.1) -> 3/4.
  CHECK(roc_auc(std::vector<double>{0.8, 0.4, 0.5, 0.1}, std::vector<int>{1, 1, 0, 0}) == doctest::Approx(0.75));
  // A tie between a positive and a negative counts 1/2: (0.5=0.5 -> 1/2, 0.5>0.2 -> 1) / 2.
  CHECK(roc_auc(std::vector<double>{0.5, 0.5, 0.2}, std::vector<int>{1, 0, 0}) == doctest::Approx(0.75));
  CHECK(roc_auc(std::vector<double>{0.9, 0.8, 0.2, 0.1}, std::vector<int>{1, 1, 0, 0}) == 1.0);
  CHECK(roc_auc(std::vector<double>{0.1, 0.2, 0.8, 0.9}, std::vector<int>{1, 1, 0, 0}) == 0.0);
  CHECK(roc_auc(std::vector<double>{0.3, 0.3, 0.3, 0.3}, std::vector<int>{1, 0, 1, 0}) == 0.5);
  CHECK_THROWS_AS(roc_auc(std::vector<double>{0.3, 0.4}, std::vector<int>{1, 1}), Error);
}

TEST_CASE("classifier: Monte Carlo vs Monte Carlo is 0.5, a wider shower is told apart, monotonically") {
  ClassifierOptions o;
  o.seed = 3;
  const ClassifierResult same = classifier_test(obs_a(), b_with(1.0), o);
  const ClassifierResult small = classifier_test(obs_a(), b_with(1.05), o);
  const ClassifierResult large = classifier_test(obs_a(), b_with(1.2), o);
  MESSAGE("AUC MC vs MC " << same.auc << " +- " << same.auc_error << " (JSD " << same.jsd << ", " << same.epochs_run
                          << " epochs, " << same.seconds << " s); width x1.05 " << small.auc << " +- "
                          << small.auc_error << "; x1.2 " << large.auc << " +- " << large.auc_error << " (JSD "
                          << large.jsd << ")");
  CHECK(same.test_events == 2 * 1800 - 2 * 1800 * 6 / 10 - 2 * 1800 * 2 / 10);
  CHECK(std::fabs(same.auc - 0.5) < 3 * same.auc_error + 0.02);
  CHECK(same.jsd < 0.05);
  CHECK(large.auc > 0.75);
  CHECK(large.auc > small.auc + 3 * large.auc_error);
  CHECK(small.auc > same.auc);
  CHECK(large.jsd > same.jsd);
  // The same seed, the same result, bit for bit.
  CHECK(classifier_test(obs_a(), b_with(1.2), o).auc == large.auc);
}

TEST_CASE("classifier: samples too small or of different shapes are named") {
  const Observables few = select_events(obs_a(), std::vector<std::int64_t>{0, 1, 2, 3, 4});
  CHECK_THROWS_WITH_AS(classifier_test(obs_a(), few), doctest::Contains("at least 50 of each"), Error);
}
