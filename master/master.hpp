// A master rank: holds the canonical weights of G and D (host copies) and BatchNorm state, serves
// its children's requests one at a time, applies the update rule, and answers with fresh weights.
//
// Serving order: the master keeps one receive posted per child and, of the requests that have
// arrived, serves them in round-robin order starting after the child served last, so no child can
// starve another (MPI gives no fairness among sources; mpi-learn and the GEM reference code served
// low ranks first). Waiting polls with sleeps (core/mpi/comm.hpp): the master's idle time does not
// burn the core a worker on its node needs.
//
// The top master also validates every validation.every updates, stops early, checkpoints, and logs
// one row per update to updates.csv (step, worker, staleness, update norms, the rule's scale, queue
// and wait times, verdict, losses). A sub-master serves its own workers with the update rule and,
// every topology.submaster_every of its updates, sends its accumulated change to the top master
// (added there; averaged in rounds for synchronous rules) and continues from the top's weights.
//
// Non-finite updates are rejected and logged, never applied; training.max_nonfinite of them in a
// row (the weights are such that no worker computes a finite gradient any more) stop the run as
// diverged, with a checkpoint of the last (finite) weights. BatchNorm running statistics: every
// update carries its worker's statistics; the canonical statistics are the mean of the latest ones
// of all children, sent back with the weights (so every replica normalises alike).
#pragma once

#include "mpigan/worker/dist_config.hpp"
#include "mpigan/worker/payload_channel.hpp"
#include "mpigan/worker/topology.hpp"
#include "mpigan/worker/trace.hpp"

#include <functional>
#include <string>

namespace mpigan::master {

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
  /// Why the run failed although every rank finished cleanly (training diverged); empty if not.
  std::string failure;
};

/// @p channels: the shared-memory payload slots of this rank (worker/payload_channel.hpp; a
/// default-constructed one sends every payload over MPI). @p before_barrier runs just before the
/// closing barrier (a sub-master's watchdog goodbye).
MasterResult run_master(const worker::DistExperiment& d, worker::Topology& t, const std::string& run_dir,
                        std::int64_t resume_checkpoint, worker::Trace& trace, const worker::PayloadChannels& channels,
                        const std::function<void()>& before_barrier = {});

}  // namespace mpigan::master
