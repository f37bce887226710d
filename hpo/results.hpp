// The results database of a search: one JSON object per line in SEARCH_DIR/trials.jsonl, appended
// and fsync'ed one event at a time (a trial started, a trial ended), so that a search killed at any
// moment loses at most the line being written, and a torn last line is ignored on reading.
// SEARCH_DIR/search.json holds what the search was started with (the experiment, its hash, the
// algorithm, seed, space); `--resume` checks the hash, replays trials.jsonl and goes on.
//
// A trial's state is the last event about it. Trials found "running" when a search resumes were
// cut off by the job's end (a crashed rank or a killed job takes the whole MPI job down): they are
// closed as "interrupted" and their points run again first.
#pragma once

#include "mpigan/hpo/optimizer.hpp"
#include "mpigan/hpo/pruner.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mpigan::hpo {

enum class TrialStatus { running, done, pruned, failed, interrupted };
const char* trial_status_name(TrialStatus s);

struct FoldResult {
  int fold = 0;
  std::string run_dir;
  std::string status = "done";  ///< done | pruned | failed
  std::optional<double> value;  ///< the objective as written in metrics.csv (not sign-flipped)
  std::string message;          ///< why it failed
  double seconds = 0;           ///< wall time
  double cpu_seconds = -1;      ///< CPU time over the fold's ranks and threads (-1: not recorded)
};

/// A fold's result as a block reports it and trials.jsonl records it (cpu_seconds -1 when absent).
FoldResult fold_from_json(const nlohmann::json& f);

struct TrialRecord {
  std::int64_t id = 0;
  Point x;
  std::vector<std::string> overrides;  ///< "key=value", what the trial ran with
  TrialStatus status = TrialStatus::running;
  int block = -1;
  std::string run_dir;
  double started = 0, ended = 0;  ///< seconds since the epoch
  std::optional<double> value;    ///< mean over folds, as written (not sign-flipped)
  double spread = 0;              ///< standard deviation over folds (0 with one fold)
  std::vector<FoldResult> folds;
  std::string message;
  std::int64_t rerun_of = -1;  ///< an interrupted trial this one repeats
  /// Hash of the trial's whole configuration: the search's (experiment file, --set overrides,
  /// block size, folds, algorithm, seed) and the trial's own overrides. Equal hashes, equal runs.
  std::string config_hash;
};

class ResultsDb {
 public:
  /// Opens SEARCH_DIR/trials.jsonl for appending (created if missing) and replays it.
  explicit ResultsDb(std::string dir);

  const std::string& dir() const { return m_dir; }
  const std::vector<TrialRecord>& trials() const { return m_trials; }
  /// The next trial id (one more than the largest recorded).
  std::int64_t next_id() const { return static_cast<std::int64_t>(m_trials.size()); }

  void start(const TrialRecord& t);
  void end(const TrialRecord& t);
  /// Lines of trials.jsonl that could not be read (a torn last line after a kill), for the log.
  int skipped_lines() const { return m_skipped; }

 private:
  void append(const std::string& line);
  void apply(const std::string& line, int line_no);

  std::string m_dir;
  std::vector<TrialRecord> m_trials;
  int m_skipped = 0;
};

/// The trials whose points must run again, oldest point first: for each point whose every trial so
/// far (the original and its reruns, followed through `rerun_of`) ended interrupted, the latest of
/// them, once. A point that a rerun has since finished (done, pruned or failed) or that one is
/// running is not repeated, however many of its trials were cut off.
std::vector<std::int64_t> pending_reruns(const std::vector<TrialRecord>& trials);

}  // namespace mpigan::hpo
