// A worker group's side of the exchange with its master, and what the group does with
// gradients between exchanges.
//
// Between exchanges every rank of the group runs the GAN step on its part of the batch: in
// gradient mode (sync, downpour, gem, dc_asgd) it accumulates gradients at fixed weights; in local
// mode (easgd, downpour with worker: local) it trains with its local optimizer, the group
// averaging each gradient first so the replicas stay identical. At the exchange the payload (the
// rule's update of both networks and the BatchNorm state) is averaged over the group — on the
// devices when the backend has a group reducer (NCCL), else on the host over MPI
// (MPIGAN_GROUP_REDUCE=mpi forces the host path) — the leader pushes it (and pulls first for
// pull-then-push rules), merges the reply with the worker rule, and broadcasts the result to the
// group, whose ranks all load it.
#pragma once

#include "mpigan/algos/rule.hpp"
#include "mpigan/dist/launch.hpp"
#include "mpigan/models/gan_step.hpp"
#include "mpigan/worker/fault_injection.hpp"
#include "mpigan/worker/update_builder.hpp"

#include <array>
#include <memory>
#include <vector>

namespace mpigan::worker {

/// Where this worker stands (also what its checkpoint part records).
struct WorkerProgress {
  std::int64_t version = 0;              ///< master version of its weights
  std::int64_t steps = 0;                ///< GAN steps so far
  std::int64_t exchanges = 0;            ///< in this run
  std::int64_t checkpoint_written = -1;  ///< the last checkpoint id it wrote its part of
  double last_wait = 0;                  ///< seconds its last exchange waited for the reply
};

/// What the leader sends with an update: the losses of its last step, its compute time and data position.
struct UpdateInfo {
  std::int64_t samples = 0;  ///< this rank's samples since the last exchange
  models::StepLosses losses;
  double compute_s = 0;
  data::BatchSource::Position position;
};

class Exchanger {
 public:
  Exchanger(dist::RoleContext& ctx, WorkerProgress& progress);
  ~Exchanger();

  algos::WorkerMode mode() const { return m_update.mode(); }
  algos::WorkerRule& rule(models::Net n) { return m_update.rule(n); }

  /// Before a compute phase: zero the gradient accumulators (gradient mode).
  void begin_phase();
  /// After each gradient computation of the GAN step.
  void on_gradients(models::Net n);

  /// The master's initial weights, loaded by every rank of the group.
  void receive_initial();
  /// One exchange. Returns the master's answer as broadcast to the group: weights (already
  /// loaded into the model) or stop; either may ask for this group's checkpoint part.
  dist::Header exchange(const UpdateInfo& info);
  /// The data is exhausted: the leader says so and waits for the stop, which the group gets too.
  dist::Header finish(const UpdateInfo& info);

 private:
  class GroupAverage;
  void build_payload();
  dist::Header make_header(dist::Kind kind, const UpdateInfo& info) const;
  dist::Header leader_exchange(const UpdateInfo& info);
  dist::Header share_with_group(dist::Header ctl);
  double reply_spin_s(double compute) const;

  dist::RoleContext& m_ctx;
  WorkerProgress& m_progress;
  UpdateBuilder m_update;  ///< the rule's worker sides, accumulators and buffers
  std::unique_ptr<GroupAverage> m_group;
  bool m_spin = false;  ///< topology.worker_wait resolved for this rank
  FaultPlan m_fault;    ///< MPIGAN_FAULT, read once
};

}  // namespace mpigan::worker
