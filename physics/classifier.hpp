// The classifier test (issue 13, part 2): a small MLP built with mpigan's own nn layers learns to
// tell generated from reference showers on the high-level features (features.hpp, standardised on
// the reference); its ROC AUC on held-out events is the verdict: 0.5 = indistinguishable, 1 = every
// shower told apart. CaloChallenge's evaluation does the same with PyTorch (research/
// physics_hpo_scale.md); none of the 3DGAN tools has it.
//
// Recipe: the larger sample is subsampled to the smaller one's size (balanced classes), events are
// shuffled with the seed and split 60/20/20 into train, validation and test; the network is
// Dense(d, h) LeakyReLU(0.2) Dense(h, h) LeakyReLU(0.2) Dense(h, 1) Sigmoid, Glorot-initialised,
// trained with Adam on binary cross-entropy in mini-batches, for at most `epochs` epochs, stopping
// after `patience` epochs without a lower validation loss and keeping the best weights. Reported on
// the test split: AUC (Mann-Whitney, ties counted half) with its Hanley-McNeil standard error, and
// JSD = max(0, (ln 2 - BCE) / ln 2) as CaloChallenge defines it. Deterministic for a seed (CPU
// backend). Not part of the figure of merit (it costs seconds to minutes); `mpigan validate
// --classifier` runs it.
#pragma once

#include "mpigan/physics/features.hpp"
#include "mpigan/physics/observables.hpp"

#include <cstdint>
#include <span>

namespace mpigan::physics {

/// ROC AUC of @p scores for binary @p labels (1 = positive): the probability that a random
/// positive scores above a random negative, ties counting half. Throws when a class is empty.
double roc_auc(std::span<const double> scores, std::span<const int> labels);

struct ClassifierOptions {
  int hidden = 64;
  int epochs = 40;
  int patience = 5;
  int batch = 128;
  double lr = 1e-3;
  std::uint64_t seed = 1;
  int threads = 0;  ///< CPU threads (0: the default)
  FeatureOptions features;
};

struct ClassifierResult {
  double auc = 0.5, auc_error = 0, jsd = 0;
  double test_bce = 0;
  std::int64_t train_events = 0, test_events = 0;  ///< per class x 2
  int epochs_run = 0;
  double seconds = 0;
};

/// Trains and evaluates the classifier (see the header comment). Throws when the samples are too
/// small (fewer than 50 events in one of them) or of different geometries.
ClassifierResult classifier_test(const Observables& ref, const Observables& gen, const ClassifierOptions& options = {});

}  // namespace mpigan::physics
