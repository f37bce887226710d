// Who does what in a distributed run. Ranks of the communicator the application passes in:
//
//   rank 0                      the top master (canonical G and D, validation, checkpoints)
//   ranks 1 .. masters-1        sub-masters (a tree of depth 2): each serves its own worker groups
//                               and passes its accumulated change up to the top master
//   ranks masters .. size-1     workers, in groups of group_size consecutive ranks; the ranks of a
//                               group split one batch and average their gradients (allreduce);
//                               only the group's first rank (its leader) talks to its master.
//
// Group g is served by the top master when masters == 1, else by sub-master 1 + g % (masters-1).
// Every worker rank reads its own data shard (shard = rank - masters, of size - masters shards),
// batch / group_size events per step. Communicators: a duplicate of the given one for the
// master-worker messages (no traffic on the application's communicator), and one per group.
#pragma once

#include "mpigan/core/config.hpp"
#include "mpigan/core/mpi/comm.hpp"

#include <string>
#include <vector>

namespace mpigan::dist {

struct TopologyConfig {
  int masters = 1;
  int group_size = 1;
  int ranks_per_node = 0;            ///< for GPU binding; 0 = detect (MPI_COMM_TYPE_SHARED)
  std::int64_t submaster_every = 1;  ///< sub-master updates between exchanges with the top master
  /// The top master's factor on a sub-master's change (asynchronous rules); 0: 1 / sub-masters.
  double submaster_scale = 0;
  /// CPU threads of a master rank while it serves (its vector arithmetic is memory-bound: more
  /// threads add little and take cores from co-located workers); validation uses `threads`.
  int master_threads = 1;
  /// Masters and children on one node exchange payloads through shared memory (payload_channel.hpp).
  bool shared_memory = true;
  /// How a worker waits for its master's reply: "spin" polls without sleeping for up to its last
  /// step's compute time (keeps its core busy: a core that idles comes back slower on shared
  /// virtual machines, and the wake-up costs latency), "sleep" sleeps on its doorbell after 2 ms,
  /// "auto" spins when the node's workers times their compute threads fit its CPUs.
  std::string worker_wait = "auto";
  /// Seconds a master waits for a child's next message before it declares the child hung (a
  /// stopped, deadlocked or swapping rank) and ends the job with its name; 0 = auto: 20 times
  /// that child's mean time between updates, at least 60 s (600 s before its first update).
  double rank_timeout_s = 0;
  /// Bounded staleness for asynchronous rules (stale synchronous parallel, Ho et al. 2013): a
  /// master defers its reply to a child that has had more than max_lead updates applied beyond the
  /// child least served (of those still training) until that one catches up; the reply then holds
  /// the weights of that moment. Every child's applied updates stay within max_lead + 1 of every
  /// other's, whatever the CPU shares of an oversubscribed node. 0: no bound (the default: a
  /// bound makes fast workers wait for slow ones, which is what asynchronous rules avoid).
  std::int64_t max_lead = 0;
  /// Virtual workers (a clock-model spec of dist/timing.hpp, e.g. "constant:0.25"; empty: off):
  /// worker ranks read no data and run no model; each update waits a compute time drawn from the
  /// model (slept, or injected into the simulated clock of an SMPI build) and sends a payload of
  /// the real size through the real protocol. The master and sub-masters run for real. For
  /// measuring the masters and the network at scale (docs/sandbox.md, "Scale").
  std::string virtual_compute;
  /// Reads the `topology` section; problems go to the document.
  static TopologyConfig parse(ConfigNode& section);
};

/// Whether a worker polls without sleeping while it waits for its reply (TopologyConfig::worker_wait):
/// "auto" spins when @p local_workers ranks of @p threads compute threads each fit @p local_cpus.
bool worker_spins(const std::string& mode, int local_workers, int threads, int local_cpus);

enum class Role { top_master, sub_master, worker };
const char* to_string(Role r);

struct Topology {
  int size = 1, rank = 0;
  int masters = 1, group_size = 1, groups = 0;
  Role role = Role::worker;
  int parent = -1;            ///< the master this rank talks to (workers, sub-masters); -1 for the top
  std::vector<int> children;  ///< masters: ranks they serve (group leaders or sub-masters), in id order
  int child_id = -1;          ///< this rank's id at its parent (leaders and sub-masters)
  int siblings = 0;           ///< workers: the groups its master serves, its own included
  int group = -1, group_rank = -1;
  int shard = -1, shards = 0;          ///< worker data shard
  int local_rank = 0, local_size = 1;  ///< among the ranks of this node
  int local_workers = 0;               ///< worker ranks on this node
  int local_cpus = 0;                  ///< CPUs the ranks of this node may run on (union of their affinity masks)
  int device_id = -1;                  ///< GPU for this rank (node-local rank), -1 = none chosen
  Comm links;                          ///< duplicate of the run communicator, for master-worker messages
  Comm group_comm;                     ///< the ranks of this worker group (workers only)

  bool leader() const { return role == Role::worker && group_rank == 0; }
  /// The label for logs and errors: "rank 3 worker (group 1 leader)".
  std::string label() const;
  /// Validate @p cfg for a communicator of @p size ranks and a batch; every problem to @p problems.
  static void validate(const TopologyConfig& cfg, int size, std::int64_t batch, std::vector<std::string>& problems);
  /// Collective over @p comm: roles, communicators, device binding.
  static Topology build(const Comm& comm, const TopologyConfig& cfg);
};

}  // namespace mpigan::dist
