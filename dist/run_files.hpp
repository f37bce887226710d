// Where a distributed run keeps its checkpoints: the top master's main file and one part per
// sub-master and worker group, all named by the checkpoint's id (the top master's version).
//
//   RUN_DIR/checkpoints/step-00000120.h5               weights, BN state, rule state, progress
//   RUN_DIR/checkpoints/step-00000120.worker-0.h5      worker group 0's data position, rule state
//   RUN_DIR/checkpoints/step-00000120.submaster-1.h5   sub-master rank 1's weights and rule state
//
// 'latest' moves to a main file only once every part of it exists (master/checkpoints.hpp).
#pragma once

#include <cstdint>
#include <string>

namespace mpigan::dist {

std::string checkpoint_main_path(const std::string& run_dir, std::int64_t id);
std::string checkpoint_part_path(const std::string& run_dir, std::int64_t id, const std::string& part);
/// Part names: "worker-G" for worker group G, "submaster-R" for the sub-master on rank R.
std::string worker_part(int group);
std::string submaster_part(int rank);

/// The checkpoint to resume from: the one 'latest' names in @p run_dir (Error when there is none),
/// or a newer one whose every part is on disk — a job that failed (an exception, MPI_Abort) after
/// all ranks had written their parts but before the master saw them keeps that checkpoint. The
/// parts a checkpoint needs are those 'latest' has (same topology on resume).
std::int64_t latest_checkpoint_id(const std::string& run_dir);
/// The same, or -1 when the run has no checkpoint yet (never throws; for messages).
std::int64_t latest_checkpoint_id_or_none(const std::string& run_dir) noexcept;

}  // namespace mpigan::dist
