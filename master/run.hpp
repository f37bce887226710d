// The entry point of a distributed run (`mpigan train` under mpiexec/srun with more than one rank):
// build the topology, prepare the run directory and the data on rank 0, run each rank's role,
// write the timeline, and summarise on rank 0.
#pragma once

#include "mpigan/core/mpi/comm.hpp"
#include "mpigan/master/master.hpp"
#include "mpigan/train/trainer.hpp"
#include "mpigan/worker/dist_config.hpp"

namespace mpigan::master {

struct DistributedSummary {
  MasterResult master;     ///< rank 0's figures
  std::string run_dir;
  std::int64_t workers = 0;
};

/// Collective over @p comm. Throws on error (the application aborts the job).
DistributedSummary run_distributed(const worker::DistExperiment& d, const Comm& comm, const train::RunOptions& options);

/// The id of the checkpoint 'latest' names in @p run_dir (Error when there is none).
std::int64_t latest_checkpoint_id(const std::string& run_dir);

}  // namespace mpigan::master
