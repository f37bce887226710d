// A worker group's part of a checkpoint (RUN_DIR/checkpoints/step-N.worker-G.h5, written by the
// group leader when its master asks): its steps, data position and master version, its rules'
// state, and in local mode its optimizers' state — with the master's main file, everything a
// resumed job needs to continue where this group stopped.
#pragma once

#include "mpigan/data/batch_source.hpp"
#include "mpigan/dist/launch.hpp"
#include "mpigan/worker/exchange.hpp"

namespace mpigan::worker {

/// Leader only (others return at once).
void write_worker_part(dist::RoleContext& ctx, std::int64_t id, Exchanger& ex, WorkerProgress& progress,
                       const data::BatchSource& loader);
void load_worker_part(dist::RoleContext& ctx, std::int64_t id, Exchanger& ex, WorkerProgress& progress,
                      data::BatchSource& loader);

}  // namespace mpigan::worker
