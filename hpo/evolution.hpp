// The evolutionary search of mpi-opt (vlimant/mpi_opt): a genetic algorithm with elitism,
// tournament selection, interpolating crossover and Michalewicz's non-uniform mutation, rebuilt so
// that it works with every kind of dimension and with trials that finish in any order.
//
// Why a rebuild and not a port: mpi-opt's version crashes on categorical dimensions (it reads
// .low/.high), stores the fitness 1/FoM in an integer array (truncated), fails for FoM <= 0 and
// drops a FoM of exactly 0.0 (filter(None, ...)). Here fitness is a rank: only the order of the
// objective values matters, so any sign, zero or scale works, and two objectives that differ by a
// monotone map (f and f - 10, f and exp f) give the same search, draw for draw.
//
// The scheme, generational by count and steady-state in its breeding (P = population):
//  - Trials are numbered in the order they were handed out (done + pending). The first P are
//    uniform random draws (SearchSpace::sample): generation 0.
//  - Trial n belongs to generation g = n / P. Every later suggestion is one child, bred at once
//    from the trials finished so far; nothing waits for a generation to complete, so an idle block
//    of ranks always gets work (mpi-opt waited for whole generations).
//  - Parent pool: the best P finished trials of the whole history, ranked by objective (ties by
//    the order they finished). This is the (mu + lambda) form of elitism: a good trial stays a
//    parent until P better ones displace it. mpi-opt copied its top P/5 into each new generation,
//    which costs a re-evaluation each; here a survivor costs nothing. Failed trials and non-finite
//    objectives rank below every finished trial and so never become parents: a diverged point has
//    no fitness to pass on. With no successful trial yet, suggestions stay random.
//  - Selection: each of the two parents is the best-ranked of `tournament` uniform draws (with
//    replacement) from the pool.
//  - Crossover, per dimension: numeric — a*x1 + (1-a)*x2 with a ~ U[0, 1), in log space for log
//    dimensions, integers rounded; categorical — either parent's choice with probability 1/2.
//  - Mutation, per dimension with probability `mutation_rate` (default 1/dims): numeric — the
//    non-uniform mutation of Michalewicz (1992) on the coordinate u in [0, 1] (log space for log
//    dimensions): towards the upper bound u += (1-u)*(1 - r^e), else u -= u*(1 - r^e), r ~ U[0,1),
//    with e = max((1 - min(g/G, 1))^b, mutation_floor), G = `generations`, b = `mutation_shape`
//    (3, as mpi-opt). Early generations mutate almost uniformly over the range; from generation G
//    on the mean step stays at about `mutation_floor` of the distance to the bound. An integer
//    that a mutation would round back to its own value moves one step instead, so small late
//    mutations still explore. Categorical — another choice, uniformly.
//  - A child equal to a finished or pending point is bred again (up to 32 times), then replaced by
//    random draws (up to 32), so a small discrete space is not evaluated twice while it has
//    unseen points left.
// Every suggestion satisfies SearchSpace::contains(). The search keeps no state: suggest() is a
// function of (done, pending, the random stream), as the Optimizer interface requires.
#pragma once

#include "mpigan/core/rng.hpp"
#include "mpigan/hpo/optimizer.hpp"
#include "mpigan/hpo/space.hpp"

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace mpigan::hpo {

struct EvolutionOptions {
  int population = 10;   ///< P: random trials at the start, parent pool size, trials per generation; >= 2
  int tournament = 3;    ///< k: draws per tournament; >= 1 (1 = no selection pressure)
  int generations = 10;  ///< G: the generation at which mutation has shrunk to its floor; >= 1
  /// Per-dimension mutation probability in [0, 1]; unset: 1 / (number of dimensions).
  std::optional<double> mutation_rate;
  double mutation_shape = 3;     ///< b in (1 - g/G)^b, > 0
  double mutation_floor = 0.02;  ///< smallest exponent e, in (0, 1]: about the mean late step
};

class EvolutionSearch final : public Optimizer {
 public:
  /// Throws mpigan::ConfigError naming every invalid option (value and allowed range).
  explicit EvolutionSearch(SearchSpace space, EvolutionOptions options = {});

  /// Throws mpigan::Error when a done or pending point has the wrong number of dimensions.
  Point suggest(std::span<const Observation> done, std::span<const Point> pending, Rng& rng) override;
  std::string name() const override { return "evolution"; }

  const EvolutionOptions& options() const { return m_options; }
  /// The mutation probability per dimension in use (the option, or 1 / dims).
  double mutation_rate() const { return m_mutation_rate; }

 private:
  Point breed(std::span<const Observation> done, std::span<const std::size_t> pool, std::size_t generation,
              Rng& rng) const;

  SearchSpace m_space;
  EvolutionOptions m_options;
  double m_mutation_rate = 0;
};

/// The parent pool: indices into @p done of its best @p size successful observations (not failed,
/// finite objective), best first; equal objectives keep their order in @p done.
std::vector<std::size_t> parent_pool(std::span<const Observation> done, std::size_t size);

/// The exponent e of the non-uniform mutation at @p generation (see the file comment):
/// max((1 - min(generation / G, 1))^b, mutation_floor).
double mutation_exponent(std::size_t generation, const EvolutionOptions& options);

}  // namespace mpigan::hpo
