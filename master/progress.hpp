// The top master's progress: one row per served update in updates.csv (step, worker, staleness,
// norms, the rules' scales, queue and wait times, verdict, losses), a progress line every
// logging.every versions, throughput once every child has contributed, and validation of the
// canonical weights (metrics.csv) with early stopping. Sub-masters keep no logs.
#pragma once

#include "mpigan/dist/launch.hpp"
#include "mpigan/master/update_service.hpp"
#include "mpigan/train/early_stopper.hpp"
#include "mpigan/train/physics_monitor.hpp"
#include "mpigan/train/run_dir.hpp"
#include "mpigan/train/sources.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace mpigan::master {

/// What the logs need of a run: the experiment, the run directory, a session to validate with, a
/// timeline and a clock (MPI_Wtime in a job; the simulated clock in the sandbox).
struct ProgressContext {
  const train::ExperimentConfig& experiment;
  std::string run_dir;
  train::Session& session;
  dist::Trace& trace;
  std::function<double()> now;
  /// A master rank's: MPI_Wtime.
  static ProgressContext of(dist::RoleContext& ctx);
};

/// One served update, as logged.
struct LogRow {
  dist::Header h;
  int child = 0, rank = 0;
  std::int64_t version = 0;  ///< the master's version when it was served
  double norm_g = 0, norm_d = 0, queue_s = 0;
  std::array<double, 2> scale{1.0, 1.0};
  double lr_factor = 1.0;  ///< the learning-rate schedule's factor (optimizer.schedule)
  std::string verdict;
};

class Progress {
 public:
  /// @p children: the master's children (for the steady-throughput window).
  Progress(ProgressContext ctx, int children);

  /// Open updates.csv and metrics.csv (appending on a resume from @p resumed_version, whose later
  /// rows are dropped; -1: a fresh run). Top master only.
  void open_logs(std::int64_t resumed_version);
  /// A served update, logged at master version @p version.
  void log_update(const LogRow& r, std::int64_t version);
  /// The service's decision on an update: logged with its verdict (applied, rejected_*) and
  /// counted, or (held) kept until its round closes.
  void log_decision(LogRow row, const Decision& d, std::int64_t version);
  /// A synchronous round was applied: log its held updates as applied_round.
  void log_round(std::int64_t version);
  /// Applied updates by staleness (index: versions between pull and application).
  const std::vector<std::int64_t>& staleness_histogram() const { return m_staleness; }
  /// Child @p child's update of @p samples samples was applied (throughput bookkeeping).
  void note_applied(int child, std::int64_t samples);
  /// The progress line, every logging.every versions.
  void after_version(std::int64_t version, std::int64_t samples);

  /// Validation losses of the canonical weights (copied into the session's model) into
  /// metrics.csv; returns true when early stopping triggers. With validation.physics.every 0 it
  /// also starts a physics validation.
  bool validate(const UpdateService& service, dist::MasterResult& result);

  /// Physics validation (validation.physics) on its own thread, so that serving never waits:
  /// start one for the canonical generator at this version (skipped if one is running)...
  void request_physics(const UpdateService& service);
  /// ...and collect a finished one into metrics.csv (never blocks); true when early stopping on
  /// the figure of merit triggers.
  bool poll_physics(dist::MasterResult& result);
  /// Score the canonical generator now and wait for it (the sandbox: deterministic for a seed);
  /// true when early stopping on the figure of merit triggers.
  bool physics_now(const UpdateService& service, dist::MasterResult& result);
  /// At the end: wait for the running one, then score the final weights if not yet done.
  void finish_physics(const UpdateService& service, dist::MasterResult& result);
  std::int64_t validated_at() const { return m_validated_at; }
  double steady_samples_per_s() const;
  /// The bookkeeping behind the logs, the throughput and early stopping, under @p prefix, for an
  /// exact continuation (the sandbox's resume; no round open). load_state() follows open_logs().
  void save_state(train::CheckpointWriter& w, const std::string& prefix) const;
  void load_state(const train::CheckpointReader& r, const std::string& prefix);

 private:
  void print(std::int64_t version, std::int64_t samples);
  void applied(LogRow& row, const char* verdict, std::int64_t version);
  bool record_physics(const train::PhysicsScore& s, dist::MasterResult& result);
  train::DataPlan& plan();

  ProgressContext m_ctx;
  int m_compute_threads = 0;  ///< host threads for validation (the experiment's `threads`)
  std::unique_ptr<train::CsvLog> m_updates, m_metrics;
  double m_t0 = 0, m_staleness_sum = 0, m_d_sum = 0, m_g_sum = 0;
  std::int64_t m_logged = 0;
  std::unique_ptr<train::DataPlan> m_plan;
  std::unique_ptr<data::BatchSource> m_val_loader;
  train::EarlyStopper m_stopper;
  std::unique_ptr<train::AsyncPhysicsMonitor> m_physics;
  std::int64_t m_physics_at = -1;  ///< version of the last physics validation started
  std::int64_t m_validated_at = -1;
  std::vector<bool> m_contributed;
  std::vector<LogRow> m_held;  ///< the held updates of the open round, in arrival order
  std::vector<std::int64_t> m_staleness;
  double m_steady_t0 = -1, m_steady_t1 = -1;
  std::int64_t m_steady_samples = 0;
};

}  // namespace mpigan::master
