// Early stopping on one validation metric (early_stopper.hpp).
#include "mpigan/train/early_stopper.hpp"

#include "mpigan/core/log.hpp"

#include <cmath>

namespace mpigan::train {

bool EarlyStopper::update(double v) {
  const double sign = m_spec.minimize ? 1.0 : -1.0;
  if (m_spec.threshold && sign * v <= sign * *m_spec.threshold) {
    spdlog::info("early stopping: {} = {:.5g} reached the threshold {:.5g}", m_spec.metric, v, *m_spec.threshold);
    return true;
  }
  if (!m_best || sign * v < sign * *m_best) {
    m_best = v;
    m_since_best = 0;
  } else if (m_spec.patience > 0 && ++m_since_best >= m_spec.patience) {
    spdlog::info("early stopping: {} did not improve for {} validations (best {:.5g})", m_spec.metric, m_spec.patience,
                 *m_best);
    return true;
  }
  return false;
}

}  // namespace mpigan::train
