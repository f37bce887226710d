// Early stopping of poor trials from their validation curves: the median stopping rule and
// asynchronous successive halving (ASHA).
//
// A pruner is a pure function of curves: given a running trial's curve so far and the curves of
// the other trials (finished or running, each as far as it has got), it says whether the trial
// stops now. It keeps no state, so a study that replays its results database (with each trial's
// curve cut where it was when the decision was taken) takes the same decisions; and a decision
// concerns the trial's last point only, which is what makes the replay exact for ASHA.
//
// Curves: points (step, value) with strictly increasing steps; step counts training progress
// (samples seen or updates, the same unit for every trial of a study), value is minimised (the
// study flips a maximised metric). A non-finite value (a diverged trial) stops the trial under
// either rule.
//
// Median stopping rule (Golovin et al., "Google Vizier", KDD 2017). Let s be the step of the
// trial's last point. Another trial counts at s when its curve has reached s (last step >= s) and
// has a point at or before s; its statistic is the running average of its values at steps <= s
// (Vizier's rule; `statistic = best` uses their minimum instead). The trial stops when
//   s >= grace_steps, at least min_trials other trials count at s, and
//   best(trial's values at steps <= s) > median(the others' statistics)   (strictly worse).
// The median of an even count is the mean of the two middle values. Unlike Vizier (and Optuna's
// MedianPruner), running trials count too: in an asynchronous study the first trials to finish
// are few, and a running trial's prefix up to s is as informative as a finished one's.
//
// ASHA (Li et al., "A System for Massively Parallel Hyperparameter Tuning", MLSys 2020), in the
// stopping form of Optuna's SuccessiveHalvingPruner. Rung k sits at r_k = min_resource * eta^k
// steps, for every k with r_k * eta <= max_resource (no last rung when max_resource = 0): as in
// ASHA, max_resource (the trials' budget) is the top rung, where nothing is decided, and a trial
// kept at a rung has at least eta times its steps still to come. A trial's value
// at rung k is the best of its values up to and including its first point at or after r_k (a
// GAN's validation metric is noisy, and the study's objective is the trial's best value). When
// the trial's last point is the first at or after r_k, for each rung k so crossed (lowest first):
// let V be the values at rung k of every trial that has reached it (the other trials' and its
// own); the trial continues only if its value is among the ceil(|V| / eta) smallest, i.e. at most
// the ceil(|V|/eta)-th smallest of V; otherwise it stops. The first trial at a rung always
// continues; Optuna uses floor (at least 1), which is stricter once |V| >= eta + 1.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mpigan::hpo {

struct CurvePoint {
  std::int64_t step = 0;  ///< training progress (samples seen or updates)
  double value = 0;       ///< the validation metric, minimised
};
using Curve = std::vector<CurvePoint>;

struct PruneDecision {
  bool stop = false;
  std::string reason;  ///< why, with the numbers: for the study's log; empty when nothing was checked
};

class Pruner {
 public:
  virtual ~Pruner() = default;
  /// Whether the trial with curve @p mine stops at its last point, given the curves of the other
  /// trials @p others (not including @p mine). Throws mpigan::Error when a curve's steps are not
  /// strictly increasing. An empty @p mine never stops.
  virtual PruneDecision decide(std::span<const CurvePoint> mine, std::span<const Curve> others) const = 0;
  bool should_stop(std::span<const CurvePoint> mine, std::span<const Curve> others) const {
    return decide(mine, others).stop;
  }
  virtual std::string name() const = 0;
  /// The rule with its settings, for the search's log.
  virtual std::string describe() const { return name(); }
};

enum class PrunerKind { none, median, asha };
enum class MedianStatistic { running_average, best };

/// "none", "median", "asha".
const char* pruner_kind_name(PrunerKind kind);
/// The kind named @p name; throws mpigan::ConfigError listing the allowed names otherwise.
PrunerKind pruner_kind_from_name(std::string_view name);

struct PrunerOptions {
  PrunerKind kind = PrunerKind::none;
  // median
  int min_trials = 3;                                            ///< other trials that must count at s; >= 1
  std::int64_t grace_steps = 0;                                  ///< no stop before this step; >= 0
  MedianStatistic statistic = MedianStatistic::running_average;  ///< the other trials' statistic
  // asha
  int eta = 3;                    ///< reduction factor; >= 2
  std::int64_t min_resource = 1;  ///< r_0, steps; >= 1
  std::int64_t max_resource = 0;  ///< the budget; rungs up to max_resource / eta; 0: no limit, else >= min * eta
};

/// Whether ASHA has a rung within @p budget steps: its first rung, @p min_resource, with at least
/// @p eta times its steps still to come (r_0 <= budget / eta). Every layer that sets a budget asks
/// this one question (the pruner, the search section, the budget taken from the trials).
constexpr bool asha_budget_has_rung(std::int64_t budget, std::int64_t min_resource, int eta) {
  return eta >= 2 && budget / eta >= min_resource;
}

/// Never stops a trial (kind none).
class NoPruner final : public Pruner {
 public:
  PruneDecision decide(std::span<const CurvePoint>, std::span<const Curve>) const override { return {}; }
  std::string name() const override { return "none"; }
};

class MedianStoppingPruner final : public Pruner {
 public:
  /// Throws mpigan::ConfigError naming every invalid option.
  explicit MedianStoppingPruner(const PrunerOptions& options);
  PruneDecision decide(std::span<const CurvePoint> mine, std::span<const Curve> others) const override;
  std::string name() const override { return "median"; }

 private:
  int m_min_trials;
  std::int64_t m_grace_steps;
  MedianStatistic m_statistic;
};

class AshaPruner final : public Pruner {
 public:
  /// Throws mpigan::ConfigError naming every invalid option.
  explicit AshaPruner(const PrunerOptions& options);
  PruneDecision decide(std::span<const CurvePoint> mine, std::span<const Curve> others) const override;
  std::string name() const override { return "asha"; }
  std::string describe() const override;

  /// r_0, r_1, ...: every rung step up to max_resource / eta (to the int64 limit when it is 0).
  const std::vector<std::int64_t>& rungs() const { return m_rungs; }

 private:
  int m_eta;
  std::vector<std::int64_t> m_rungs;
};

/// The pruner of @p options.kind (NoPruner for none); throws mpigan::ConfigError on bad options.
std::unique_ptr<Pruner> make_pruner(const PrunerOptions& options);

}  // namespace mpigan::hpo
