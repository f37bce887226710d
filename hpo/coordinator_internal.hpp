// The search coordinator's shared pieces (coordinator.hpp), internal to hpo/: message tags and polling,
// the block layout, the messages, and the two roles. coordinator.cpp checks the search and starts it
// (run_optimize), coordinator_loop.cpp is rank 0's coordinator, coordinator_block.cpp a block's trials.
#pragma once

#include "mpigan/hpo/coordinator.hpp"
#include "mpigan/hpo/study.hpp"

#include <chrono>
#include <string>

namespace mpigan::hpo::detail {

constexpr int kTagReady = 7101, kTagAssign = 7102, kTagResult = 7103, kTagPrune = 7104;
/// How often a waiting rank looks for its message: trials last minutes, a 20 ms answer is instant,
/// and a sleeping rank leaves its core to the trials (MPICH's blocking calls spin).
constexpr auto kPoll = std::chrono::milliseconds(20);
/// How often the running trials' curves are read for pruning: a validation row is seen within a
/// quarter of a second (the trial stops at its next validation).
constexpr auto kPrunePoll = std::chrono::milliseconds(250);

/// Block layout of the world: ranks 1..R-1 in blocks of B, each split into K folds of B/K ranks.
struct Layout {
  int ranks = 0, block_size = 1, folds = 1, blocks = 0, leftover = 0;
  int per_fold() const { return block_size / folds; }
  int block_of(int rank) const {
    return rank == 0 ? -1 : (rank - 1) / block_size < blocks ? (rank - 1) / block_size : -1;
  }
  int leader(int block) const { return 1 + block * block_size; }
  int fold_leader(int block, int fold) const { return leader(block) + fold * per_fold(); }
};

// ---------------------------------------------------------------- messages (coordinator_block.cpp)

double now_s();
void send_string(const Comm& c, const std::string& s, int dest, int tag);
/// Receives a string message from @p source with @p tag, sleeping between polls.
std::string recv_string(const Comm& c, int source, int tag, int* from = nullptr);
/// Broadcasts a string from @p root of @p c (length, then bytes), sleeping while it waits.
std::string bcast_string(const Comm& c, std::string s, int root);

// ---------------------------------------------------------------- the search (coordinator.cpp)

/// The search's configuration hash (search.json): the experiment's text, its --set overrides, the
/// block size, folds, algorithm and seed.
std::string config_hash(const OptimizeOptions& o, const Layout& l, const StudyConfig& s);

// ---------------------------------------------------------------- the roles

/// Rank 0: coordinates the search in @p dir until every block has stopped (coordinator_loop.cpp).
OptimizeOutcome run_coordinator(const OptimizeOptions& o, const Comm& world, const Layout& l, StudyConfig s,
                                std::string dir);
/// A block's ranks: train the trials the coordinator hands the block (coordinator_block.cpp).
void run_block(const OptimizeOptions& o, const Layout& l, const Objective& objective, const Comm& world,
               const Comm& block_comm, const dist::Roles& roles);

}  // namespace mpigan::hpo::detail
