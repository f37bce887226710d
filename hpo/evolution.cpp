// The evolutionary search (evolution.hpp): rank-based parent pool, tournaments, interpolating
// crossover and non-uniform mutation on every kind of dimension.
//
// Numeric dimensions are bred on a coordinate u in [0, 1] over [low, high] (over [log low,
// log high] for log kinds) and mapped back with clamping and, for integers, rounding; that is why
// every child passes SearchSpace::contains() whatever the parents were (a resumed study may hand
// in points from wider bounds). The random stream is consumed in a fixed order (tournaments, then
// per dimension crossover and mutation draws), so a seed replays.
#include "mpigan/hpo/evolution.hpp"

#include "mpigan/core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace mpigan::hpo {

namespace {

/// Breeding attempts before falling back to random draws, and random draws before giving up on
/// novelty (a fully explored discrete space): enough that a duplicate is never returned while
/// unseen points are common, cheap next to one trial.
constexpr int kMaxAttempts = 32;

/// A numeric gene's coordinate in [0, 1] (log space for log dimensions) with the bounds at exactly
/// 0 and 1, so that interpolating two parents stays between them. Not SearchSpace::encode(),
/// which gives each integer an equal share of [0, 1] for the GP.
double gene_coordinate(const Dimension& d, double v) {
  const double lo = d.log_scale() ? std::log(d.low) : d.low;
  const double hi = d.log_scale() ? std::log(d.high) : d.high;
  if (!(hi > lo)) return 0.0;
  const double w = d.log_scale() ? std::log(std::max(v, d.low)) : v;
  return std::clamp((w - lo) / (hi - lo), 0.0, 1.0);
}

/// The value at coordinate @p u, clamped to the bounds and, for integers, rounded.
double gene_value(const Dimension& d, double u) {
  const double lo = d.log_scale() ? std::log(d.low) : d.low;
  const double hi = d.log_scale() ? std::log(d.high) : d.high;
  const double w = lo + std::clamp(u, 0.0, 1.0) * (hi - lo);
  double v = d.log_scale() ? std::exp(w) : w;
  if (d.integral()) v = std::round(v);
  return std::clamp(v, d.low, d.high);
}

/// @p v clamped to the bounds and, for integers, rounded.
double valid_value(const Dimension& d, double v) {
  if (d.integral()) v = std::round(v);
  return std::clamp(v, d.low, d.high);
}

/// The best-ranked (lowest pool index) of @p k uniform draws from a pool of @p n.
std::size_t tournament(std::size_t n, int k, Rng& rng) {
  std::size_t best = n;
  for (int i = 0; i < k; ++i) best = std::min(best, static_cast<std::size_t>(rng.below(n)));
  return best;
}

bool seen(const Point& p, std::span<const Observation> done, std::span<const Point> pending) {
  return std::ranges::any_of(done, [&](const Observation& o) { return o.x == p; }) ||
         std::ranges::any_of(pending, [&](const Point& q) { return q == p; });
}

}  // namespace

std::vector<std::size_t> parent_pool(std::span<const Observation> done, std::size_t size) {
  std::vector<std::size_t> idx;
  for (std::size_t i = 0; i < done.size(); ++i) {
    if (!done[i].failed && std::isfinite(done[i].y)) idx.push_back(i);
  }
  std::ranges::stable_sort(idx, [&](std::size_t a, std::size_t b) { return done[a].y < done[b].y; });
  if (idx.size() > size) idx.resize(size);
  return idx;
}

double mutation_exponent(std::size_t generation, const EvolutionOptions& options) {
  const double t = std::min(static_cast<double>(generation) / options.generations, 1.0);
  return std::max(std::pow(1.0 - t, options.mutation_shape), options.mutation_floor);
}

EvolutionSearch::EvolutionSearch(SearchSpace space, EvolutionOptions options)
    : m_space(std::move(space)), m_options(options) {
  std::vector<std::string> problems;
  const EvolutionOptions& o = m_options;
  if (o.population < 2) problems.push_back(fmt::format("evolution: population must be >= 2, got {}", o.population));
  if (o.tournament < 1) problems.push_back(fmt::format("evolution: tournament must be >= 1, got {}", o.tournament));
  if (o.generations < 1) problems.push_back(fmt::format("evolution: generations must be >= 1, got {}", o.generations));
  if (o.mutation_rate && !(*o.mutation_rate >= 0 && *o.mutation_rate <= 1))
    problems.push_back(fmt::format("evolution: mutation_rate must be in [0, 1], got {}", *o.mutation_rate));
  if (!(o.mutation_shape > 0 && std::isfinite(o.mutation_shape)))
    problems.push_back(fmt::format("evolution: mutation_shape must be finite and > 0, got {}", o.mutation_shape));
  if (!(o.mutation_floor > 0 && o.mutation_floor <= 1))
    problems.push_back(fmt::format("evolution: mutation_floor must be in (0, 1], got {}", o.mutation_floor));
  if (m_space.size() == 0) problems.push_back("evolution: the search space has no dimensions");
  MPIGAN_CHECK_PROBLEMS(problems);
  m_mutation_rate = o.mutation_rate ? *o.mutation_rate : 1.0 / static_cast<double>(m_space.size());
}

Point EvolutionSearch::suggest(std::span<const Observation> done, std::span<const Point> pending, Rng& rng) {
  const auto check_point = [&](const Point& p, const char* which, std::size_t i) {
    MPIGAN_CHECK(p.size() == m_space.size(), "evolution: {} trial {} has {} values, the space has {} dimensions", which,
                 i, p.size(), m_space.size());
    for (std::size_t j = 0; j < p.size(); ++j) {
      MPIGAN_CHECK(std::isfinite(p[j]), "evolution: {} trial {}: dimension '{}' is {}, expected a finite value", which,
                   i, m_space[j].key, p[j]);
    }
  };
  for (std::size_t i = 0; i < done.size(); ++i) check_point(done[i].x, "finished", i);
  for (std::size_t i = 0; i < pending.size(); ++i) check_point(pending[i], "pending", i);
  const auto population = static_cast<std::size_t>(m_options.population);
  const std::size_t handed_out = done.size() + pending.size();
  const std::size_t generation = handed_out / population;
  const std::vector<std::size_t> pool = generation == 0 ? std::vector<std::size_t>{} : parent_pool(done, population);

  Point child;
  if (!pool.empty()) {
    for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
      child = breed(done, pool, generation, rng);
      if (!seen(child, done, pending)) return child;
    }
  }
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    child = m_space.sample(rng);
    if (!seen(child, done, pending)) return child;
  }
  return child;  // every draw was a duplicate: the space is (nearly) exhausted
}

Point EvolutionSearch::breed(std::span<const Observation> done, std::span<const std::size_t> pool,
                             std::size_t generation, Rng& rng) const {
  const Point& a = done[pool[tournament(pool.size(), m_options.tournament, rng)]].x;
  const Point& b = done[pool[tournament(pool.size(), m_options.tournament, rng)]].x;
  const double exponent = mutation_exponent(generation, m_options);

  Point child(m_space.size());
  for (std::size_t i = 0; i < m_space.size(); ++i) {
    const Dimension& d = m_space[i];
    const double mix = rng.uniform_double();
    const bool mutate = rng.uniform_double() < m_mutation_rate;
    if (!d.numeric()) {
      const auto n = static_cast<std::uint64_t>(d.choices.size());
      // A parent from wider bounds (or a corrupt record) still gives a valid choice.
      const auto clamp_choice = [&](double c) { return std::clamp(std::round(c), 0.0, static_cast<double>(n - 1)); };
      double c = clamp_choice(mix < 0.5 ? a[i] : b[i]);
      if (mutate) {
        // Uniform over the other n - 1 choices: draw in [0, n-1) and skip the current one.
        const auto other = static_cast<double>(rng.below(n - 1));
        c = other >= c ? other + 1 : other;
      }
      child[i] = c;
      continue;
    }
    // Equal parents give their value exactly (no log/exp round trip), so an unmutated child of one
    // parent taken twice is recognised as a duplicate.
    const double crossed = a[i] == b[i]
                               ? valid_value(d, a[i])
                               : gene_value(d, mix * gene_coordinate(d, a[i]) + (1 - mix) * gene_coordinate(d, b[i]));
    double v = crossed;
    if (mutate) {
      const double u = gene_coordinate(d, crossed);  // integers: mutate from the rounded value
      const bool up = rng.uniform_double() < 0.5;
      const double shrink = 1.0 - std::pow(rng.uniform_double(), exponent);
      v = gene_value(d, up ? u + (1 - u) * shrink : u - u * shrink);
      if (d.integral() && v == crossed) v = std::clamp(crossed + (up ? 1.0 : -1.0), d.low, d.high);
    }
    child[i] = v;
  }
  return child;
}

}  // namespace mpigan::hpo
