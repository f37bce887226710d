// The research sandbox: one master (or a tree: a top master and sub-masters) and N virtual workers
// in one process, through the real update service (master/update_service.hpp), the real rules of
// algos/ and the real models, ordered by a discrete-event clock (docs/sandbox.md).
//
// Each virtual worker keeps what a worker rank keeps — its weights and BatchNorm state, its rule's
// worker sides and (local rules) its own optimizers, its shard of the data, its step seed — and
// computes its update for real, on one shared session, on the weights it was last given; so the
// staleness each update sees is exact. Time is simulated: a worker's compute time comes from a
// model (dist/timing.hpp), each message costs latency + bytes / bandwidth, and the master spends a
// fixed service time per update, serving arrivals first come, first served (a pull-then-push
// rule's master waits for the pulling worker's update, as the real one does). Given the same
// experiment, N and seed, a run is the same, bit for bit.
//
// Virtual worker k is rank M + k of a job with topology.masters = M: the same step seed and data
// shard, and (M > 1) the same sub-master, 1 + k mod (M - 1); so a synchronous sandbox run
// reproduces the real job's weights exactly, with or without sub-masters. A sub-master exchanges
// its change with the top master every topology.submaster_every of its versions, as a real one
// does (master/parent_change.hpp), and its workers wait meanwhile.
//
// It writes what a real run writes: updates.csv (time_s is simulated time), metrics.csv
// (validation losses and the physics figure of merit at validation.every / physics.every,
// scored at once, not on a thread), checkpoints/final.h5 (the canonical model, for
// `mpigan generate` and `mpigan validate`) and sandbox.json (the clock models and the summary).
#pragma once

#include "mpigan/dist/dist_config.hpp"
#include "mpigan/dist/launch.hpp"
#include "mpigan/dist/timing.hpp"

#include <string>
#include <vector>

namespace mpigan::sandbox {

// The clock models live in dist/ (a real job's virtual workers draw from them too).
using dist::ComputeModel;
using dist::NetworkModel;

struct SandboxOptions {
  int workers = 4;
  ComputeModel compute = ComputeModel::parse("constant:0.25");
  NetworkModel network;
  double master_s = 4e-4;  ///< the master's service time per update (`mpigan bench master`)
  std::uint64_t seed = 0;  ///< of the clock models (the experiment's seed drives the training)
  std::string out_dir;     ///< the run directory (default: the experiment's output_dir)
  bool final_checkpoint = true;
  /// Continue the run in out_dir from its sandbox-state.h5 (written when a run stops by a signal
  /// or at its budget, and every checkpoint.every versions), exactly where it stopped: raise training.max_samples (or
  /// max_updates) to extend a run that spent its budget.
  bool resume = false;
  /// With resume: the run directory whose state to continue (empty: out_dir). Another directory
  /// makes a branch: its logs and best generator are copied into out_dir and the run continues
  /// there, the original left as it was (e.g. to compare a rule's parameter changed midway).
  std::string resume_from;
};

/// The file a sandbox run leaves in its run directory when it stops by a signal or at its
/// budget, and continues from with SandboxOptions::resume.
std::string state_path(const std::string& run_dir);

struct SandboxResult {
  dist::MasterResult master;          ///< version, samples, validation, physics, failure
  double simulated_s = 0;             ///< simulated time at the last update
  double samples_per_s = 0;           ///< simulated throughput
  std::vector<std::int64_t> updates;  ///< updates served per worker
  /// The workers' updates, applied or held, at their master (the sub-masters' in a tree):
  double mean_staleness = 0;
  std::int64_t max_staleness = 0;
  std::vector<std::int64_t> staleness_histogram;  ///< index = staleness
  int masters = 1;                                ///< topology.masters
  /// A tree: the sub-masters' changes at the top master, in the top's versions.
  std::vector<std::int64_t> top_staleness_histogram;
  double top_mean_staleness = 0;
  /// A tree: each worker's update in the top's versions, from the top version its weights came
  /// from (its sub-master's last exchange before its reply) to the top applying the change that
  /// carries it — the staleness one master over all the workers would have logged.
  std::vector<std::int64_t> canonical_staleness_histogram;
  double canonical_mean_staleness = 0;
  std::string run_dir;
  /// The state file this run saved to continue from (state_path), or empty, and the version it
  /// holds (the stop's, or the last checkpoint.every before another end).
  std::string state_file;
  std::int64_t state_version = -1;
};

/// Run the sandbox: training ends as a real run does (max_updates, the data's epochs, early
/// stopping, divergence, a signal). A run (flat or a tree) stopped by a signal or at its budget
/// finishes the event in hand and saves everything it needs to continue bit for bit
/// (state_path): the event queue, each virtual worker's update in flight, weights, rule and
/// optimizer state and data position, the master's service and log bookkeeping.
SandboxResult run_sandbox(const dist::DistExperiment& d, const SandboxOptions& options);

}  // namespace mpigan::sandbox
