// `mpiexec -n R mpigan optimize EXP.yaml --block-size B [--folds K] [--trials T]
//  [--algorithm gp|evolution|random] [--out DIR] [--resume] [--set key=value ...]`
// A hyper-parameter search over blocks of ranks (hpo/coordinator.hpp, docs/hpo.md), then its plots.
#include "commands.hpp"

#include "mpigan/hpo/coordinator.hpp"
#include "mpigan/master/server.hpp"
#include "mpigan/worker/worker.hpp"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>

namespace mpigan::apps {
namespace {

struct OptimizeArgs {
  hpo::OptimizeOptions o;
  int folds = 0;
  std::int64_t trials = 0;
  bool verbose = false, no_plots = false;
};

void optimize(OptimizeArgs& a) {
  if (a.folds > 0) a.o.folds = a.folds;
  if (a.trials > 0) a.o.trials = a.trials;
  a.o.quiet_trials = !a.verbose;
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  const Comm world = Comm::world();
  const hpo::OptimizeOutcome out = hpo::run_optimize(a.o, world, {master::run_master, worker::run_worker});
  const int rank = world.rank();
  MPI_Finalize();
  if (rank != 0) return;
  if (out.status != 0 && out.search_dir.empty()) {  // the search did not start: its problems
    std::fprintf(stderr, "mpigan: error: %s\n", out.report.c_str());
    set_exit_status(1);
    return;
  }
  std::fputs(out.report.c_str(), stdout);
  if (!out.search_dir.empty() && !a.no_plots && run_python_script("plot_search.py", {out.search_dir}))
    std::printf("Plots: %s/search_fom.png, %s/search_params.png\n", out.search_dir.c_str(), out.search_dir.c_str());
  set_exit_status(out.status);
}

}  // namespace

void add_optimize_command(CLI::App& app) {
  auto a = std::make_shared<OptimizeArgs>();
  auto* cmd = app.add_subcommand(
      "optimize", "Hyper-parameter search over blocks of ranks: mpiexec -n R mpigan optimize EXP.yaml --block-size B");
  cmd->add_option("experiment", a->o.experiment, "experiment YAML file with a search: section")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--block-size", a->o.block_size, "ranks per trial (a block); ranks 1..R-1 form the blocks")
      ->check(integer_check(1));
  cmd->add_option("--folds", a->folds, "K-fold cross-validation: each block splits into K sub-jobs (= search.folds)")
      ->check(integer_check(1));
  cmd->add_option("--trials", a->trials, "number of trials (= search.trials)")->check(integer_check(1));
  cmd->add_option("--algorithm", a->o.algorithm, "gp | evolution | random (= search.algorithm)")
      ->check(CLI::IsMember({"gp", "evolution", "random"}));
  cmd->add_option("--out", a->o.out, "search directory (default: runs/<name>-search)");
  cmd->add_flag("--resume", a->o.resume, "continue the search in --out (or the default directory)");
  cmd->add_option("--set", a->o.set, "override a key of the base experiment (repeatable)");
  cmd->add_flag("--verbose-trials", a->verbose, "keep the trials' own logging level (default: warnings only)");
  cmd->add_flag("--no-plots", a->no_plots, "do not draw search_fom.png and search_params.png");
  cmd->callback([a] { optimize(*a); });
}

}  // namespace mpigan::apps
