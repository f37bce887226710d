// Fast simulation: showers from a trained generator, in the real file layout and physical units.
//
// The source is a run directory (its config.yaml and checkpoints/latest) or one checkpoint file
// (its run directory's config.yaml is found above it). Both checkpoint forms load: the
// single-process trainer's (model/generator/{weights,state}) and a distributed run's main file
// (model/generator/weights and the concatenated model/state). Conditions are drawn uniformly from
// an energy range (and an angle range for the angle model), or taken event by event from a data
// file (--like). The generator's output is mapped back through the inverse of the experiment's
// preprocessing (data/preprocess.hpp: 1/power, /xscale, model units -> file units) and written as
// the geometry's real files are: 25^3 in GeV, 51x51x25 in GeV x 50, with `energy` (and `theta`,
// `mtheta`, `eta`) labels and `sum`. A seed gives the same file on every run and backend (the
// latent noise comes from the step's seeded stream; backends agree to their tolerance).
#pragma once

#include "mpigan/data/layout.hpp"
#include "mpigan/models/gan_step.hpp"
#include "mpigan/train/experiment.hpp"

#include <functional>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mpigan::train {

struct Session;

/// The experiment and checkpoint behind a run directory or a checkpoint file.
struct TrainedModel {
  ExperimentConfig experiment;
  std::string run_dir;
  std::string checkpoint;
};
/// Throws Error naming what is missing (config.yaml, checkpoints/latest, the file). A name that is
/// not a path but names a shipped generator (below) is that generator.
TrainedModel locate_trained(const std::string& run_dir_or_checkpoint);

/// The generator's weights and BatchNorm state from checkpoint @p path (a single process's or a
/// distributed run's main file) into @p s's model.
void load_generator(const std::string& path, Session& s);

/// Generators shipped with mpigan: each a folder of shipped_generators_dir() laid out as a run
/// directory (config.yaml, checkpoints/latest, the checkpoint), with validation.json (its physics
/// against Monte Carlo of another seed) and PROVENANCE.md (the experiment, commands and commit that
/// made it). The folder is $MPIGAN_GENERATORS when set, else generators/ of the source tree.
std::string shipped_generators_dir();
struct ShippedGenerator {
  std::string name, dir;
  std::string summary;  ///< one line from validation.json ("" when it has none)
};
std::vector<ShippedGenerator> shipped_generators();

struct GenerateOptions {
  std::int64_t events = 0;                          ///< 0 with `like`: one per event of that file
  std::optional<std::pair<double, double>> energy;  ///< GeV, uniform
  std::optional<std::pair<double, double>> angle;   ///< radians, uniform (angle model)
  std::string like;                                 ///< take the conditions from this data file
  std::string out;
  std::int64_t batch = 128;
  std::uint64_t seed = 1;
  std::string backend;    ///< empty: the experiment's
  int threads = 0;        ///< 0: the experiment's
  std::string precision;  ///< empty: the experiment's; fp32 or bf16 (BackendOptions::precision)
  /// > 0: first re-estimate the generator's BatchNorm statistics for its weights over this many
  /// batches of the conditions (GanStep::recalibrate_generator_state); 0: the checkpoint's.
  int recalibrate_batches = 0;
  /// Normalise the generator's BatchNorm layers with each batch's own statistics, as in training,
  /// in batches of the experiment's training batch size (GanStep::generate).
  bool batch_statistics = false;
};

struct GenerateSummary {
  std::int64_t events = 0;
  double seconds = 0;  ///< generation alone (not loading or writing)
  double showers_per_s = 0;
  double total_seconds = 0;  ///< with writing the file
};

/// Conditions of the showers to generate: energy in GeV per event, angle in radians (angle model)
/// or empty.
struct ShowerConditions {
  std::vector<float> energy;
  std::vector<float> angle;
};

/// Runs @p step's generator (inference mode) over @p c in batches of @p batch, mapping each batch
/// back to @p units through the inverse of @p pre; calls @p sink(first_event, showers (k,1,X,Y,Z))
/// per batch. Batch b0's latent noise comes from seed + b0. Returns the seconds spent generating.
double generate_batches(models::GanStep& step, const data::Preprocess& pre, const ShowerConditions& c,
                        std::int64_t batch, std::uint64_t seed, data::Units units,
                        const std::function<void(std::int64_t, const Tensor&)>& sink, bool batch_statistics = false);

/// Re-estimate @p step's generator statistics for its weights (GanStep::recalibrate_generator_state)
/// over @p passes passes of one batch of @p batch conditions spread over all of @p c.
void recalibrate_generator(models::GanStep& step, const data::Preprocess& pre, const ShowerConditions& c,
                           std::int64_t batch, std::int64_t passes, std::uint64_t seed);

/// Generates and writes @p o.out. Throws ConfigError for bad options, DataError for bad files.
GenerateSummary generate_showers(const TrainedModel& m, const GenerateOptions& o);

}  // namespace mpigan::train
