// A run directory: the resolved config.yaml, metrics.csv, updates.csv (distributed runs), and
// checkpoints/ with a 'latest' pointer. Every file that is replaced is written to a temporary name
// and renamed, so an interrupted run never leaves a half-written config, pointer or checkpoint.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace mpigan::train {

class RunDirectory {
 public:
  /// Creates @p dir and dir/checkpoints when missing. With @p resume the directory must hold a
  /// checkpoint (Error naming the directory otherwise).
  RunDirectory(std::string dir, bool resume);

  const std::string& path() const { return m_dir; }
  std::string file(const std::string& name) const { return m_dir + "/" + name; }
  void write_config(const YAML::Node& resolved) const;
  /// A resumed run: compares @p resolved with config.yaml, the configuration its checkpoints were
  /// made with. A key that decides what is trained (the seed, the model, the data and their
  /// preprocessing and split, the batch) must not change: a ConfigError names each that differs,
  /// with both values, and how to resume with the run's own configuration. Any other key may
  /// change (a later budget, a smaller learning rate, threads, cadences), each change logged as a
  /// warning. Call before write_config; a run without config.yaml is not checked.
  void check_resumed_config(const YAML::Node& resolved) const;
  /// A new run (not a resume) about to start here: a ConfigError, before anything is written, when
  /// the directory already holds a run that can be continued (checkpoints/latest, or a sandbox's
  /// sandbox-state.h5), which a new run would overwrite; it names what was found and how to continue
  /// that run instead. A run stopped before its first checkpoint has nothing to continue: a new run
  /// starts over it.
  void refuse_existing_run() const;

  /// checkpoints/step-00000123.h5
  std::string checkpoint_path(std::int64_t step) const;
  /// Point 'latest' at @p path (atomically) and delete all but the newest @p keep checkpoints, and
  /// @p spare (a checkpoint to keep whatever its age; empty: none).
  void commit_checkpoint(const std::string& path, std::int64_t keep, const std::string& spare = {}) const;
  /// Point 'latest' back at @p path, an existing checkpoint (a resume then continues from it).
  void point_latest(const std::string& path) const;
  /// The checkpoint 'latest' names, if any.
  std::optional<std::string> latest_checkpoint() const;

 private:
  std::string m_dir;
};

/// Appends rows to a CSV file with a fixed header. Opening an existing file (a resumed run) checks
/// that its header matches and appends; a mismatch is an Error naming the file.
class CsvLog {
 public:
  CsvLog(std::string path, std::vector<std::string> columns, bool append);
  void row(const std::vector<std::string>& values);
  /// A resumed run: drop the rows whose `step` column is above @p step (written after the
  /// checkpoint it resumes from, and about to be written again), atomically.
  void drop_after(std::int64_t step);
  const std::vector<std::string>& columns() const { return m_columns; }
  void flush() { m_out.flush(); }

 private:
  std::string m_path;
  std::vector<std::string> m_columns;
  std::ofstream m_out;
};

/// Formats a number for CSV (shortest round-trip form).
std::string csv_number(double v);

}  // namespace mpigan::train
