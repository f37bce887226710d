// The single-process trainer: `mpigan train EXP.yaml` on one process. Reads batches from the data
// loader, runs the 3DGAN step with a local optimizer applied after each of its four gradient
// computations (exactly the Keras recipe), logs per step and per epoch, validates, checkpoints,
// and resumes from a run directory exactly where it stopped (same data position, same step
// randomness, same optimizer state).
#pragma once

#include "mpigan/data/dataset.hpp"
#include "mpigan/models/gan_step.hpp"
#include "mpigan/train/experiment.hpp"
#include "mpigan/train/physics_monitor.hpp"

#include <functional>
#include <string>

namespace mpigan::train {

struct RunOptions {
  std::string out_dir;     ///< overrides output.dir
  std::string resume_dir;  ///< continue the run in this directory from its latest checkpoint
  /// Asked after each validation (metrics.csv has the row): true ends the run as stopped early,
  /// with its checkpoint. A hyper-parameter search prunes its poor trials this way (hpo/).
  std::function<bool()> prune;
};

struct TrainSummary {
  std::string run_dir;
  std::string last_checkpoint;
  std::int64_t steps = 0, epochs = 0, samples = 0;
  double epoch_fraction = 0;  ///< of the epoch in progress
  double seconds = 0, samples_per_s = 0;
  /// Samples per second after this run's first step (start-up excluded); 0 with a single step.
  double steady_samples_per_s = 0;
  models::StepLosses last_epoch;  ///< mean losses of the last (possibly partial) epoch
  bool stopped_early = false;     ///< validation.early_stopping ended the run
  int stopped_by_signal = 0;      ///< SIGTERM/SIGINT/SIGUSR1 ended it (after a final checkpoint)
  PhysicsOutcome physics;         ///< validation.physics
};

/// Generate the training files with the simulator when data.simulate is set and the training
/// patterns match no file yet; then open and validate the datasets.
data::Datasets prepare_datasets(const ExperimentConfig& e);

/// Mean of step losses.
class LossAverager {
 public:
  void add(const models::StepLosses& l);
  models::StepLosses mean() const;
  std::int64_t count() const { return m_count; }
  void reset() { *this = LossAverager(); }

 private:
  models::StepLosses m_sum;
  std::int64_t m_count = 0;
};

TrainSummary run_single_process(const ExperimentConfig& e, const RunOptions& options);

}  // namespace mpigan::train
