// The evolutionary search (hpo/evolution.hpp): its parent pool and mutation schedule against
// hand-computed values, its operators on every kind of dimension, the bugs of mpi-opt it must not
// have (objectives <= 0, exactly 0.0, failed trials, categorical dimensions), determinism for a
// seed, and that it improves on a mixed real / log / integer / categorical test function when
// trials finish out of order.
#include "mpigan/hpo/evolution.hpp"

#include "mpigan/core/error.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

using namespace mpigan;
using namespace mpigan::hpo;

namespace {

/// One dimension of each kind; the optimum of test_function is (0.3, 1e-3, 7, 64, choice 1), value 0.
SearchSpace mixed_space() {
  return SearchSpace({
      {.key = "x", .kind = DimKind::real, .low = 0, .high = 1},
      {.key = "lr", .kind = DimKind::log_real, .low = 1e-5, .high = 1e-1},
      {.key = "n", .kind = DimKind::integer, .low = 0, .high = 20},
      {.key = "batch", .kind = DimKind::log_integer, .low = 4, .high = 1024},
      {.key = "c", .kind = DimKind::categorical, .choices = {"a", "b", "c", "d"}},
  });
}

/// (x-0.3)^2 + (log10 lr + 3)^2/16 + (n-7)^2/100 + (log2 batch - 6)^2/64 + penalty[c]: every term
/// at most about 0.6, so no single dimension dominates the ranking.
double test_function(const Point& p) {
  constexpr double penalty[] = {0.4, 0.0, 0.25, 0.6};
  const double lr = std::log10(p[1]) + 3, batch = std::log2(p[3]) - 6;
  return (p[0] - 0.3) * (p[0] - 0.3) + lr * lr / 16 + (p[2] - 7) * (p[2] - 7) / 100 + batch * batch / 64 +
         penalty[static_cast<int>(p[4])];
}

struct Trial {
  Point x;
  double y = 0;
  bool failed = false;
};

struct Simulation {
  std::vector<Trial> trials;  ///< in the order they were handed out
  bool all_contained = true;  ///< every suggestion passed SearchSpace::contains()
};

/// An asynchronous study: up to @p in_flight trials run at once and a random one of them (drawn
/// from a stream of its own) finishes next, so `done` is not in hand-out order.
Simulation simulate(
    const SearchSpace& space, const EvolutionOptions& options, std::uint64_t seed, int trials, int in_flight,
    const std::function<double(const Point&)>& f,
    const std::function<bool(const Point&)>& fails = [](const Point&) { return false; }) {
  EvolutionSearch search(space, options);
  Rng rng(seed, 0), finish_order(seed, 1);
  Simulation sim;
  std::vector<Observation> done;
  std::vector<std::size_t> running;  // trial indices
  while (static_cast<int>(sim.trials.size()) < trials || !running.empty()) {
    while (static_cast<int>(running.size()) < in_flight && static_cast<int>(sim.trials.size()) < trials) {
      std::vector<Point> pending;
      for (const std::size_t t : running) pending.push_back(sim.trials[t].x);
      Point x = search.suggest(done, pending, rng);
      sim.all_contained = sim.all_contained && space.contains(x);
      sim.trials.push_back({x, f(x), fails(x)});
      running.push_back(sim.trials.size() - 1);
    }
    const auto pick = static_cast<std::ptrdiff_t>(finish_order.below(running.size()));
    const Trial& t = sim.trials[running[static_cast<std::size_t>(pick)]];
    done.push_back({t.x, t.failed ? 0.0 : t.y, t.failed});
    running.erase(running.begin() + pick);
  }
  return sim;
}

double median(std::vector<double> v) {
  std::ranges::sort(v);
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Objective values of generation @p g (trials g*P .. g*P+P-1 in hand-out order), failed left out.
std::vector<double> generation_values(const Simulation& sim, int population, int g) {
  std::vector<double> v;
  for (int i = g * population; i < (g + 1) * population; ++i) {
    const Trial& t = sim.trials[static_cast<std::size_t>(i)];
    if (!t.failed) v.push_back(t.y);
  }
  return v;
}

/// The points suggested from a fixed history, one per seed (the operators' distribution).
std::vector<Point> children(const SearchSpace& space, const EvolutionOptions& options,
                            const std::vector<Observation>& done, int count) {
  EvolutionSearch search(space, options);
  std::vector<Point> out;
  for (int s = 0; s < count; ++s) {
    Rng rng(1000 + static_cast<std::uint64_t>(s));
    out.push_back(search.suggest(done, {}, rng));
  }
  return out;
}

}  // namespace

TEST_CASE("evolution: the parent pool ranks by objective, keeps 0.0 and negatives, leaves out failures") {
  const std::vector<Observation> done = {
      {{0.1}, 2.5, false}, {{0.2}, 0.0, false}, {{0.3}, -1.0, false},  {{0.4}, 99.0, true},
      {{0.5}, NAN, false}, {{0.6}, 0.0, false}, {{0.7}, 1e-12, false},
  };
  // -1 < 0.0 (trial 1) = 0.0 (trial 5, later) < 1e-12 < 2.5; the failed and the NaN trial never enter.
  CHECK(parent_pool(done, 10) == std::vector<std::size_t>{2, 1, 5, 6, 0});
  CHECK(parent_pool(done, 3) == std::vector<std::size_t>{2, 1, 5});
  CHECK(parent_pool({}, 3).empty());
}

TEST_CASE("evolution: the mutation exponent shrinks as (1 - g/G)^b down to its floor") {
  EvolutionOptions o;  // G = 10, b = 3, floor 0.02
  CHECK(mutation_exponent(0, o) == doctest::Approx(1.0));
  CHECK(mutation_exponent(5, o) == doctest::Approx(0.125));
  CHECK(mutation_exponent(7, o) == doctest::Approx(0.027));
  CHECK(mutation_exponent(8, o) == doctest::Approx(0.02));  // 0.008 is below the floor
  CHECK(mutation_exponent(50, o) == doctest::Approx(0.02));
  o.generations = 4;
  o.mutation_shape = 1;
  CHECK(mutation_exponent(1, o) == doctest::Approx(0.75));
}

TEST_CASE("evolution: options are validated, every problem named") {
  EvolutionOptions o;
  o.population = 1;
  o.tournament = 0;
  o.mutation_rate = 1.5;
  try {
    EvolutionSearch search(mixed_space(), o);
    FAIL("no error for bad options");
  } catch (const ConfigError& e) {
    REQUIRE(e.problems().size() == 3);
    CHECK(e.problems()[0] == "evolution: population must be >= 2, got 1");
    CHECK(e.problems()[1] == "evolution: tournament must be >= 1, got 0");
    CHECK(e.problems()[2] == "evolution: mutation_rate must be in [0, 1], got 1.5");
  }
  CHECK(EvolutionSearch(mixed_space()).mutation_rate() == doctest::Approx(0.2));  // 1 / 5 dimensions
  CHECK(EvolutionSearch(mixed_space()).name() == "evolution");

  EvolutionSearch search(mixed_space());
  Rng rng(1);
  const std::vector<Observation> wrong = {{{0.5, 1e-3}, 1.0, false}};
  CHECK_THROWS_AS(search.suggest(wrong, {}, rng), Error);
}

TEST_CASE("evolution: the first P suggestions are the space's random draws") {
  const SearchSpace space = mixed_space();
  EvolutionSearch search(space, {.population = 4});
  Rng a(7), b(7);
  std::vector<Point> pending;
  for (int i = 0; i < 4; ++i) {
    const Point p = search.suggest({}, pending, a);
    CHECK(p == space.sample(b));
    pending.push_back(p);
  }
}

TEST_CASE("evolution: crossover interpolates each kind of dimension between the parents") {
  const SearchSpace space = mixed_space();
  // Two parents, no mutation: every child lies between them, coordinate by coordinate.
  const std::vector<Observation> done = {{{0.2, 1e-4, 3, 8, 1}, 1.0, false}, {{0.6, 1e-2, 9, 512, 3}, 2.0, false}};
  const auto kids = children(space, {.population = 2, .mutation_rate = 0.0}, done, 400);
  int below_geometric_mid = 0, choice_1 = 0;
  for (const Point& p : kids) {
    REQUIRE(space.contains(p));
    CHECK((p[0] >= 0.2 && p[0] <= 0.6));
    CHECK((p[1] >= 1e-4 * (1 - 1e-12) && p[1] <= 1e-2 * (1 + 1e-12)));
    CHECK((p[2] >= 3 && p[2] <= 9));
    CHECK((p[3] >= 8 && p[3] <= 512));
    CHECK((p[4] == 1 || p[4] == 3));
    below_geometric_mid += p[1] < 1e-3;
    choice_1 += p[4] == 1;
  }
  // A child of one parent taken twice is that parent, a duplicate, and is bred again; so every
  // child here has both parents, and then a ~ U[0,1) in log space puts half of them below the
  // geometric mean 1e-3, and each parent's choice is taken with probability 1/2: binomial(400, 1/2),
  // sd 10, bounds at 4 sd.
  CHECK(below_geometric_mid > 160);
  CHECK(below_geometric_mid < 240);
  CHECK(choice_1 > 160);
  CHECK(choice_1 < 240);
}

TEST_CASE("evolution: mutation moves every mutated dimension, categoricals to another choice") {
  const SearchSpace space = mixed_space();
  const Point parent = {0.5, 1e-3, 10, 64, 2};
  const std::vector<Observation> done = {{parent, 1.0, false}, {parent, 1.0, false}};
  // One parent (twice), mutation certain: integers move at least one step, the choice changes.
  const auto kids = children(space, {.population = 2, .mutation_rate = 1.0}, done, 200);
  for (const Point& p : kids) {
    REQUIRE(space.contains(p));
    CHECK(p[0] != 0.5);
    CHECK(p[2] != 10);
    CHECK(p[3] != 64);
    CHECK(p[4] != 2);
  }
  // Late generations (g >= G) mutate by small steps: median |x - 0.5| well under 0.1.
  std::vector<Observation> late(40, {parent, 1.0, false});  // 40 handed out: generation 20 of P = 2
  std::vector<double> steps;
  for (const Point& p : children(space, {.population = 2, .mutation_rate = 1.0}, late, 200))
    steps.push_back(std::abs(p[0] - 0.5));
  std::vector<double> early_steps;
  for (const Point& p : kids) early_steps.push_back(std::abs(p[0] - 0.5));
  // Early (g = 1, e = 0.729): mean step about 0.5 * 0.43 of the half-range; late (e = 0.02): about 1%.
  CHECK(median(steps) < 0.02);
  CHECK(median(early_steps) > 0.05);
}

TEST_CASE("evolution: tournaments favour the best trial, also when its objective is 0.0 or negative") {
  // The best trial is the only one with choice 0. Without mutation a child takes choice 0 only
  // from it, with probability 1/2 when it is one of the two (distinct, see above) parents. Ranked
  // first it wins most tournaments of 3; ranked last (the control, objective 5) almost none.
  // mpi-opt dropped a FoM of 0.0 and broke on FoM <= 0.
  const SearchSpace space = mixed_space();
  const auto count_choice_0 = [&](double best) {
    const std::vector<Observation> done = {
        {{0.9, 1e-2, 1, 8, 1}, 0.5, false},   {{0.1, 1e-4, 2, 16, 2}, 0.7, false}, {{0.5, 1e-3, 3, 32, 0}, best, false},
        {{0.4, 1e-5, 4, 128, 3}, 0.9, false}, {{0.3, 1e-1, 5, 4, 0}, 0.0, true},
    };
    const auto kids = children(space, {.population = 5, .mutation_rate = 0.0}, done, 400);
    return std::ranges::count_if(kids, [](const Point& p) { return p[4] == 0; });
  };
  const auto zero = count_choice_0(0.0), negative = count_choice_0(-3.0), worst = count_choice_0(5.0);
  MESSAGE("children with the best trial's choice, of 400: objective 0.0 ", zero, ", -3 ", negative, ", 5 ", worst);
  CHECK(zero == negative);  // same ranking, same draws
  CHECK(zero > 120);
  CHECK(worst < 40);
}

TEST_CASE("evolution: never repeats a finished or pending point while unseen ones remain") {
  // 2 x 3 = 6 points in all: the search hands out each once, then (all seen) still a valid point.
  const SearchSpace space({{.key = "n", .kind = DimKind::integer, .low = 0, .high = 1},
                           {.key = "c", .kind = DimKind::categorical, .choices = {"a", "b", "c"}}});
  EvolutionSearch search(space, {.population = 2});
  Rng rng(3);
  std::vector<Observation> done;
  std::vector<Point> pending;
  for (int i = 0; i < 6; ++i) {
    const Point p = search.suggest(done, pending, rng);
    REQUIRE(space.contains(p));
    for (const Observation& o : done) CHECK(o.x != p);
    for (const Point& q : pending) CHECK(q != p);
    if (i % 2) {
      pending.push_back(p);
    } else {
      done.push_back({p, static_cast<double>(i), false});
    }
  }
  CHECK(space.contains(search.suggest(done, pending, rng)));
}

TEST_CASE("evolution: deterministic for a seed, and invariant to monotone maps of the objective") {
  const SearchSpace space = mixed_space();
  const EvolutionOptions o{.population = 6};
  const auto run = [&](std::uint64_t seed, const std::function<double(const Point&)>& f) {
    return simulate(space, o, seed, 60, 3, f);
  };
  const Simulation a = run(11, test_function);
  const Simulation b = run(11, test_function);
  const Simulation other_seed = run(12, test_function);
  // Only the ranking matters: f - 10 (all negative) and exp(f) - 1000 give the same search.
  const Simulation shifted = run(11, [](const Point& p) { return test_function(p) - 10; });
  const Simulation warped = run(11, [](const Point& p) { return std::exp(test_function(p)) - 1000; });
  REQUIRE(a.trials.size() == 60);
  CHECK(a.all_contained);
  bool same = true, differs = false;
  for (std::size_t i = 0; i < a.trials.size(); ++i) {
    same = same && a.trials[i].x == b.trials[i].x && a.trials[i].x == shifted.trials[i].x &&
           a.trials[i].x == warped.trials[i].x;
    differs = differs || a.trials[i].x != other_seed.trials[i].x;
  }
  CHECK(same);
  CHECK(differs);
}

TEST_CASE("evolution: objectives clipped to exactly 0.0 are ranked, not dropped") {
  // max(f - 0.05, 0): every good point scores exactly 0.0, the rest positive. The search must keep
  // breeding from the zeros (mpi-opt filtered them out as false): by the last generation most
  // children score 0.0.
  const SearchSpace space = mixed_space();
  const EvolutionOptions o{.population = 10};
  const Simulation sim =
      simulate(space, o, 5, 120, 4, [](const Point& p) { return std::max(test_function(p) - 0.05, 0.0); });
  CHECK(sim.all_contained);
  const auto zeros = [&](int g) { return std::ranges::count(generation_values(sim, 10, g), 0.0); };
  CHECK(zeros(11) >= 5);
  CHECK(zeros(11) > zeros(0));
}

TEST_CASE("evolution: improves the median objective over generations, asynchronously, on every dimension kind") {
  // 9 seeds, P = 10, 12 generations, 4 trials running at once and finishing in random order.
  // Random search with the same budget is the baseline to beat.
  // Failures: points with x > 0.85 "diverge" (about 15% of random draws); they must not stop the
  // search or become parents.
  const SearchSpace space = mixed_space();
  const EvolutionOptions o{.population = 10, .generations = 10};
  constexpr int kGenerations = 12;
  std::vector<double> first_best, last_best, first_median, last_median, last_failures, overall_best, random_best;
  for (std::uint64_t seed = 1; seed <= 9; ++seed) {
    const Simulation sim =
        simulate(space, o, seed, kGenerations * 10, 4, test_function, [](const Point& p) { return p[0] > 0.85; });
    CHECK(sim.all_contained);
    const auto first = generation_values(sim, 10, 0);
    const auto last = generation_values(sim, 10, kGenerations - 1);
    REQUIRE(!first.empty());
    REQUIRE(!last.empty());
    first_best.push_back(std::ranges::min(first));
    last_best.push_back(std::ranges::min(last));
    first_median.push_back(median(first));
    last_median.push_back(median(last));
    last_failures.push_back(10.0 - static_cast<double>(last.size()));
    double best = 1e300, random = 1e300;
    Rng rng(seed, 2);
    for (const Trial& t : sim.trials) {
      if (!t.failed) best = std::min(best, t.y);
      const Point p = space.sample(rng);
      if (!(p[0] > 0.85)) random = std::min(random, test_function(p));
    }
    overall_best.push_back(best);
    random_best.push_back(random);
  }
  MESSAGE("best of generation, median over seeds: first ", median(first_best), ", last ", median(last_best));
  MESSAGE("median of generation, median over seeds: first ", median(first_median), ", last ", median(last_median));
  MESSAGE("best of all ", kGenerations * 10, " trials, median over seeds: evolution ", median(overall_best),
          ", random search ", median(random_best));
  CHECK(median(last_best) < 0.1 * median(first_best));
  CHECK(median(last_median) < 0.1 * median(first_median));
  CHECK(median(overall_best) < 0.5 * median(random_best));
  CHECK(median(last_failures) <= 1.0);  // the search has moved away from the failing region
}
