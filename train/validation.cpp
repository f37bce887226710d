// Validation losses over the validation data (validation.hpp).
#include "mpigan/train/validation.hpp"

#include "mpigan/train/session.hpp"
#include "mpigan/train/trainer.hpp"

namespace mpigan::train {

std::optional<models::StepLosses> validation_losses(const ExperimentConfig& e, models::GanStep& step,
                                                    data::BatchSource& source) {
  source.seek({0, 0});
  LossAverager avg;
  data::Batch b;
  while ((e.validation_batches == 0 || avg.count() < e.validation_batches) && source.next(b))
    avg.add(step.evaluate(real_batch(b), e.seed + static_cast<std::uint64_t>(avg.count())));
  if (avg.count() == 0) return std::nullopt;
  return avg.mean();
}

}  // namespace mpigan::train
