// The launch of a distributed job's roles (`mpigan train` under mpiexec/srun with more than one
// rank): build the topology, prepare the run directory and the data on rank 0, start the
// watchdog, build each rank's training session and payload channels, run the rank's role, write
// the timeline, and summarise on rank 0.
//
// The roles themselves live in master/ and worker/, which both link this layer and never each
// other; the caller (apps/, the MPI tests) hands them in:
//
//   dist::run_job(d, world, options, {master::run_master, worker::run_worker});
#pragma once

#include "mpigan/core/mpi/comm.hpp"
#include "mpigan/dist/dist_config.hpp"
#include "mpigan/dist/payload_channel.hpp"
#include "mpigan/dist/protocol.hpp"
#include "mpigan/dist/topology.hpp"
#include "mpigan/dist/trace.hpp"
#include "mpigan/train/session.hpp"
#include "mpigan/train/trainer.hpp"

#include <functional>
#include <string>

namespace mpigan::dist {

/// What a master rank reports at the end (the top master's figures summarise the job).
struct MasterResult {
  std::int64_t version = 0, applied = 0, rejected = 0, samples = 0;
  double wall_s = 0, cpu_s = 0;
  /// Seconds spent waiting for requests (no request pending): wall_s - idle_s is the busy time.
  double idle_s = 0;
  /// Samples per second once every child has had an update applied (start-up excluded).
  double steady_samples_per_s = 0;
  std::string last_checkpoint;
  double last_val_d = 0, last_val_g = 0;
  bool stopped_early = false;
  int stopped_by_signal = 0;      ///< SIGTERM/SIGINT/SIGUSR1 (core/stop_signal.hpp) ended the run
  train::PhysicsOutcome physics;  ///< validation.physics (top master)
  /// Why the run failed although every rank finished cleanly (training diverged); empty if not.
  std::string failure;
};

/// Everything a role needs, built by run_job (or by a benchmark that plays a job's part).
struct RoleContext {
  const DistExperiment& job;  ///< the experiment and its distributed part
  Topology& topology;         ///< this rank's place in the job
  std::string run_dir;
  std::int64_t resume = -1;  ///< the checkpoint id to continue from; -1: a fresh start
  Trace& trace;
  const PayloadChannels& channels;
  train::Session session;  ///< this rank's backend, model, optimizers and GAN step
  PayloadLayout layout;    ///< of session.model
  /// A sub-master calls it just before its closing barrier (the watchdog's goodbye).
  std::function<void()> before_barrier;
  /// train::RunOptions::prune: the top master asks it after each validation.
  std::function<bool()> prune;
};

struct Roles {
  std::function<MasterResult(RoleContext&)> master;  ///< top and sub-masters
  std::function<void(RoleContext&)> worker;
};

struct JobSummary {
  MasterResult master;  ///< rank 0's figures
  std::string run_dir;
  std::int64_t workers = 0;
};

/// The seed of the GAN step's randomness on worker rank @p rank (labels, noise, flips): per rank,
/// derived from the experiment's seed. The sandbox's virtual worker k uses the seed of the rank a
/// one-master job would give it (k + 1).
std::uint64_t worker_step_seed(const train::ExperimentConfig& e, int rank);
/// The training session of this rank's role: a master's canonical model (initialised from the
/// experiment's seed; sub-masters on the host backend, they only add vectors), or a worker's, its
/// step randomness seeded per rank.
train::Session role_session(const train::ExperimentConfig& e, const Topology& t);

/// Collective over @p comm. Throws on error (the application aborts the job).
JobSummary run_job(const DistExperiment& d, const Comm& comm, const train::RunOptions& options, const Roles& roles);

}  // namespace mpigan::dist
