// `mpiexec -n R mpigan optimize EXP.yaml --block-size B [--folds K]`: a hyper-parameter search
// over blocks of ranks, in the manner of mpi-opt (docs/hpo.md).
//
// Rank 0 coordinates: it asks the optimiser for points, hands them to idle blocks, records every
// trial in the results database (results.hpp), prunes poor trials from the curves their runs
// write, and at the end writes the best trial's experiment and the plots' data. It waits on MPI
// by polling with short sleeps, so it takes no core from the trials beside it.
//
// Ranks 1..R-1 form (R-1)/B blocks of B consecutive ranks by communicator split; leftover ranks
// are reported and idle. A block trains one trial at a time: with K folds its ranks split again
// into K sub-jobs of B/K ranks, each an ordinary mpigan training (a distributed job with the
// experiment's own topology and rule when B/K > 1, a single process otherwise) on K-1 folds of
// the data, validated on the held-out fold (data.cross_validation). Asynchronous: a block that
// finishes gets its next trial at once.
//
// Failures: a trial that diverges or whose configuration is invalid is recorded as failed and the
// search goes on. A rank that crashes takes the MPI job down (MPICH has no fault tolerance); the
// database then holds the trial as running and `--resume` records it as interrupted and runs its
// point again. SIGTERM/SIGINT stop every trial with a checkpoint and end the search cleanly.
#pragma once

#include "mpigan/core/mpi/comm.hpp"
#include "mpigan/dist/launch.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mpigan::hpo {

struct OptimizeOptions {
  std::string experiment;
  std::vector<std::string> set;  ///< --set overrides of the base experiment
  std::string out;               ///< the search directory; empty: runs/<name>-search
  bool resume = false;
  int block_size = 1;
  std::optional<int> folds;
  std::optional<std::int64_t> trials;
  std::string algorithm;     ///< empty: the experiment's search.algorithm
  bool quiet_trials = true;  ///< trials log at level warn (logging.level=warn appended)
};

struct OptimizeOutcome {
  int status = 0;          ///< rank 0: the process exit status (0 fine, 1 error)
  std::string search_dir;  ///< rank 0
  std::int64_t best_trial = -1;
  /// rank 0: what the search did, for the terminal (the blocks' time in trials, the counts, the
  /// best trial); or every configuration problem, when status is 1 before any trial.
  std::string report;
};

/// Collective over @p world (rank 0 coordinates). Configuration problems end the search before
/// any trial (status 1, the problems in report).
OptimizeOutcome run_optimize(const OptimizeOptions& o, const Comm& world, const dist::Roles& roles);

}  // namespace mpigan::hpo
