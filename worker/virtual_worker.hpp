// A virtual worker (topology.virtual_compute): a worker rank that reads no data and runs no
// model, for measuring the masters and the network at scale. Each update it waits a compute time
// drawn from the clock model (slept in a real job; injected into the simulated clock in an SMPI
// build, where nothing runs in real time) and then exchanges with its master exactly as a worker
// group's leader does (exchange.hpp): the same messages, kinds, tags, sizes and order, push-then-
// reply or pull-then-push as the rule says. Its payload has the real layout: zeros for gradient
// and delta payloads, the weights it was given for weight payloads (EASGD), and the BatchNorm
// state it was given, so every rule's master side does its real work on finite numbers.
#pragma once

#include "mpigan/dist/launch.hpp"

namespace mpigan::worker {

/// The worker role when ctx.job.dist.virtual_compute is set; runs until its master says stop.
void run_virtual_worker(dist::RoleContext& ctx);

/// Wait @p seconds of "compute": a sleep, or the simulated clock's advance under SMPI.
void inject_compute(double seconds);

}  // namespace mpigan::worker
