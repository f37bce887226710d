// The classifier test: a small MLP built with mpigan's own nn layers learns to
// tell generated from reference showers on the high-level features (features.hpp, standardised on
// the reference); its ROC AUC on held-out events is the verdict: 0.5 = indistinguishable, 1 = every
// shower told apart. CaloChallenge's evaluation does the same with PyTorch
// (arXiv:2410.21611); none of the 3DGAN tools has it.
//
// Recipe: the larger sample is subsampled to the smaller one's size (balanced classes; both to
// `max_events` when set), events are
// shuffled with the seed and split train / validation / test (60/20/20 by default, each class split
// alone, so every split is balanced too); the network is
// Dense(d, h) LeakyReLU(0.2) [Dense(h, h) LeakyReLU(0.2)] x (layers - 1) Dense(h, 1) Sigmoid,
// Glorot-initialised, trained with Adam on binary cross-entropy in mini-batches, for at most
// `epochs` epochs, stopping after `patience` epochs without a lower validation loss and keeping the
// best weights. Reported on the test split: AUC (Mann-Whitney, ties counted half) with its
// Hanley-McNeil standard error, and JSD = max(0, (ln 2 - BCE) / ln 2) as CaloChallenge defines it.
// Labels: reference 0, generated 1, so AUC > 0.5 means the network scores generated showers higher.
//
// Deterministic for a seed on a given backend and thread count (the subsample, the shuffle, the
// split, the initial weights and the batch order all come from Rng(seed, ...) streams). Not part of
// the figure of merit; compare() runs it by default (about 0.1 s at 2 000 events).
#pragma once

#include "mpigan/core/backend.hpp"
#include "mpigan/physics/features.hpp"
#include "mpigan/physics/observables.hpp"

#include <cstdint>
#include <span>

namespace mpigan::physics {

/// The smallest sample the classifier test takes (either class): below it the test split is too
/// small for an AUC worth reading.
inline constexpr std::int64_t kClassifierMinEvents = 50;

/// ROC AUC of @p scores for binary @p labels (1 = positive, 0 = negative): the probability that a
/// random positive scores above a random negative, ties counting half,
/// @f$ \mathrm{AUC} = \frac{R_1 - n_1(n_1+1)/2}{n_1 n_0} @f$ with @f$ R_1 @f$ the positives' rank sum
/// (tied scores sharing their mean rank). Throws when a class is empty, a label is not 0 or 1, a
/// score is not finite or the lengths differ.
double roc_auc(std::span<const double> scores, std::span<const int> labels);

struct ClassifierOptions {
  int hidden = 64;  ///< units per hidden layer
  int layers = 2;   ///< hidden layers (each Dense + LeakyReLU)
  int epochs = 40;  ///< at most
  int patience = 5;
  int batch = 128;
  double lr = 1e-3;  ///< Adam's learning rate
  std::uint64_t seed = 1;
  double train_fraction = 0.6, validation_fraction = 0.2;  ///< the test split gets the rest
  /// At most this many events of each class (0: all of the smaller sample), drawn without
  /// replacement with the seed. The AUC of a real difference grows with the classifier's training
  /// set, so verdicts against a threshold compare at one size: a large validation sample keeps its
  /// per-bin statistics and still scores the classifier at the size its threshold was set for.
  std::int64_t max_events = 0;
  /// Classifiers trained with seeds seed, seed + 1, ..., seed + repeats - 1 (each its own subsample,
  /// split, initial weights and batch order); the result holds their mean AUC, JSD and BCE and the
  /// AUCs' standard deviation (`auc_spread`). One classifier's AUC moves with its seed by more than
  /// its Hanley-McNeil error says, which covers the test split's size alone.
  int repeats = 1;
  /// Host threads of the network's ops while the test runs (0: the process's). 1 by default: at
  /// 128 x 127 x 64 a GEMM is too small to gain from a team, and on a busy machine each OpenMP
  /// fork-join waits for a descheduled thread (measured 10-70x slower with 2 threads on 2 shared
  /// cores, 0.06-0.1 s with 1). The result does not depend on it.
  int threads = 1;
  FeatureOptions features;
};

struct ClassifierResult {
  double auc = 0.5, auc_error = 0, jsd = 0;
  double test_bce = 0, validation_bce = 0;                                ///< mean BCE (nats)
  std::int64_t train_events = 0, validation_events = 0, test_events = 0;  ///< both classes together
  int epochs_run = 0, best_epoch = 0;  ///< best_epoch 0: the initial weights were never bettered
  int repeats = 1;                     ///< classifiers averaged (ClassifierOptions::repeats)
  double auc_spread = 0;               ///< their AUCs' standard deviation (0 for one classifier)
  double seconds = 0;
};

/// Trains and evaluates the classifier on @p backend (see the header comment). Throws when the
/// samples are too small (fewer than 50 events in one of them), of different geometries, or the
/// options are out of range.
ClassifierResult classifier_test(const Observables& ref, const Observables& gen, Backend& backend,
                                 const ClassifierOptions& options = {});

/// The same on a CPU backend made for the call.
ClassifierResult classifier_test(const Observables& ref, const Observables& gen, const ClassifierOptions& options = {});

}  // namespace mpigan::physics
