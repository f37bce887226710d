// Validation losses: the GAN step's evaluation (no weight change) over the validation data, for
// the single-process trainer and the distributed master alike.
#pragma once

#include "mpigan/data/batch_source.hpp"
#include "mpigan/models/gan_step.hpp"
#include "mpigan/train/experiment.hpp"

#include <optional>

namespace mpigan::train {

/// Mean losses of @p step's model on the first validation.batches batches of @p source (all of
/// them when 0), read from its start; each batch's randomness from the experiment seed and the
/// batch's index, so the same weights always give the same figures. nullopt: no batch.
std::optional<models::StepLosses> validation_losses(const ExperimentConfig& e, models::GanStep& step,
                                                    data::BatchSource& source);

}  // namespace mpigan::train
