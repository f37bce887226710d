// Early stopping (hpo/pruner.hpp) on hand-computed curves: the median rule's running averages,
// its minimum trial count, grace and the best-value variant; ASHA's rung steps, its top-1/eta cut
// at each rung as trials arrive one by one, sparse reports that cross several rungs, and the
// factory's names and option checks.
#include "mpigan/hpo/pruner.hpp"

#include "mpigan/core/error.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

using namespace mpigan;
using namespace mpigan::hpo;

namespace {

// Three complete curves and one that has reached step 1 only. Running averages:
//   step 1: a 1.0, b 1.2, c 0.9, d 1.0        (median of 4: (1.0 + 1.0) / 2 = 1.0)
//   step 2: a 0.9, b 1.1, c 0.8               (median 0.9; d has not reached step 2)
//   step 4: a 0.725, b 0.975, c 0.625         (median 0.725); best values a 0.5, b 0.8, c 0.4 (median 0.5)
const std::vector<Curve> kOthers = {
    {{1, 1.0}, {2, 0.8}, {3, 0.6}, {4, 0.5}},
    {{1, 1.2}, {2, 1.0}, {3, 0.9}, {4, 0.8}},
    {{1, 0.9}, {2, 0.7}, {3, 0.5}, {4, 0.4}},
    {{1, 1.0}},
};

PrunerOptions median_options() {
  PrunerOptions o;
  o.kind = PrunerKind::median;
  return o;
}

PrunerOptions asha_options(int eta, std::int64_t min_resource, std::int64_t max_resource) {
  PrunerOptions o;
  o.kind = PrunerKind::asha;
  o.eta = eta;
  o.min_resource = min_resource;
  o.max_resource = max_resource;
  return o;
}

}  // namespace

TEST_CASE("median pruner: stops a curve worse than the median of the others' running averages") {
  const MedianStoppingPruner pruner(median_options());
  const Curve bad = {{1, 2.0}, {2, 1.9}};
  const PruneDecision d = pruner.decide(bad, kOthers);
  CHECK(d.stop);
  CHECK(d.reason ==
        "median: best 1.9 at step 2 is worse than the median 0.9 of the running averages of 3 other trials");
  CHECK_FALSE(pruner.should_stop(Curve{{1, 1.0}, {2, 0.85}}, kOthers));  // 0.85 <= 0.9
  CHECK_FALSE(pruner.should_stop(Curve{{1, 0.9}, {2, 0.95}}, kOthers));  // its best, 0.9, is not strictly worse
  // Step 1: four trials count, median of an even count is the mean of the middle two (1.0).
  CHECK(pruner.should_stop(Curve{{1, 1.05}}, kOthers));
  CHECK_FALSE(pruner.should_stop(Curve{{1, 1.0}}, kOthers));
}

TEST_CASE("median pruner: nothing before min_trials others have reached the step, nor within the grace") {
  const MedianStoppingPruner pruner(median_options());
  // Step 5: no other trial has got there.
  CHECK_FALSE(pruner.should_stop(Curve{{1, 2.0}, {2, 1.9}, {3, 1.8}, {4, 1.7}, {5, 1.6}}, kOthers));
  // Only two others at step 2 (a and d, d never reached it): below min_trials = 3.
  const std::vector<Curve> two = {kOthers[0], kOthers[1], kOthers[3]};
  const Curve bad = {{1, 2.0}, {2, 1.9}};
  CHECK_FALSE(pruner.should_stop(bad, two));
  PrunerOptions o = median_options();
  o.min_trials = 2;
  CHECK(MedianStoppingPruner(o).should_stop(bad, two));  // median of 0.9 and 1.1 = 1.0 < 1.9
  o = median_options();
  o.grace_steps = 3;
  CHECK_FALSE(MedianStoppingPruner(o).should_stop(bad, kOthers));
  CHECK(MedianStoppingPruner(o).should_stop(Curve{{1, 2.0}, {2, 1.9}, {3, 1.8}}, kOthers));  // median 0.8 at 3
  CHECK_FALSE(pruner.should_stop(Curve{}, kOthers));
}

TEST_CASE("median pruner: the best-value statistic is stricter than the running average") {
  const Curve mine = {{1, 1.0}, {2, 0.7}, {4, 0.6}};
  CHECK_FALSE(MedianStoppingPruner(median_options()).should_stop(mine, kOthers));  // 0.6 <= 0.725
  PrunerOptions o = median_options();
  o.statistic = MedianStatistic::best;
  CHECK(MedianStoppingPruner(o).should_stop(mine, kOthers));  // 0.6 > 0.5
}

TEST_CASE("median pruner: non-finite values") {
  const MedianStoppingPruner pruner(median_options());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // The trial's own last value diverged: stop, even with no other trial.
  CHECK(pruner.should_stop(Curve{{1, 1.0}, {2, nan}}, {}));
  // Another trial's NaN counts as +inf: a's average at step 2 becomes inf, the median b's 1.1.
  std::vector<Curve> others = kOthers;
  others[0][1].value = nan;
  CHECK_FALSE(pruner.should_stop(Curve{{1, 1.2}, {2, 1.05}}, others));
  CHECK(pruner.should_stop(Curve{{1, 1.2}, {2, 1.15}}, others));
}

TEST_CASE("pruners: curves with steps out of order are an error") {
  const MedianStoppingPruner median(median_options());
  const AshaPruner asha(asha_options(3, 1, 0));
  const Curve unordered = {{1, 1.0}, {3, 0.9}, {3, 0.8}};
  CHECK_THROWS_AS(median.decide(unordered, kOthers), Error);
  CHECK_THROWS_AS(asha.decide(Curve{{1, 1.0}}, std::vector<Curve>{unordered}), Error);
  try {
    asha.decide(unordered, {});
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.message() ==
          "asha pruner: the trial's curve: steps must increase strictly, point 2 has step 3 after step 3");
  }
}

TEST_CASE("asha pruner: rung steps are min_resource * eta^k up to max_resource / eta") {
  // 81 * 3 > 100: a trial kept at 81 would have less than eta times its steps still to come.
  CHECK(AshaPruner(asha_options(3, 1, 100)).rungs() == std::vector<std::int64_t>{1, 3, 9, 27});
  CHECK(AshaPruner(asha_options(3, 1, 81)).rungs() == std::vector<std::int64_t>{1, 3, 9, 27});
  CHECK(AshaPruner(asha_options(3, 1, 80)).rungs() == std::vector<std::int64_t>{1, 3, 9});
  CHECK(AshaPruner(asha_options(4, 250, 20000)).rungs() == std::vector<std::int64_t>{250, 1000, 4000});
  // A search's trials of 200 000 samples from 64 000: one rung, not one at 192 000 (96 % spent).
  CHECK(AshaPruner(asha_options(3, 64000, 200000)).rungs() == std::vector<std::int64_t>{64000});
  CHECK(AshaPruner(asha_options(3, 64000, 192000)).rungs() == std::vector<std::int64_t>{64000});
  // No limit: every rung that fits in int64, 2^1 .. 2^62.
  const std::vector<std::int64_t> unbounded = AshaPruner(asha_options(2, 2, 0)).rungs();
  REQUIRE(unbounded.size() == 62);
  CHECK(unbounded.back() == std::int64_t{1} << 62);
}

TEST_CASE("asha: a budget has a rung when min_resource * eta fits in it, the pruner's own rungs agreeing") {
  static_assert(asha_budget_has_rung(192000, 64000, 3));
  static_assert(!asha_budget_has_rung(191999, 64000, 3));
  static_assert(!asha_budget_has_rung(1000, 1, 1));  // eta below 2: no rung structure at all
  for (std::int64_t budget : {2, 5, 6, 7, 80, 81, 100, 191999, 192000, 200000}) {
    for (int eta : {2, 3, 4}) {
      CAPTURE(budget);
      CAPTURE(eta);
      const bool has = asha_budget_has_rung(budget, 2, eta);
      if (has) {
        CHECK(!AshaPruner(asha_options(eta, 2, budget)).rungs().empty());
      } else {
        CHECK_THROWS_AS(AshaPruner(asha_options(eta, 2, budget)), ConfigError);
      }
    }
  }
}

TEST_CASE("asha pruner: asynchronous arrivals keep the top ceil(n/eta) at each rung") {
  // eta 3, rungs at 10, 30, 90, ... Trials arrive at rung 0 (step 10) one after another; each is
  // judged against the values recorded there so far, its own included, and never judged again.
  const AshaPruner pruner(asha_options(3, 10, 1000));
  std::vector<Curve> arrived;
  const auto arrive = [&](double value) {
    const Curve mine = {{5, 2.0}, {10, value}};
    const PruneDecision d = pruner.decide(mine, arrived);
    arrived.push_back(mine);
    return d;
  };
  CHECK_FALSE(arrive(0.5).stop);             // {0.5}: keep 1, cut 0.5
  const PruneDecision second = arrive(0.7);  // {0.5, 0.7}: keep 1, cut 0.5
  CHECK(second.stop);
  CHECK(second.reason == "asha: rung 0 (step 10): value 0.7 is outside the top 1 of 2 values (cut-off 0.5)");
  CHECK_FALSE(arrive(0.4).stop);   // 3 values: keep 1, cut 0.4
  CHECK_FALSE(arrive(0.45).stop);  // 4 values: keep 2, cut 0.45 (ties continue)
  CHECK(arrive(0.48).stop);        // 5 values: keep 2, cut 0.45
  CHECK_FALSE(arrive(0.3).stop);   // 6 values: keep 2, cut 0.4
  CHECK(arrive(0.6).stop);         // 7 values: keep 3, cut 0.45

  // The first trial (0.5) is no longer in the top third, but it was promoted when it arrived:
  // between rungs nothing is checked.
  const Curve first_later = {{5, 2.0}, {10, 0.5}, {20, 0.45}};
  const PruneDecision between = pruner.decide(first_later, std::vector<Curve>(arrived.begin() + 1, arrived.end()));
  CHECK_FALSE(between.stop);
  CHECK(between.reason.empty());
}

TEST_CASE("asha pruner: rung values are the best so far at the first report past the rung") {
  const AshaPruner pruner(asha_options(3, 10, 1000));
  // Other trials: rung-0 values 0.5 (its later 0.05 does not count at rung 0) and 0.3 (reported at
  // step 12, the first point past 10; its best so far is 0.3 from step 4).
  const std::vector<Curve> others = {
      {{10, 0.5}, {20, 0.1}, {30, 0.05}},
      {{4, 0.3}, {12, 0.6}},
  };
  // Rung values {0.2 (mine: best of 0.2, 0.9), 0.5, 0.3}: keep 1, cut 0.2 -> continue.
  CHECK_FALSE(pruner.should_stop(Curve{{5, 0.2}, {10, 0.9}}, others));
  // {0.35, 0.5, 0.3}: cut 0.3 -> stop.
  CHECK(pruner.should_stop(Curve{{5, 0.35}, {10, 0.9}}, others));
  // A sparse report crossing rungs 10 and 30 at once is judged at both: rung 0 {0.2, 0.5, 0.3} keeps
  // it; rung 1 has {0.2, 0.05} (only the first other reached 30): keep 1, cut 0.05 -> stop there.
  const PruneDecision d = pruner.decide(Curve{{5, 0.2}, {35, 0.25}}, others);
  CHECK(d.stop);
  CHECK(d.reason == "asha: rung 1 (step 30): value 0.2 is outside the top 1 of 2 values (cut-off 0.05)");
  // Past the last rung (270; 810 * 3 is beyond max_resource 1000): no more checks, however bad.
  const PruneDecision past = pruner.decide(Curve{{850, 0.2}, {900, 5.0}}, others);
  CHECK_FALSE(past.stop);
  CHECK(past.reason.empty());
  // Crossing 810 against a trial far better there decides nothing: 810 is no rung of a 1000 budget.
  const PruneDecision no_rung = pruner.decide(Curve{{300, 0.2}, {850, 5.0}}, std::vector<Curve>{{{820, 0.01}}});
  CHECK_FALSE(no_rung.stop);
  CHECK(no_rung.reason.empty());
  // A diverged value stops at any step.
  CHECK(pruner.should_stop(Curve{{15, std::numeric_limits<double>::infinity()}}, {}));
}

TEST_CASE("pruners: factory, names and option checks") {
  CHECK(make_pruner({})->name() == "none");
  CHECK_FALSE(make_pruner({})->should_stop(Curve{{1, NAN}}, {}));
  CHECK(make_pruner(median_options())->name() == "median");
  CHECK(make_pruner(asha_options(3, 1, 0))->name() == "asha");
  CHECK(pruner_kind_from_name("asha") == PrunerKind::asha);
  CHECK(std::string(pruner_kind_name(PrunerKind::median)) == "median");
  CHECK_THROWS_WITH_AS(pruner_kind_from_name("hyperband"),
                       doctest::Contains("'hyperband' is not one of none, median, asha"), ConfigError);
  try {
    make_pruner(asha_options(1, 0, 0));
    FAIL("no error");
  } catch (const ConfigError& e) {
    REQUIRE(e.problems().size() == 2);
    CHECK(e.problems()[0] == "asha pruner: eta must be >= 2, got 1");
    CHECK(e.problems()[1] == "asha pruner: min_resource must be >= 1, got 0");
  }
  CHECK_THROWS_AS(make_pruner(asha_options(3, 10, 10)), ConfigError);
  // A budget below min_resource * eta leaves no rung: named, not a pruner that never prunes.
  try {
    make_pruner(asha_options(3, 64000, 191999));
    FAIL("no error");
  } catch (const ConfigError& e) {
    REQUIRE(e.problems().size() == 1);
    CHECK(e.problems()[0] ==
          "asha pruner: max_resource 191999 leaves no rung: it must be 0 (no limit) or at least min_resource * eta "
          "= 64000 * 3");
  }
  PrunerOptions o = median_options();
  o.min_trials = 0;
  CHECK_THROWS_AS(make_pruner(o), ConfigError);
}
