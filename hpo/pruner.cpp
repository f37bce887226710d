// The median stopping rule and ASHA (pruner.hpp): both pure functions of the curves.
//
// Non-finite values of other trials count as +infinity (worse than every finite value), so one
// diverged trial cannot drag a median or a rung's cut-off into NaN.
#include "mpigan/hpo/pruner.hpp"

#include "mpigan/core/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace mpigan::hpo {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double finite_or_inf(double v) {
  return std::isfinite(v) ? v : kInf;
}

/// Index of the first point of @p c whose step does not exceed its predecessor's, or 0 if none.
std::size_t unordered_point(std::span<const CurvePoint> c) {
  for (std::size_t i = 1; i < c.size(); ++i) {
    if (c[i].step <= c[i - 1].step) return i;
  }
  return 0;
}

void check_curves(std::span<const CurvePoint> mine, std::span<const Curve> others, const char* pruner) {
  if (const std::size_t i = unordered_point(mine); i != 0) {
    MPIGAN_FATAL("{} pruner: the trial's curve: steps must increase strictly, point {} has step {} after step {}",
                 pruner, i, mine[i].step, mine[i - 1].step);
  }
  for (std::size_t j = 0; j < others.size(); ++j) {
    if (const std::size_t i = unordered_point(others[j]); i != 0) {
      MPIGAN_FATAL(
          "{} pruner: other trial {}'s curve: steps must increase strictly, point {} has step {} after step {}", pruner,
          j, i, others[j][i].step, others[j][i - 1].step);
    }
  }
}

/// The median of @p v (mean of the two middle values for an even count); @p v non-empty.
double median(std::vector<double> v) {
  std::ranges::sort(v);
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Index of the first point of @p c at or after @p step, or c.size().
std::size_t first_at_or_after(std::span<const CurvePoint> c, std::int64_t step) {
  const auto it = std::ranges::lower_bound(c, step, {}, &CurvePoint::step);
  return static_cast<std::size_t>(it - c.begin());
}

/// The best (smallest) value of c[0..end], non-finite as +inf.
double best_up_to(std::span<const CurvePoint> c, std::size_t end) {
  double best = kInf;
  for (std::size_t i = 0; i <= end; ++i) best = std::min(best, finite_or_inf(c[i].value));
  return best;
}

PruneDecision diverged(std::span<const CurvePoint> mine, const char* pruner) {
  return {true, fmt::format("{}: value {} at step {} is not finite", pruner, mine.back().value, mine.back().step)};
}

}  // namespace

const char* pruner_kind_name(PrunerKind kind) {
  switch (kind) {
    case PrunerKind::none:
      return "none";
    case PrunerKind::median:
      return "median";
    case PrunerKind::asha:
      return "asha";
  }
  return "?";
}

PrunerKind pruner_kind_from_name(std::string_view name) {
  for (const PrunerKind k : {PrunerKind::none, PrunerKind::median, PrunerKind::asha}) {
    if (name == pruner_kind_name(k)) return k;
  }
  MPIGAN_THROW(ConfigError, "pruner: kind '{}' is not one of none, median, asha", name);
}

// ---- median stopping rule ---------------------------------------------------------------------

MedianStoppingPruner::MedianStoppingPruner(const PrunerOptions& options)
    : m_min_trials(options.min_trials), m_grace_steps(options.grace_steps), m_statistic(options.statistic) {
  std::vector<std::string> problems;
  if (m_min_trials < 1) problems.push_back(fmt::format("median pruner: min_trials must be >= 1, got {}", m_min_trials));
  if (m_grace_steps < 0)
    problems.push_back(fmt::format("median pruner: grace_steps must be >= 0, got {}", m_grace_steps));
  MPIGAN_CHECK_PROBLEMS(problems);
}

PruneDecision MedianStoppingPruner::decide(std::span<const CurvePoint> mine, std::span<const Curve> others) const {
  check_curves(mine, others, "median");
  if (mine.empty()) return {};
  if (!std::isfinite(mine.back().value)) return diverged(mine, "median");
  const std::int64_t s = mine.back().step;
  if (s < m_grace_steps) return {};

  std::vector<double> stats;
  for (const Curve& c : others) {
    if (c.empty() || c.back().step < s || c.front().step > s) continue;
    double sum = 0, best = kInf;
    std::size_t n = 0;
    for (; n < c.size() && c[n].step <= s; ++n) {
      sum += finite_or_inf(c[n].value);
      best = std::min(best, finite_or_inf(c[n].value));
    }
    stats.push_back(m_statistic == MedianStatistic::best ? best : sum / static_cast<double>(n));
  }
  if (stats.size() < static_cast<std::size_t>(m_min_trials)) return {};

  const double mine_best = best_up_to(mine, mine.size() - 1);
  const double cut = median(stats);
  const bool stop = mine_best > cut;
  return {stop, fmt::format("median: best {} at step {} is {} the median {} of the {} of {} other trials", mine_best, s,
                            stop ? "worse than" : "no worse than", cut,
                            m_statistic == MedianStatistic::best ? "best values" : "running averages", stats.size())};
}

// ---- ASHA -------------------------------------------------------------------------------------

AshaPruner::AshaPruner(const PrunerOptions& options) : m_eta(options.eta) {
  std::vector<std::string> problems;
  if (options.eta < 2) problems.push_back(fmt::format("asha pruner: eta must be >= 2, got {}", options.eta));
  if (options.min_resource < 1)
    problems.push_back(fmt::format("asha pruner: min_resource must be >= 1, got {}", options.min_resource));
  if (options.eta >= 2 && options.max_resource != 0 &&
      !asha_budget_has_rung(options.max_resource, options.min_resource, options.eta))
    problems.push_back(fmt::format(
        "asha pruner: max_resource {} leaves no rung: it must be 0 (no limit) or at least min_resource * eta = {} * {}",
        options.max_resource, options.min_resource, options.eta));
  MPIGAN_CHECK_PROBLEMS(problems);

  // A rung decides only where the trials it keeps have at least eta times its steps still to come:
  // r_k <= max_resource / eta. Beyond that a stop saves little (a rung at 96 % of the budget
  // saves 4 %) and the budget itself is ASHA's top rung, where nothing is decided.
  const std::int64_t limit =
      options.max_resource == 0 ? std::numeric_limits<std::int64_t>::max() : options.max_resource / m_eta;
  for (std::int64_t r = options.min_resource; r <= limit; r *= m_eta) {
    m_rungs.push_back(r);
    if (r > std::numeric_limits<std::int64_t>::max() / m_eta) break;  // the next rung would overflow
  }
}

PruneDecision AshaPruner::decide(std::span<const CurvePoint> mine, std::span<const Curve> others) const {
  check_curves(mine, others, "asha");
  if (mine.empty()) return {};
  if (!std::isfinite(mine.back().value)) return diverged(mine, "asha");
  const std::size_t last = mine.size() - 1;
  const std::int64_t previous = last == 0 ? std::numeric_limits<std::int64_t>::min() : mine[last - 1].step;

  PruneDecision decision;
  for (std::size_t k = 0; k < m_rungs.size(); ++k) {
    const std::int64_t r = m_rungs[k];
    if (r <= previous) continue;     // decided at an earlier point
    if (r > mine[last].step) break;  // not reached yet
    const double value = best_up_to(mine, last);
    std::vector<double> rung_values{value};
    for (const Curve& c : others) {
      const std::size_t at = first_at_or_after(c, r);
      if (at < c.size()) rung_values.push_back(best_up_to(c, at));
    }
    const std::size_t keep =
        (rung_values.size() + static_cast<std::size_t>(m_eta) - 1) / static_cast<std::size_t>(m_eta);
    std::ranges::sort(rung_values);
    const double cut = rung_values[keep - 1];
    decision.stop = value > cut;
    decision.reason = fmt::format("asha: rung {} (step {}): value {} is {} the top {} of {} values (cut-off {})", k, r,
                                  value, decision.stop ? "outside" : "within", keep, rung_values.size(), cut);
    if (decision.stop) return decision;
  }
  return decision;
}

std::string AshaPruner::describe() const {
  if (m_rungs.size() <= 6) return fmt::format("asha: eta {}, rungs at {} steps", m_eta, fmt::join(m_rungs, ", "));
  return fmt::format("asha: eta {}, rungs at {}, ... steps (no budget)", m_eta,
                     fmt::join(m_rungs.begin(), m_rungs.begin() + 5, ", "));
}

std::unique_ptr<Pruner> make_pruner(const PrunerOptions& options) {
  switch (options.kind) {
    case PrunerKind::none:
      return std::make_unique<NoPruner>();
    case PrunerKind::median:
      return std::make_unique<MedianStoppingPruner>(options);
    case PrunerKind::asha:
      return std::make_unique<AshaPruner>(options);
  }
  MPIGAN_FATAL("pruner: unknown kind {}", static_cast<int>(options.kind));
}

}  // namespace mpigan::hpo
