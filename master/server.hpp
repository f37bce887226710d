// A master rank's request loop: it keeps one receive posted per child and, of the requests that
// have arrived, serves them in round-robin order starting after the child served last, so no
// child can starve another (MPI gives no fairness among sources; mpi-learn and the GEM reference
// code served low ranks first). Waiting sleeps on the node's doorbell or polls with backoff
// (core/mpi/comm.hpp): the master's idle time does not burn the core a worker on its node needs.
//
// What to do with each update is the update service's decision (update_service.hpp); the loop
// receives, logs, answers, and decides when training ends: max_updates, early stopping, the
// children's data exhausted, divergence, or (on a sub-master) the parent's stop. From then on
// every request is answered with stop. The top master validates, checkpoints and logs (progress.hpp,
// checkpoints.hpp); a sub-master exchanges with its parent (parent_link.hpp).
#pragma once

#include "mpigan/dist/launch.hpp"

namespace mpigan::master {

/// The master role of a distributed job (top master or sub-master): serves its children until
/// training ends, then writes the final checkpoint (top) and meets the closing barrier.
dist::MasterResult run_master(dist::RoleContext& ctx);

}  // namespace mpigan::master
