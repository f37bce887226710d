#include "mpigan/dist/topology.hpp"

#include "mpigan/core/error.hpp"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace mpigan::dist {

TopologyConfig TopologyConfig::parse(ConfigNode& s) {
  TopologyConfig t;
  t.masters = static_cast<int>(s.get_int("masters", 1, 1, 4096));
  t.group_size = static_cast<int>(s.get_int("group_size", 1, 1, 4096));
  t.ranks_per_node = static_cast<int>(s.get_int("ranks_per_node", 0, 0, 1024));
  t.submaster_every = s.get_int("submaster_every", 1, 1, 1 << 20);
  t.submaster_scale = s.get_real("submaster_scale", 0.0, 0.0, 1.0);
  t.master_threads = static_cast<int>(s.get_int("master_threads", 1, 1, 1024));
  t.shared_memory = s.get_bool("shared_memory", true);
  t.worker_wait = s.get_choice("worker_wait", "auto", {"auto", "spin", "sleep"});
  t.rank_timeout_s = s.get_real("rank_timeout", 0.0, 0.0, 1e7);
  t.max_lead = s.get_int("max_lead", 0, 0, 1 << 30);
  t.virtual_compute = s.get_string("virtual_compute", "");
  s.reject_unknown();
  return t;
}

bool worker_spins(const std::string& mode, int local_workers, int threads, int local_cpus) {
  if (mode == "spin") return true;
  if (mode == "sleep") return false;
  return local_workers > 0 && threads > 0 && static_cast<std::int64_t>(local_workers) * threads <= local_cpus;
}

const char* to_string(Role r) {
  switch (r) {
    case Role::top_master:
      return "master";
    case Role::sub_master:
      return "sub-master";
    case Role::worker:
      return "worker";
  }
  return "?";
}

std::string Topology::label() const {
  switch (role) {
    case Role::top_master:
      return fmt::format("rank {} master", rank);
    case Role::sub_master:
      return fmt::format("rank {} sub-master {}", rank, rank);
    case Role::worker:
      return group_size > 1 ? fmt::format("rank {} worker (group {}{})", rank, group, group_rank == 0 ? " leader" : "")
                            : fmt::format("rank {} worker {}", rank, group);
  }
  return fmt::format("rank {}", rank);
}

void Topology::validate(const TopologyConfig& c, int size, std::int64_t batch, std::vector<std::string>& problems) {
  const int workers = size - c.masters;
  if (workers < 1) {
    problems.push_back(fmt::format("topology: {} ranks leave no worker for {} master(s): run at least {} ranks", size,
                                   c.masters, c.masters + c.group_size));
    return;
  }
  if (workers % c.group_size != 0)
    problems.push_back(fmt::format("topology: {} worker ranks ({} ranks - {} masters) do not form groups of {}",
                                   workers, size, c.masters, c.group_size));
  const int groups = workers / c.group_size;
  if (c.masters > 1 && groups < c.masters - 1)
    problems.push_back(
        fmt::format("topology: {} worker groups for {} sub-masters: each sub-master needs at least one group", groups,
                    c.masters - 1));
  if (batch % c.group_size != 0)
    problems.push_back(
        fmt::format("topology: training.batch {} is not divisible by group_size {} (each group rank "
                    "computes batch/group_size events)",
                    batch, c.group_size));
}

Topology Topology::build(const Comm& comm, const TopologyConfig& c) {
  Topology t;
  t.size = comm.size();
  t.rank = comm.rank();
  t.masters = c.masters;
  t.group_size = c.group_size;
  t.groups = (t.size - c.masters) / c.group_size;
  const int subs = c.masters - 1;
  auto master_of_group = [&](int g) { return subs == 0 ? 0 : 1 + g % subs; };
  if (t.rank == 0) {
    t.role = Role::top_master;
    if (subs == 0)
      for (int g = 0; g < t.groups; ++g) t.children.push_back(c.masters + g * c.group_size);
    else
      for (int s = 1; s < c.masters; ++s) t.children.push_back(s);
  } else if (t.rank < c.masters) {
    t.role = Role::sub_master;
    t.parent = 0;
    t.child_id = t.rank - 1;
    for (int g = 0; g < t.groups; ++g)
      if (master_of_group(g) == t.rank) t.children.push_back(c.masters + g * c.group_size);
  } else {
    t.role = Role::worker;
    t.group = (t.rank - c.masters) / c.group_size;
    t.group_rank = (t.rank - c.masters) % c.group_size;
    t.parent = master_of_group(t.group);
    t.shard = t.rank - c.masters;
    t.shards = t.size - c.masters;
    // The group's id at its master: its position among that master's groups.
    int id = 0;
    for (int g = 0; g < t.groups; ++g) {
      id += g < t.group && master_of_group(g) == t.parent;
      t.siblings += master_of_group(g) == t.parent;
    }
    t.child_id = id;
  }
  MPI_Comm dup = MPI_COMM_NULL;
  MPIGAN_MPI_CHECK(MPI_Comm_dup(comm.get(), &dup));
  t.links = Comm(dup, true);
  t.group_comm = comm.split(t.role == Role::worker ? t.group : MPI_UNDEFINED, t.group_rank);
  Comm node = comm.split_shared();
  t.local_rank = node.rank();
  t.local_size = c.ranks_per_node > 0 ? c.ranks_per_node : node.size();
  t.device_id = t.local_rank;  // the CUDA backend takes it modulo the visible devices
  t.local_workers = static_cast<int>(node.allreduce_sum(static_cast<std::int64_t>(t.role == Role::worker)));
  // The node's CPUs as its ranks see them (cgroups and launcher binding included): the union of
  // their affinity masks.
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) {
    CPU_ZERO(&mask);
    for (unsigned i = 0; i < std::max(1u, std::thread::hardware_concurrency()) && i < CPU_SETSIZE; ++i)
      CPU_SET(i, &mask);
  }
  MPIGAN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &mask, static_cast<int>(sizeof mask), MPI_BYTE, MPI_BOR, node.get()));
  t.local_cpus = CPU_COUNT(&mask);
  return t;
}

}  // namespace mpigan::dist
