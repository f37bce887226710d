// `mpigan train EXP.yaml [--out RUN_DIR] [--resume RUN_DIR] [--set key.path=value ...]`
// Validates the whole experiment first (every problem at once), prints the resolved
// configuration, trains, and says where the results are.
#include "commands.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/train/experiment.hpp"
#include "mpigan/train/trainer.hpp"

#include <mpi.h>

#include <cstdio>

namespace mpigan::apps {
namespace {

struct TrainArgs {
  std::string experiment;
  std::string out;
  std::string resume;
  std::vector<std::string> set;
};

void train(const TrainArgs& a) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  int size = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (size > 1) set_process_label(fmt::format("rank {}", rank));

  const train::ExperimentConfig e = train::ExperimentConfig::load(a.experiment, a.set);
  init_logging(e.log_level);
  if (rank == 0) {
    YAML::Emitter out;
    out << e.resolved;
    std::printf("# mpigan train %s: resolved configuration\n%s\n", a.experiment.c_str(), out.c_str());
    std::fflush(stdout);
  }
  if (size > 1) {
    MPIGAN_FATAL("{} ranks: distributed training needs the topology and algorithm sections (not in this build)", size);
  }
  train::RunOptions ro{a.out, a.resume};
  const train::TrainSummary s = train::run_single_process(e, ro);
  std::printf("\nTrained %lld steps (%lld samples, %.2f epochs) in %.1f s: %.2f samples/s.\n",
              static_cast<long long>(s.steps), static_cast<long long>(s.samples),
              static_cast<double>(s.epochs) + s.epoch_fraction, s.seconds, s.samples_per_s);
  std::printf("Last epoch (mean): D loss %.4f (real %.4f, fake %.4f), G loss %.4f.\n", s.last_epoch.d_loss(), s.last_epoch.d_real,
              s.last_epoch.d_fake, s.last_epoch.g);
  std::printf("Results in %s/: config.yaml, metrics.csv, checkpoints/ (latest: %s).\n", s.run_dir.c_str(),
              s.last_checkpoint.c_str());
  MPI_Finalize();
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand("train", "Train a 3D GAN from an experiment file (one process, or many under mpiexec/srun)");
  cmd->add_option("experiment", a->experiment, "experiment YAML file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--out", a->out, "run directory (default: output.dir, or runs/<name>)");
  cmd->add_option("--resume", a->resume, "continue the run in this directory from its latest checkpoint")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--set", a->set, "override a key: --set training.max_updates=40 (repeatable)");
  cmd->callback([a] { train(*a); });
}

}  // namespace mpigan::apps
