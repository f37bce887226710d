// A worker rank: trains on its data shard and exchanges updates with its master.
//
// One exchange every training.sync_every steps. Between exchanges the worker runs the 3DGAN step
// (models/gan_step.hpp) on its shard, either accumulating gradients at fixed weights (rules in
// gradient mode: sync, downpour, gem, dc_asgd) or training with its local optimizer (local mode:
// easgd, downpour with worker: local). In a group of several ranks every rank computes on its part
// of the batch; gradients (gradient mode: once per exchange; local mode: before every local
// update, so the replicas stay identical) and BatchNorm statistics are averaged over the group, the
// leader does the exchange, then broadcasts the result to the group.
#pragma once

#include "mpigan/worker/dist_config.hpp"
#include "mpigan/worker/payload_channel.hpp"
#include "mpigan/worker/topology.hpp"
#include "mpigan/worker/trace.hpp"

#include <string>

namespace mpigan::worker {

struct WorkerResult {
  std::int64_t steps = 0, samples = 0, exchanges = 0;
  double compute_s = 0, wait_s = 0;
};

/// Paths of the parts of checkpoint @p id in a run directory.
std::string checkpoint_main_path(const std::string& run_dir, std::int64_t id);
std::string checkpoint_part_path(const std::string& run_dir, std::int64_t id, const std::string& part);

/// @p resume_checkpoint: the id of the checkpoint to continue from (-1: fresh start).
/// @p channels: this rank's shared-memory payload slots (payload_channel.hpp).
WorkerResult run_worker(const DistExperiment& d, Topology& t, const std::string& run_dir, std::int64_t resume_checkpoint,
                        Trace& trace, const PayloadChannels& channels);

}  // namespace mpigan::worker
