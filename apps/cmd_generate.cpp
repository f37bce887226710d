// `mpigan generate`: showers from a trained generator, written like a data file (train/generate.hpp).
//
//   mpigan generate --list                      the shipped generators and their validation
//   mpigan generate RUN_DIR|CHECKPOINT|NAME --events N (--energy A:B | --like FILE.h5) [--angle A:B]
//                   --out FILE.h5 [--batch B] [--seed S] [--backend cpu|cuda|reference] [--threads T]
//                   [--precision fp32|bf16]
// Energies in GeV; angles in degrees on the command line (radians in the file), as `simulate`.
// `mpigan inspect FILE.h5` reads the result like any data file.
#include "commands.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/data/simulator/simulate_dataset.hpp"
#include "mpigan/train/generate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

namespace mpigan::apps {
namespace {

struct GenerateArgs {
  std::string source;
  std::string energy, angle, like, out, backend, precision;
  std::int64_t events = 0, batch = 128;
  std::uint64_t seed = 1;
  int threads = 0;
  int recalibrate = 0;
  bool batch_statistics = false;
  bool list = false;
};

void list_generators() {
  const auto list = train::shipped_generators();
  std::printf("shipped generators (%s):\n", train::shipped_generators_dir().c_str());
  if (list.empty()) std::printf("  (none)\n");
  std::size_t width = 0;  // the names in one column, however long the longest
  for (const auto& g : list) width = std::max(width, g.name.size());
  for (const auto& g : list) std::printf("  %-*s %s\n", static_cast<int>(width), g.name.c_str(), g.summary.c_str());
  std::printf("use one by name: mpigan generate NAME ..., mpigan validate NAME --reference MC.h5\n");
}

void run_generate(const GenerateArgs& a) {
  init_logging("warn");
  if (a.list) {
    list_generators();
    return;
  }
  MPIGAN_CHECK(!a.source.empty() && !a.out.empty(),
               "generate: give a run directory, checkpoint or shipped generator and --out FILE.h5 (or --list)");
  train::GenerateOptions o;
  o.events = a.events;
  o.like = a.like;
  o.out = a.out;
  o.batch = a.batch;
  o.seed = a.seed;
  o.backend = a.backend;
  o.threads = a.threads;
  o.precision = a.precision;
  o.recalibrate_batches = a.recalibrate;
  o.batch_statistics = a.batch_statistics;
  MPIGAN_CHECK(a.energy.empty() != a.like.empty(), "generate: give exactly one of --energy A:B and --like FILE.h5");
  if (!a.energy.empty()) o.energy = data::sim::parse_range(a.energy, "--energy");
  if (!a.angle.empty()) {
    const auto [lo, hi] = data::sim::parse_range(a.angle, "--angle");
    const double rad = std::acos(-1.0) / 180.0;
    o.angle = std::pair{lo * rad, hi * rad};
  }
  const train::TrainedModel m = train::locate_trained(a.source);
  std::printf("generating with %s (model %s, experiment '%s')\n", m.checkpoint.c_str(), m.experiment.model.name.c_str(),
              m.experiment.name.c_str());
  const auto r = train::generate_showers(m, o);
  std::printf("%lld showers in %.2f s: %.1f showers/s (generation; %.2f s with writing) -> %s\n",
              static_cast<long long>(r.events), r.seconds, r.showers_per_s, r.total_seconds, a.out.c_str());
  std::printf("showers_per_s=%.2f\n", r.showers_per_s);
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Generate showers with a trained generator into a data file");
  cmd->add_option("source", a->source,
                  "run directory (its latest checkpoint), checkpoint file, or the name of a shipped generator");
  cmd->add_flag("--list", a->list, "list the shipped generators with their validation against Monte Carlo");
  cmd->add_option("--events", a->events, "number of showers (with --like: at most this many; 0 = all)")
      ->check(integer_check(0));
  cmd->add_option("--energy", a->energy, "primary energy range in GeV, LO:HI (uniform)");
  cmd->add_option("--like", a->like, "take each shower's energy (and angle) from this data file");
  cmd->add_option("--angle", a->angle, "polar angle range in degrees, LO:HI (angle model; default 90:90)");
  cmd->add_option("--out", a->out, "output file (.h5)");
  cmd->add_option("--batch", a->batch, "showers per generator call")->capture_default_str();
  cmd->add_option("--seed", a->seed, "seed of the conditions and the latent noise")
      ->check(seed_check())
      ->capture_default_str();
  cmd->add_option("--backend", a->backend, "cpu, cuda or reference (default: the experiment's)");
  cmd->add_option("--threads", a->threads, "CPU threads (default: the experiment's)")->check(integer_check(0, 1024));
  add_precision_option(*cmd, a->precision, "fp32 or bf16 convolutions (default: the experiment's)");
  cmd->add_option("--recalibrate-bn", a->recalibrate,
                  "first re-estimate the generator's BatchNorm statistics for its weights over this many batches "
                  "(0: the checkpoint's)")
      ->check(integer_check(0, 100000));
  cmd->add_flag("--batch-statistics", a->batch_statistics,
                "normalise the generator's BatchNorm layers with each batch's own statistics, as its training "
                "passes do, in batches of the experiment's training batch size (instead of the running statistics)");
  cmd->callback([a] { run_generate(*a); });
}

}  // namespace mpigan::apps
