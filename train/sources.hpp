// Where batches come from: the HDF5 datasets of the experiment (opened and validated once) or the
// synthetic toy showers of the tiny-8 sandbox. Trainers, workers and masters ask this for their
// shard's training source and for a validation source.
#pragma once

#include "mpigan/data/batch_source.hpp"
#include "mpigan/data/dataset.hpp"
#include "mpigan/train/experiment.hpp"

#include <memory>

namespace mpigan::train {

class DataPlan {
 public:
  /// Opens the experiment's data. With @p prepare, simulates the training files first when
  /// data.simulate asks for it and they do not exist (do this on one rank only).
  static DataPlan open(const ExperimentConfig& e, bool prepare);

  /// Shard @p shard of @p shards, @p batch events per batch, full batches only.
  std::unique_ptr<data::BatchSource> train(std::int64_t batch, int shard = 0, int shards = 1) const;
  /// Held-out data in a fixed order (the training set when there is none); nullptr when it has
  /// fewer than @p batch events.
  std::unique_ptr<data::BatchSource> validation(std::int64_t batch) const;
  std::string describe() const;

 private:
  const ExperimentConfig* m_experiment = nullptr;
  data::Datasets m_sets;
};

/// The next training batch, going on into the next epoch at an epoch's end; false once
/// @p epochs epochs are done (a worker's loop and the sandbox's virtual workers).
bool next_batch(data::BatchSource& loader, data::Batch& b, std::int64_t epochs);

}  // namespace mpigan::train
