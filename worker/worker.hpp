// A worker rank: trains on its data shard and exchanges updates with its master.
//
// One exchange every training.sync_every steps (exchange.hpp). Between exchanges the worker runs
// the 3DGAN step (models/gan_step.hpp) on its shard; when its data is exhausted (all epochs) it
// says so and waits for the stop, so it can still write its part of the final checkpoint
// (worker_checkpoint.hpp). In a group of several ranks every rank computes on its part of the
// batch and the leader does the exchange.
#pragma once

#include "mpigan/dist/launch.hpp"

namespace mpigan::worker {

/// The worker role of a distributed job: trains until its master says stop.
void run_worker(dist::RoleContext& ctx);

}  // namespace mpigan::worker
