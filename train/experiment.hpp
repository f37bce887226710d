// The experiment: one YAML file, parsed into typed sections, validated as a whole before any work
// (or MPI traffic) starts, then frozen. Every problem is reported at once with file:line:column,
// the key path, the value and what is allowed (core/config.hpp). docs/experiments.md documents
// every key; examples/ holds working files.
//
//   name, seed, backend, threads, precision
//   model:      name, latent, dropout, leaky_alpha, bn_momentum, loss_weights{bce,energy,ecal,angle}
//   data:       train, validation, validation_fraction, split, units, max_events, prefetch,
//               read_threads, preprocess{threshold,xscale,power,min_ecal_sum,angle_key},
//               simulate{events,energy,angle,events_per_file,seed,dir},
//               synthetic{events,validation_events,seed} (tiny-8 sandbox: in-memory toy showers)
//   optimizer:  name, lr, momentum, nesterov, rho, beta1, beta2, epsilon, generator{..}, discriminator{..}
//   training:   epochs, max_updates, max_samples, batch, label_flip, fake_energy, generator_passes
//   validation: enabled, every, batches, early_stopping{metric,mode,threshold,patience},
//               physics{enabled,every,events,batch} (the physics figure of merit during training)
//   checkpoint: every, keep
//   output:     dir
//   logging:    level, every
// Sections of the distributed run (topology, algorithm) are read by their own layers from the
// same document (ExperimentConfig::document) so that unknown keys there are errors too.
#pragma once

#include "mpigan/core/config.hpp"
#include "mpigan/data/dataset.hpp"
#include "mpigan/data/loader.hpp"
#include "mpigan/models/gan_model.hpp"
#include "mpigan/models/gan_step.hpp"
#include "mpigan/nn/optimizer.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mpigan::train {

/// Generate the training files with the built-in simulator when none exist yet (quick starts).
struct SimulateSpec {
  bool enabled = false;
  std::int64_t events = 2000;
  double energy_lo = 10.0, energy_hi = 500.0;  ///< GeV
  double angle_lo = 90.0, angle_hi = 90.0;     ///< degrees
  std::int64_t events_per_file = 1000;
  std::uint64_t seed = 1;
  std::string dir;  ///< where the files go; the train pattern must match them
};

/// In-memory toy showers for the tiny-8 sandbox (data/synthetic.hpp).
struct SyntheticSpec {
  bool enabled = false;
  std::int64_t events = 4096;            ///< training events
  std::int64_t validation_events = 512;  ///< held-out events
  std::uint64_t seed = 1;
};

/// Stop when a validation metric reaches a threshold or stops improving (validation.early_stopping).
struct EarlyStoppingSpec {
  bool enabled = false;
  /// val_d_loss | val_g_loss | val_d_real | val_d_fake | fpd_hlf (the physics figure of merit)
  std::string metric = "val_g_loss";
  bool minimize = true;
  std::optional<double> threshold;  ///< stop when the metric reaches it
  std::int64_t patience = 0;        ///< stop after this many validations without improvement (0: off)
};

/// The physics figure of merit during training (validation.physics, train/physics_monitor.hpp):
/// showers generated at the conditions of the first `events` held-out events, compared with them.
struct PhysicsValidationSpec {
  bool enabled = false;
  std::int64_t every = 0;      ///< steps (master versions); 0 = with each loss validation
  std::int64_t events = 3000;  // <= 1 % on every +-10 GeV bin's SF comparison (docs/physics.md)
  std::int64_t batch = 64;     ///< generation batch
  /// Passes re-estimating the generator's BatchNorm statistics for its weights before each score
  /// (nn::Network::recalibrate_state); nullopt: auto, 8 for a distributed run with an asynchronous
  /// rule (its canonical statistics were gathered on other weights: stale ones, or EASGD's
  /// workers'), 0 otherwise.
  std::optional<std::int64_t> recalibrate_bn;
  /// The passes for a generator whose statistics were gathered on other weights (@p borrowed:
  /// an asynchronous master's) or on its own: recalibrate_bn, or auto's 8 or 0.
  std::int64_t recalibrate_passes(bool borrowed) const { return recalibrate_bn.value_or(borrowed ? 8 : 0); }
};

/// The learning rate over a run: constant, or a cosine from optimizer.lr down to final_fraction of
/// it at the end of the run's budget (its total steps), for both networks.
struct LrSchedule {
  std::string kind = "constant";  ///< constant | cosine
  double final_fraction = 0.1;
  /// The factor on the configured learning rates after @p step of @p total steps.
  double factor(std::int64_t step, std::int64_t total) const;
  /// The factor once @p spent (0..1, clamped) of the run's budget is spent.
  double at(double spent) const;
};

struct ExperimentConfig {
  std::string name = "experiment";
  std::uint64_t seed = 1;
  std::string backend = "cpu";
  int threads = 0;
  /// fp32, or bf16 convolutions (BackendOptions::precision); fp32 where the CPU has no native bf16.
  std::string precision = "fp32";

  models::ModelOptions model;
  data::DatasetSpec data;
  int prefetch = 4;
  int read_threads = 1;
  SimulateSpec simulate;
  SyntheticSpec synthetic;

  nn::OptimizerConfig opt_generator = nn::OptimizerConfig::defaults("rmsprop");
  nn::OptimizerConfig opt_discriminator = nn::OptimizerConfig::defaults("rmsprop");
  LrSchedule lr_schedule;  ///< the single-process trainer's

  std::int64_t epochs = 1;
  std::int64_t max_updates = 0;  ///< training steps (distributed: versions); 0 = no limit (epochs decide)
  /// Samples applied to the canonical weights (a step, or one worker's update, applies a batch; a
  /// synchronous round N batches); 0 = no limit. The budget at which rules and worker counts are
  /// compared: max_updates means N times more samples for sync at N workers than for downpour.
  std::int64_t max_samples = 0;
  std::int64_t batch = 128;
  models::StepConfig step;

  bool validate = true;                 ///< validation.enabled
  std::int64_t validate_every = 0;      ///< steps; 0 = at the end of each epoch only
  std::int64_t validation_batches = 4;  ///< batches of the validation set per validation (0 = all)
  EarlyStoppingSpec early_stopping;
  PhysicsValidationSpec physics;
  std::int64_t checkpoint_every = 0;  ///< steps; 0 = at the end of each epoch and of the run
  std::int64_t checkpoint_keep = 3;

  std::string output_dir;  ///< empty: runs/<name>
  std::string log_level = "info";
  std::int64_t log_every = 10;

  /// Parse and validate the common sections of @p doc; @p extra_sections lists the top-level keys
  /// other layers read (e.g. "topology", "algorithm") so they are not reported as unknown.
  /// Records problems in @p doc; the caller calls doc.finish().
  static ExperimentConfig parse(ConfigDocument& doc, const std::vector<std::string>& extra_sections = {});
  /// The top-level keys parse() reads itself; every other section belongs to another layer
  /// (extra_sections).
  static const std::vector<std::string>& own_sections();
  /// Load, parse, validate, finish: throws ConfigError listing every problem.
  static ExperimentConfig load(const std::string& path, const std::vector<std::string>& overrides = {},
                               const std::vector<std::string>& extra_sections = {});

  /// Why a run ends after @p version versions holding @p samples samples: "max_updates reached",
  /// "max_samples reached", or nullptr while neither budget is spent.
  const char* budget_spent(std::int64_t version, std::int64_t samples) const;
  /// The learning-rate schedule's factor in a distributed run (and the sandbox) after @p version
  /// master versions holding @p samples samples: the schedule runs over the budget that ends the
  /// run first, the larger of version / max_updates and samples / max_samples spent (1 for a
  /// constant schedule, or when neither budget is set).
  double lr_factor(std::int64_t version, std::int64_t samples) const;

  /// The resolved document (overrides applied, defaults filled in), for config.yaml and rank 0's log.
  YAML::Node resolved;
};

/// The data geometry and preprocessing a model needs ("3dgan-25" -> ecal25 + preprocess_3dgan()).
void data_defaults_for_model(const std::string& model, data::Geometry& geometry, data::Preprocess& preprocess);

}  // namespace mpigan::train
