// A training session: what every process that computes GAN gradients holds, built from the
// experiment — the backend, the model (G and D), one local optimizer per network and the GAN step —
// plus their checkpoint form. The single-process trainer drives one directly; distributed workers
// and masters (worker/, master/) build theirs the same way.
#pragma once

#include "mpigan/core/backend.hpp"
#include "mpigan/data/loader.hpp"
#include "mpigan/models/gan_model.hpp"
#include "mpigan/models/gan_step.hpp"
#include "mpigan/nn/optimizer.hpp"
#include "mpigan/train/checkpoint.hpp"
#include "mpigan/train/experiment.hpp"

#include <memory>
#include <span>

namespace mpigan::train {

struct Session {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<models::GanModel> model;
  std::unique_ptr<nn::Optimizer> opt_g, opt_d;
  std::unique_ptr<models::GanStep> step;

  /// Backend (threads from the experiment, GPU from @p device_id), model initialised from the
  /// experiment seed (identical on every rank), optimizers, and the step seeded with @p step_seed.
  static Session create(const ExperimentConfig& e, std::uint64_t step_seed, int device_id = -1);

  /// Apply the local optimizer of @p net to its gradients.
  void apply_local(models::Net net);

  /// Weights, BatchNorm state and optimizer slots under "model/" and "optimizer/".
  void save(CheckpointWriter& w) const;
  /// The first of those sets holding a non-finite value, as "generator weights (12 of 872808
  /// values)"; empty when all are finite. A checkpoint is written only when this is empty.
  std::string first_non_finite() const;
  void load(const CheckpointReader& r);
};

/// Copy a ParameterSet (on any backend) into a host span of its size, or back.
void copy_to_host(Backend& be, const ParameterSet& p, std::span<float> out);
void copy_from_host(Backend& be, std::span<const float> in, ParameterSet& p);

/// The model's view of a data batch (shallow).
models::RealBatch real_batch(const data::Batch& b);

/// Metrics columns and one row for step losses (kind: "step", "epoch", "validation"); the physics
/// columns at the end are empty there (physics_row() fills them).
std::vector<std::string> metrics_columns(const std::vector<std::string>& heads);
std::vector<std::string> metrics_row(const std::string& kind, std::int64_t epoch, std::int64_t step,
                                     std::int64_t samples, double elapsed_s, double samples_per_s,
                                     const models::StepLosses& l);

}  // namespace mpigan::train
