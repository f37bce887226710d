// The top master's checkpoints: it writes the main file (canonical weights, BN state, the rules'
// state, progress, the topology and rule that wrote it) and asks every other rank, with its next
// reply, to write its part (dist/run_files.hpp). 'latest' moves to the checkpoint only once every
// part exists, so a resume always finds a complete set; parts of checkpoints no longer kept go too.
// On a sub-master only the pending id is kept (to pass the parent's request on to its children).
#pragma once

#include "mpigan/dist/launch.hpp"
#include "mpigan/master/update_service.hpp"

#include <string>

namespace mpigan::master {

/// What every main checkpoint file holds, a master's or the sandbox's: the canonical model and
/// the rules' state (UpdateService::save), the samples behind it, the rule, and the experiment's
/// and model's names (`mpigan generate` and `validate` read them).
void save_canonical(train::CheckpointWriter& w, const UpdateService& service, const dist::DistExperiment& d);

class Checkpoints {
 public:
  Checkpoints(dist::RoleContext& ctx, UpdateService& service);

  /// Top master: write the main file of checkpoint @p id (the current version).
  void write(std::int64_t id, dist::MasterResult& result);
  /// Top master: move 'latest' to the pending checkpoint if every part of it exists.
  bool try_commit();
  /// Top master, at the end: after the closing barrier (every rank wrote its final part), commit.
  void finish();
  /// Top master, when worker group @p group hung: its part of the pending checkpoint, written from
  /// its last request @p last (the data position; "progress/written_by_master" tells the worker
  /// that resumes from it to start its rule's state afresh). False, writing nothing, when the
  /// group's own part is there already (written before it stopped).
  bool write_part_for(int group, const dist::Header& last);
  /// Wait up to @p limit_s seconds for the pending checkpoint's parts, then commit it; true when
  /// committed (no closing barrier: a hung rank would never meet it).
  bool wait_commit(double limit_s);
  /// Top master: restore checkpoint @p id (checks that the topology and the rule match).
  void load(std::int64_t id, dist::MasterResult& result);

  /// The checkpoint whose parts the children are asked to write (-1: none).
  std::int64_t pending() const { return m_pending; }
  void set_pending(std::int64_t id) { m_pending = id; }

 private:
  std::vector<std::string> expected_parts(std::int64_t id) const;

  dist::RoleContext& m_ctx;
  UpdateService& m_service;
  std::int64_t m_pending = -1;
  std::string m_pending_path;
};

}  // namespace mpigan::master
