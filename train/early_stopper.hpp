// Early stopping on one validation metric (validation.early_stopping), for the single-process
// trainer and the distributed master alike: stop when the metric reaches the threshold, or after
// `patience` validations without improving on its best.
#pragma once

#include "mpigan/train/experiment.hpp"

#include <optional>

namespace mpigan::train {

class EarlyStopper {
 public:
  explicit EarlyStopper(const EarlyStoppingSpec& spec) : m_spec(spec) {}

  /// True when @p metric is the one this stopper watches (and stopping is enabled).
  bool watches(const std::string& metric) const { return m_spec.enabled && m_spec.metric == metric; }
  /// One validation's value of the watched metric; true when the run should stop (logged why).
  bool update(double value);
  std::optional<double> best() const { return m_best; }
  /// Validations since the best (patience counts them).
  std::int64_t since_best() const { return m_since_best; }
  /// Continue from a saved best and count (the sandbox's resume).
  void restore(std::optional<double> best, std::int64_t since_best) {
    m_best = best;
    m_since_best = since_best;
  }

 private:
  EarlyStoppingSpec m_spec;
  std::optional<double> m_best;
  std::int64_t m_since_best = 0;
};

}  // namespace mpigan::train
