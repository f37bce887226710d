// Bayesian optimisation (hpo/bayes.hpp): its training data (imputed failures, constant lies), the
// constant liar and deduplication at work, mixed integer/categorical spaces, and search quality on
// Branin and Hartmann-6 against random search (median simple regret over 10 seeds).
#include "mpigan/core/error.hpp"
#include "mpigan/hpo/bayes.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <set>
#include <vector>

using namespace mpigan;
using namespace mpigan::hpo;

namespace {

Dimension real_dim(std::string key, double low, double high) {
  Dimension d;
  d.key = std::move(key);
  d.kind = DimKind::real;
  d.low = low;
  d.high = high;
  return d;
}

/// Branin on its usual domain x1 in [-5, 10], x2 in [0, 15] (the optimiser sees the unit square
/// through encode()); three global minima of 0.397887.
constexpr double kBraninMin = 0.397887357729739;
double branin(const Point& p) {
  const double pi = std::numbers::pi, x1 = p[0], x2 = p[1];
  const double a = x2 - 5.1 / (4 * pi * pi) * x1 * x1 + 5 / pi * x1 - 6;
  return a * a + 10 * (1 - 1 / (8 * pi)) * std::cos(x1) + 10;
}
SearchSpace branin_space() {
  return SearchSpace({real_dim("x1", -5, 10), real_dim("x2", 0, 15)});
}

/// Hartmann-6 on [0, 1]^6; minimum -3.32237.
constexpr double kHartmannMin = -3.32236801141551;
double hartmann6(const Point& x) {
  static const double alpha[4] = {1.0, 1.2, 3.0, 3.2};
  static const double A[4][6] = {
      {10, 3, 17, 3.5, 1.7, 8}, {0.05, 10, 17, 0.1, 8, 14}, {3, 3.5, 1.7, 10, 17, 8}, {17, 8, 0.05, 10, 0.1, 14}};
  static const double P[4][6] = {{1312, 1696, 5569, 124, 8283, 5886},
                                 {2329, 4135, 8307, 3736, 1004, 9991},
                                 {2348, 1451, 3522, 2883, 3047, 6650},
                                 {4047, 8828, 8732, 5743, 1091, 381}};
  double f = 0;
  for (int i = 0; i < 4; ++i) {
    double s = 0;
    for (int j = 0; j < 6; ++j) s += A[i][j] * (x[j] - 1e-4 * P[i][j]) * (x[j] - 1e-4 * P[i][j]);
    f -= alpha[i] * std::exp(-s);
  }
  return f;
}
SearchSpace hartmann_space() {
  std::vector<Dimension> dims;
  for (int j = 0; j < 6; ++j) dims.push_back(real_dim("x" + std::to_string(j), 0, 1));
  return SearchSpace(std::move(dims));
}

/// A sequential search of @p evals trials; returns the best value found. Every suggestion must be
/// a valid point.
double run_search(Optimizer& opt, const SearchSpace& space, const std::function<double(const Point&)>& f, int evals,
                  std::uint64_t seed) {
  Rng rng(seed, 17);
  std::vector<Observation> done;
  double best = INFINITY;
  for (int t = 0; t < evals; ++t) {
    const Point p = opt.suggest(done, {}, rng);
    REQUIRE(space.contains(p));
    done.push_back({p, f(p), false});
    best = std::min(best, done.back().y);
  }
  return best;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Regrets {
  double gp = 0, random = 0;
};

Regrets compare_with_random(const SearchSpace& space, const std::function<double(const Point&)>& f, double f_min,
                            int evals, BayesOptions options = {}) {
  std::vector<double> gp_regret, random_regret;
  for (std::uint64_t seed = 0; seed < 10; ++seed) {
    BayesOptimizer gp(space, options);
    RandomSearch random(space);
    gp_regret.push_back(run_search(gp, space, f, evals, seed) - f_min);
    random_regret.push_back(run_search(random, space, f, evals, seed) - f_min);
  }
  return {median(gp_regret), median(random_regret)};
}

std::vector<Observation> random_history(const SearchSpace& space, const std::function<double(const Point&)>& f, int n,
                                        std::uint64_t seed) {
  Rng rng(seed);
  std::vector<Observation> done;
  for (int i = 0; i < n; ++i) {
    const Point p = space.sample(rng);
    done.push_back({p, f(p), false});
  }
  return done;
}

double distance(const SearchSpace& space, const Point& a, const Point& b) {
  return (space.encode(a) - space.encode(b)).cwiseAbs().maxCoeff();
}

}  // namespace

TEST_CASE("bayes: training data impute failures with the worst value and pending trials with the lie") {
  const SearchSpace space = branin_space();
  std::vector<Observation> done = {
      {{0.0, 1.0}, 5.0, false}, {{1.0, 2.0}, -1.0, false}, {{2.0, 3.0}, 0, true}, {{3.0, 4.0}, 11.0, false}};
  const std::vector<Point> pending = {{4.0, 5.0}, {5.0, 6.0}};
  for (const auto& [liar, lie] : {std::pair{Liar::min, -1.0}, {Liar::mean, 5.0}, {Liar::max, 11.0}}) {
    CAPTURE(liar_name(liar));
    BayesOptimizer opt(space, BayesOptions{.liar = liar});
    const auto ts = opt.training_set(done, pending);
    REQUIRE(ts.X.rows() == 6);
    CHECK(ts.observed == 4);
    CHECK(ts.finished == 3);
    CHECK(ts.y[0] == 5.0);
    CHECK(ts.y[1] == -1.0);
    CHECK(ts.y[2] == 11.0);  // failed: the worst finished value
    CHECK(ts.y[3] == 11.0);
    CHECK(ts.y[4] == lie);
    CHECK(ts.y[5] == lie);
    // Rows are the encoded points: x1 = 0 is 5/15 of [-5, 10].
    CHECK(ts.X(0, 0) == doctest::Approx(5.0 / 15.0));
    CHECK(ts.X(4, 1) == doctest::Approx(5.0 / 15.0));
  }
  BayesOptimizer opt(space);
  CHECK(opt.name() == "gp");
  CHECK_THROWS_AS(opt.training_set(std::vector<Observation>{{{1.0}, 1.0, false}}, {}), Error);
  CHECK_THROWS_AS(opt.training_set(std::vector<Observation>{{{1.0, 1.0}, 1.0, true}}, {}), Error);
  CHECK_THROWS_AS(BayesOptimizer(space, BayesOptions{.xi = -1}), Error);
  CHECK_THROWS_AS(BayesOptimizer(space, BayesOptions{.n_candidates = 0}), Error);
  CHECK(acquisition_from_name("lcb") == Acquisition::lcb);
  CHECK_THROWS_AS(acquisition_from_name("ucb"), ConfigError);
  CHECK(liar_from_name("mean") == Liar::mean);
}

TEST_CASE("bayes: initial random points, then deterministic suggestions; the constant liar separates concurrent ones") {
  const SearchSpace space = branin_space();
  for (const Acquisition acq : {Acquisition::ei, Acquisition::lcb, Acquisition::hedge}) {
    CAPTURE(acquisition_name(acq));
    BayesOptimizer opt(space, BayesOptions{.acquisition = acq});
    const std::vector<Observation> done = random_history(space, branin, 12, 4);

    Rng a(3), b(3), c(3);
    const Point p1 = opt.suggest(done, {}, a);
    const Point again = opt.suggest(done, {}, b);
    CHECK(p1 == again);  // a pure function of (history, Rng)
    const std::vector<Point> pending = {p1};
    const Point p2 = opt.suggest(done, pending, c);
    CHECK(space.contains(p2));
    // Without the lie the same Rng would give p1 again, and deduplication alone only moves to the
    // next end point of the same basin (< 0.08 of the range over 6 histories when the lie is
    // disabled); with the lie the posterior collapses at p1 and the point leaves the basin (>= 0.28).
    CHECK(distance(space, p1, p2) > 0.1);
    // A third with both pending differs from both.
    Rng d(3);
    const std::vector<Point> pending2 = {p1, p2};
    const Point p3 = opt.suggest(done, pending2, d);
    CHECK(distance(space, p3, p1) > 1e-3);
    CHECK(distance(space, p3, p2) > 1e-3);
  }
  // Before n_initial trials (pending ones included) the points are random and distinct.
  BayesOptimizer opt(space, BayesOptions{.n_initial = 5});
  Rng rng(8);
  std::vector<Observation> done = random_history(space, branin, 2, 1);
  const std::vector<Point> pending = {space.sample(rng), space.sample(rng)};
  const Point p = opt.suggest(done, pending, rng);
  CHECK(space.contains(p));
  for (const Point& q : pending) CHECK(distance(space, p, q) > 1e-6);
}

TEST_CASE("bayes: integer, log and categorical dimensions; failures; no duplicate while avoidable") {
  Dimension x = real_dim("x", 0, 1);
  Dimension n;
  n.key = "n";
  n.kind = DimKind::integer;
  n.low = 1;
  n.high = 8;
  Dimension lr;
  lr.key = "lr";
  lr.kind = DimKind::log_real;
  lr.low = 1e-4;
  lr.high = 1e-1;
  Dimension c;
  c.key = "c";
  c.kind = DimKind::categorical;
  c.choices = {"a", "b", "c"};
  const SearchSpace space({x, n, lr, c});
  // Minimum 0 at x = 0.3, n = 5, lr = 10^-2.5, c = "b"; trials with n = 8 fail.
  auto f = [](const Point& p) {
    const double l = std::log10(p[2]) + 2.5;
    return (p[0] - 0.3) * (p[0] - 0.3) + 0.1 * (p[1] - 5) * (p[1] - 5) + 0.1 * l * l + (p[3] == 1 ? 0.0 : 1.0);
  };
  BayesOptimizer opt(space, BayesOptions{.n_initial = 8});
  Rng rng(21);
  std::vector<Observation> done;
  for (int t = 0; t < 30; ++t) {
    const Point p = opt.suggest(done, {}, rng);
    REQUIRE(space.contains(p));
    for (const Observation& o : done) CHECK(distance(space, p, o.x) > 1e-6);
    if (p[1] == 8)
      done.push_back({p, 0, true});
    else
      done.push_back({p, f(p), false});
  }
  const auto best = std::min_element(done.begin(), done.end(), [](const Observation& a, const Observation& b) {
    return (a.failed ? INFINITY : a.y) < (b.failed ? INFINITY : b.y);
  });
  MESSAGE("mixed space: best ", best->y, " at x=", best->x[0], " n=", best->x[1], " lr=", best->x[2],
          " c=", best->x[3]);
  CHECK(best->x[3] == 1);
  CHECK(best->x[1] >= 4);
  CHECK(best->x[1] <= 6);
  CHECK(best->y < 0.15);

  // A space of 9 points: the first 9 suggestions are all of them (no repeat while avoidable), after
  // which a repeat is unavoidable and still a valid point.
  Dimension c1 = c, c2 = c;
  c1.key = "c1";
  c2.key = "c2";
  const SearchSpace small({c1, c2});
  BayesOptimizer opt_small(small, BayesOptions{.n_initial = 3});
  std::vector<Observation> seen;
  std::set<Point> distinct;
  for (int t = 0; t < 11; ++t) {
    const Point p = opt_small.suggest(seen, {}, rng);
    REQUIRE(small.contains(p));
    if (t < 9) CHECK(distinct.insert(p).second);
    seen.push_back({p, p[0] + 2 * p[1], false});
  }
  CHECK(distinct.size() == 9);
}

TEST_CASE("bayes: Branin, median regret after 30 evaluations over 10 seeds, against random search") {
  const Regrets r = compare_with_random(branin_space(), branin, kBraninMin, 30);
  MESSAGE("Branin median simple regret after 30: gp ", r.gp, ", random ", r.random);
  CHECK(r.gp <= 0.05);
  CHECK(r.gp < 0.25 * r.random);
}

TEST_CASE("bayes: Hartmann-6, median regret after 40 evaluations over 10 seeds, against random search") {
  const Regrets r = compare_with_random(hartmann_space(), hartmann6, kHartmannMin, 40);
  MESSAGE("Hartmann-6 median simple regret after 40: gp ", r.gp, ", random ", r.random);
  CHECK(r.gp < r.random);
}
