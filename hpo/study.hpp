// A hyper-parameter study: the `search:` section of an experiment file, and how a trial's result
// is read from its metrics.csv.
//
//   search:
//     dimensions:                        # any experiment key path
//       - {key: optimizer.lr, type: log-real, low: 1.0e-5, high: 1.0e-2}
//       - {key: training.batch, type: categorical, choices: [8, 16, 32]}
//       - {key: model.latent, type: integer, low: 100, high: 300}
//     objective: {metric: fpd_hlf, mode: min, at: last}   # at: last | best | mean (of the last `last` points)
//     algorithm: gp                      # gp | evolution | random (mpigan optimize --algorithm overrides)
//     trials: 20
//     points: [{}, {optimizer.lr: 1.0e-3}]  # tried first, in order; a dimension a point leaves out
//                                        # takes the experiment's own value ({}: the experiment as written)
//     folds: 1                           # K-fold cross-validation inside each trial
//     seed: 1
//     gp: {...}  evolution: {...}  early_stopping: {...}     # the algorithms' options
//
// The objective is the physics figure of merit by default. Any column of metrics.csv can be used:
// the physics columns by name (fpd_hlf, sf_mre, gan3d_metric, kpd) and the validation losses as
// val_<column> (val_g_loss, val_d_loss, ...), the names of validation.early_stopping.
//
// Validation is the experiment's own: every problem of the section with its line and column, and
// each dimension tried at its bounds and at every choice against the whole experiment (an unknown
// key path or a value the experiment refuses is reported with the dimension that produced it).
#pragma once

#include "mpigan/core/config.hpp"
#include "mpigan/hpo/bayes.hpp"
#include "mpigan/hpo/evolution.hpp"
#include "mpigan/hpo/optimizer.hpp"
#include "mpigan/hpo/pruner.hpp"
#include "mpigan/hpo/space.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mpigan::hpo {

struct Objective {
  std::string metric = "fpd_hlf";
  bool minimize = true;
  enum class At { last, best, mean } at = At::last;
  int last = 3;  ///< at: mean: the mean of the last `last` points of the curve

  /// The row kind of metrics.csv the metric lives in ("physics" or "validation") and its column.
  std::pair<std::string, std::string> source() const;
  /// The objective of a curve (its values in order), minimised: a maximised metric changes sign.
  /// nullopt when the curve is empty or the value is not finite.
  std::optional<double> of(const std::vector<double>& values) const;
  std::string describe() const;
};

struct StudyConfig {
  SearchSpace space;
  Objective objective;
  std::string algorithm = "gp";
  std::int64_t trials = 20;
  int folds = 1;
  std::uint64_t seed = 1;
  BayesOptions gp;
  EvolutionOptions evolution;
  PrunerOptions early_stopping;
  std::vector<Point> points;  ///< `points`: tried first, in order, before the algorithm's own
  YAML::Node resolved;        ///< the section with defaults filled in (search.json, the log)
};

/// Parses doc's `search:` section (problems recorded in @p doc). @p check_point loads the whole
/// experiment with a list of "key=value" overrides and returns its problems (empty: fine); every
/// dimension's bounds and choices are tried through it.
StudyConfig parse_study(ConfigDocument& doc,
                        const std::function<std::string(const std::vector<std::string>&)>& check_point);

/// The optimiser a study asks for (its `points` first).
std::unique_ptr<Optimizer> make_optimizer(const StudyConfig& s);

/// The metric's curve from a metrics.csv, as written (not sign-flipped): the rows of its kind
/// that have a value, step = samples seen. Throws mpigan::Error naming the file when it cannot be
/// read or has no such column.
Curve read_curve(const std::string& metrics_csv, const Objective& o);
/// The curve sign-flipped for minimisation (what the pruners compare).
Curve minimised(Curve c, const Objective& o);

}  // namespace mpigan::hpo
