// Search algorithms: the next point to evaluate from the trials so far. An optimiser is a pure
// function of (finished trials, trials still running, random stream): it keeps no state of its
// own between calls, so a resumed search that replays its results database and draws from the
// same stream continues exactly where it stopped.
//
// Every objective is minimised here (the study flips the sign of a maximised one). A failed trial
// (diverged, invalid, crashed) is an Observation with failed = true and no value: the Gaussian
// process and the evolutionary search treat it as worse than every finished trial.
#pragma once

#include "mpigan/core/rng.hpp"
#include "mpigan/hpo/space.hpp"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace mpigan::hpo {

struct Observation {
  Point x;
  double y = 0;  ///< the objective, minimised; meaningless when failed
  bool failed = false;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// The next point to try. @p pending: points handed out and not yet finished.
  virtual Point suggest(std::span<const Observation> done, std::span<const Point> pending, Rng& rng) = 0;
  virtual std::string name() const = 0;
};

/// The points of @p first in order (the search's `points`: the experiment's own configuration, a
/// published one), then what @p rest suggests. A trial's index is the number of points handed out
/// before it (@p done and @p pending together), so a resumed search replays the same sequence.
class GivenPointsFirst final : public Optimizer {
 public:
  GivenPointsFirst(std::vector<Point> first, std::unique_ptr<Optimizer> rest)
      : m_first(std::move(first)), m_rest(std::move(rest)) {}
  Point suggest(std::span<const Observation> done, std::span<const Point> pending, Rng& rng) override;
  std::string name() const override { return m_rest->name(); }

 private:
  std::vector<Point> m_first;
  std::unique_ptr<Optimizer> m_rest;
};

/// Uniform random search (the baseline).
class RandomSearch final : public Optimizer {
 public:
  explicit RandomSearch(SearchSpace space) : m_space(std::move(space)) {}
  Point suggest(std::span<const Observation> done, std::span<const Point> pending, Rng& rng) override;
  std::string name() const override { return "random"; }

 private:
  SearchSpace m_space;
};

}  // namespace mpigan::hpo
