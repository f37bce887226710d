// `mpigan train EXP.yaml [--out RUN_DIR] [--resume RUN_DIR] [--set key.path=value ...] [--trace]`
// Validates the whole experiment first (every problem at once), prints the resolved
// configuration, trains, and says where the results are.
#include "commands.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/core/mpi/comm.hpp"
#include "mpigan/core/stop_signal.hpp"
#include "mpigan/dist/dist_config.hpp"
#include "mpigan/dist/launch.hpp"
#include "mpigan/master/server.hpp"
#include "mpigan/train/experiment.hpp"
#include "mpigan/train/trainer.hpp"
#include "mpigan/worker/worker.hpp"

#include <mpi.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace mpigan::apps {
namespace {

struct TrainArgs {
  std::string experiment;
  std::string out;
  std::string resume;
  std::vector<std::string> set;
  bool trace = false;
};

/// A run stopped by a signal says so on stdout and in RUN_DIR/STOPPED: under mpiexec, Hydra's own
/// exit status after it forwarded a signal is not reliable (0 or the ranks' 75, at random; seen
/// with plain shell scripts as ranks too), so job scripts and tests read the file.
void report_stopped(const std::string& run_dir, const std::string& message) {
  std::fputs(message.c_str(), stdout);
  std::fflush(stdout);
  std::ofstream(std::filesystem::path(run_dir) / "STOPPED") << message;
}

/// The experiment and its --set overrides as a shell would take them again (a resume must repeat
/// the overrides: a resume that changes the seed, model, data or batch is refused).
std::string experiment_words(const TrainArgs& a) {
  auto quoted = [](const std::string& w) {
    const bool plain = !w.empty() && w.find_first_not_of(
                                         "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                         "0123456789_-+=.,:/@%[]") == std::string::npos;
    if (plain) return w;
    std::string q = "'";
    for (const char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  std::string words = quoted(a.experiment);
  for (const auto& s : a.set) words += " --set " + quoted(s);
  return words;
}

/// A resumed run is no longer stopped.
void clear_stopped(const std::string& resume_dir) {
  if (resume_dir.empty()) return;
  std::error_code ec;
  std::filesystem::remove(std::filesystem::path(resume_dir) / "STOPPED", ec);
}

void print_config(const std::string& path, const YAML::Node& resolved) {
  YAML::Emitter out;
  out << resolved;
  std::printf("# mpigan train %s: resolved configuration\n%s\n", path.c_str(), out.c_str());
  std::fflush(stdout);
}

void train_distributed(const TrainArgs& a, int size, int rank) {
  // Every rank validates the experiment (cheap, no communication); they agree on the outcome
  // before anything else, and rank 0 prints the problems once (those of the lowest rank that
  // found any: a file may be readable on one node and not on another).
  dist::DistExperiment d;
  std::string problems;
  try {
    d = dist::load_distributed(a.experiment, a.set, size);
  } catch (const ConfigError& e) {
    problems = e.what();
  }
  const Comm world = Comm::world();
  const auto all = world.gather_strings(problems, 0);
  if (world.allreduce_max(problems.empty() ? 0.0 : 1.0) > 0) {
    if (rank == 0) {
      for (int r = 0; r < size; ++r) {
        if (all[static_cast<std::size_t>(r)].empty()) continue;
        std::fprintf(stderr, "mpigan: error: %s%s\n", r == 0 ? "" : fmt::format("rank {}: ", r).c_str(),
                     all[static_cast<std::size_t>(r)].c_str());
        break;
      }
      std::fflush(stderr);
    }
    // Only rank 0 exits with the failure status, after it has printed: a launcher that ends the
    // job when a rank fails (Hydra, srun) could otherwise kill it before its report got out.
    world.barrier();
    MPI_Finalize();
    set_exit_status(rank == 0 ? 1 : 0);
    return;
  }
  if (rank == 0) print_config(a.experiment, d.experiment.resolved);
  if (rank == 0) clear_stopped(a.resume);
  const auto s = dist::run_job(d, world, {a.out, a.resume}, {master::run_master, worker::run_worker});
  if (rank == 0) {
    const auto& m = s.master;
    std::printf(
        "\nTrained %lld updates from %lld worker group(s): %lld samples in %.1f s (%.2f samples/s, steady "
        "state %.2f).\n",
        static_cast<long long>(m.version), static_cast<long long>(s.workers), static_cast<long long>(m.samples),
        m.wall_s, m.wall_s > 0 ? static_cast<double>(m.samples) / m.wall_s : 0.0, m.steady_samples_per_s);
    std::printf("Master: %lld updates applied, %lld rejected; CPU time %.2f s over %.1f s wall (%.1f%% of a core)%s.\n",
                static_cast<long long>(m.applied), static_cast<long long>(m.rejected), m.cpu_s, m.wall_s,
                m.wall_s > 0 ? 100.0 * m.cpu_s / m.wall_s : 0.0, m.stopped_early ? "; stopped early" : "");
    if (d.dist.virtual_compute) {
      std::printf("Virtual workers (%s): nothing was trained, validated or checkpointed.\n",
                  d.dist.virtual_compute->spec().c_str());
      std::printf("Results in %s/: config.yaml, updates.csv%s.\n", s.run_dir.c_str(),
                  d.dist.trace ? ", trace.json" : "");
    } else {
      if (d.experiment.validate)
        std::printf("Last validation: D %.4f, G %.4f.\n", m.last_val_d, m.last_val_g);
      else
        std::printf("Validation: disabled (validation.enabled: false).\n");
      std::printf("Results in %s/: config.yaml, metrics.csv, updates.csv, checkpoints/ (latest: %s)%s.\n",
                  s.run_dir.c_str(), m.last_checkpoint.c_str(), d.dist.trace ? ", trace.json" : "");
    }
    std::fputs(m.physics.summary().c_str(), stdout);
    if (m.stopped_by_signal != 0)
      report_stopped(
          s.run_dir,
          fmt::format("Stopped by {} at update {}, after a complete checkpoint. Resume with:\n  mpiexec -n {} "
                      "mpigan train {} --resume {}   (or srun)\n",
                      signal_name(m.stopped_by_signal), m.version, size, experiment_words(a), s.run_dir));
    std::fflush(stdout);
  }
  const bool failed = rank == 0 && !s.master.failure.empty();
  if (failed) std::fprintf(stderr, "mpigan: error: %s (%s/FAILED)\n", s.master.failure.c_str(), s.run_dir.c_str());
  MPI_Finalize();
  // Every rank finished cleanly; only rank 0 carries the failure (as for configuration errors).
  if (failed)
    set_exit_status(1);
  else if (rank == 0 && s.master.stopped_by_signal != 0)
    set_exit_status(kStoppedBySignalStatus);
}

void train(const TrainArgs& a) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  int size = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  if (size > 1) {
    train_distributed(a, size, rank);
    return;
  }
  // One process: the local optimizer trains; a topology or algorithm section is for runs under
  // mpiexec/srun and is not used here.
  const train::ExperimentConfig e = train::ExperimentConfig::load(a.experiment, a.set, {"topology", "algorithm"});
  init_logging(e.log_level);
  print_config(a.experiment, e.resolved);
  if (e.resolved["algorithm"] || e.resolved["topology"])
    spdlog::warn(
        "one process: the experiment's topology/algorithm sections apply to runs with several ranks "
        "(mpiexec -n N / srun); training with the local optimizer");
  train::RunOptions ro{a.out, a.resume};
  clear_stopped(a.resume);
  const train::TrainSummary s = train::run_single_process(e, ro);
  std::printf("\nTrained %lld steps (%lld samples, %.2f epochs) in %.1f s: %.2f samples/s (steady state %.2f).\n",
              static_cast<long long>(s.steps), static_cast<long long>(s.samples),
              static_cast<double>(s.epochs) + s.epoch_fraction, s.seconds, s.samples_per_s, s.steady_samples_per_s);
  std::printf("Last epoch (mean): D loss %.4f (real %.4f, fake %.4f), G loss %.4f.\n", s.last_epoch.d_loss(),
              s.last_epoch.d_real, s.last_epoch.d_fake, s.last_epoch.g);
  std::printf("Results in %s/: config.yaml, metrics.csv, checkpoints/ (latest: %s)%s.\n", s.run_dir.c_str(),
              s.last_checkpoint.c_str(), s.stopped_early ? "; stopped early" : "");
  std::fputs(s.physics.summary().c_str(), stdout);
  MPI_Finalize();
  if (s.stopped_by_signal != 0) {
    report_stopped(s.run_dir,
                   fmt::format("Stopped by {} at step {}, after a complete checkpoint. Resume with:\n  mpigan "
                               "train {} --resume {}\n",
                               signal_name(s.stopped_by_signal), s.steps, experiment_words(a), s.run_dir));
    set_exit_status(kStoppedBySignalStatus);
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  auto* cmd =
      app.add_subcommand("train", "Train a 3D GAN from an experiment file (one process, or many under mpiexec/srun)");
  cmd->add_option("experiment", a->experiment, "experiment YAML file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--out", a->out, "run directory (default: output.dir, or runs/<name>)");
  cmd->add_option("--resume", a->resume, "continue the run in this directory from its latest checkpoint")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--set", a->set, "override a key: --set training.max_updates=40 (repeatable)");
  cmd->add_flag("--trace", a->trace,
                "write RUN_DIR/trace.json, a Chrome-trace timeline of every rank (= --set logging.trace=true)");
  cmd->callback([a] {
    if (a->trace) a->set.push_back("logging.trace=true");
    train(*a);
  });
}

}  // namespace mpigan::apps
