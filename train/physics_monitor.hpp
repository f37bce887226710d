// The physics figure of merit during training (validation.physics).
//
// The reference is the first `events` held-out events of the run (the validation data, mapped back
// to GeV through the inverse preprocessing), their observables computed once. At each physics
// validation the current generator makes one shower per reference event, at that event's energy
// (and angle), with a fixed seed, so two validations differ only by the weights; the showers'
// observables are compared with the reference's (physics/compare.hpp, separation powers off): the
// figure of merit fpd_hlf with its error, the sampling-fraction MRE, the 3DGAN metric, KPD and the
// classifier's AUC.
// A generator whose showers hold NaN or inf scores +inf and says so (`diverged`).
//
// The single-process trainer scores synchronously on its own session. The distributed master must
// not stall its service of updates, so it hands a host copy of the canonical generator to
// AsyncPhysicsMonitor, which scores it on a thread with its own session (a second backend with the
// experiment's host threads) and is polled from the request loop; a request made while a score is
// running is skipped (and counted), never queued.
#pragma once

#include "mpigan/physics/compare.hpp"
#include "mpigan/train/experiment.hpp"
#include "mpigan/train/generate.hpp"
#include "mpigan/train/session.hpp"
#include "mpigan/train/sources.hpp"

#include <atomic>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace mpigan::train {

struct PhysicsScore {
  std::int64_t step = 0, samples = 0;  ///< when the weights were taken
  std::int64_t events = 0;
  bool diverged = false;  ///< the generator produced non-finite cells
  double fom = 0, fom_error = 0;
  double sf_mre = 0, sf_mre_error = 0;
  double gan3d = 0, kpd = 0;
  /// The classifier test's ROC AUC on held-out events and its error (physics/classifier.hpp; 0.5:
  /// indistinguishable); NaN when it did not run (fewer than physics::kClassifierMinEvents events).
  double auc = std::numeric_limits<double>::quiet_NaN(), auc_error = std::numeric_limits<double>::quiet_NaN();
  /// Generated showers with no energy in any cell. All of them: the generator is dead (its output
  /// ReLU is off for every cell; its gradients are zero there, so training cannot bring it back).
  std::int64_t empty = 0;
  bool dead() const { return events > 0 && empty == events; }
  double seconds = 0;             ///< generation and comparison
  std::int64_t recalibrated = 0;  ///< passes re-estimating the BatchNorm statistics first (0: none)
  bool best = false;              ///< the best so far: kept as checkpoints/best.h5
  /// "fpd_hlf 0.68 +- 0.14, SF MRE 0.7 %, ...", "diverged" or "dead".
  std::string describe() const;
};

/// A figure of merit is "off the scale" at 100 or more: Monte Carlo against itself scores below 1,
/// a 10 % error in the energy scale or the shower width about 10, a shower one layer too deep 36
/// (docs/physics.md); 100 is far beyond any usable generator (an untrained one scores 1e4-1e5).
inline constexpr double kFomOffScale = 100.0;
/// A live generator with at least this fraction of empty showers is dying for part of its
/// conditions: the summary warns (Monte Carlo showers are never empty).
inline constexpr double kEmptyWarnFraction = 0.1;

/// What a run's physics validation came to, for its closing summary.
struct PhysicsOutcome {
  std::optional<PhysicsScore> last;
  std::optional<double> best;
  std::string best_path;
  std::int64_t skipped = 0;  ///< requests skipped while a score was running (distributed)
  /// "Physics: ..." lines (empty when physics validation was off), with a warning when the last
  /// figure of merit is off the scale (>= kFomOffScale) or the generator diverged.
  std::string summary() const;
  /// True when the last score says the generator is unusable (diverged, dead or off the scale).
  bool ruined() const;
};

/// The metrics.csv columns of the physics figures (the last ones of every row).
std::vector<std::string> physics_columns();
/// A metrics.csv row of kind "physics" for @p columns (metrics_columns()): loss columns empty.
std::vector<std::string> physics_row(const std::vector<std::string>& columns, std::int64_t epoch, double elapsed_s,
                                     const PhysicsScore& s);

class PhysicsMonitor {
 public:
  /// Reads the reference from the validation data of @p plan (ConfigError when the run has none).
  /// @p best_path: where the best generator is kept (RUN/checkpoints/best.h5); a file already there
  /// (a resumed run) sets the best figure of merit to beat.
  PhysicsMonitor(const ExperimentConfig& e, DataPlan& plan, std::string best_path);

  /// Scores the generator of @p session (its current weights). Non-finite weights or showers:
  /// `diverged`, figures +inf (a NaN generator behind a ReLU can emit zeros, so both are checked).
  PhysicsScore score(Session& session, std::int64_t at_step, std::int64_t samples) const;
  std::int64_t reference_events() const { return m_ref.events; }
  /// Re-estimate the BatchNorm statistics of @p session's generator for its weights over
  /// @p batches passes of one generation batch of the reference's conditions (spread over them).
  void recalibrate(Session& session, std::int64_t batches) const;

  /// When @p s beats the best figure of merit so far, writes the generator of @p session (weights
  /// and BatchNorm state, in the single-process checkpoint form, with the score and the step) to
  /// the best path atomically and returns true. `mpigan generate RUN/checkpoints/best.h5` reads it.
  bool keep_if_best(const PhysicsScore& s, Session& session);
  std::optional<double> best() const { return m_best; }
  const std::string& best_path() const { return m_best_path; }

 private:
  const ExperimentConfig& m_experiment;
  std::string m_best_path;
  std::optional<double> m_best;
  ShowerConditions m_conditions;
  physics::Observables m_ref;
};

/// Scores on a thread of its own (see the header comment). Not thread-safe itself: one caller.
class AsyncPhysicsMonitor {
 public:
  AsyncPhysicsMonitor(const ExperimentConfig& e, DataPlan& plan, std::string best_path);
  ~AsyncPhysicsMonitor();
  AsyncPhysicsMonitor(const AsyncPhysicsMonitor&) = delete;
  AsyncPhysicsMonitor& operator=(const AsyncPhysicsMonitor&) = delete;

  /// Starts scoring the generator with these host weights and BatchNorm state, unless a score is
  /// still running (then false, and the request is counted in skipped()).
  /// @p recalibrate_bn > 0: the statistics are first re-estimated for the weights (recalibrate());
  /// best.h5 then keeps the re-estimated ones, so that it generates what was scored.
  bool start(std::vector<float> weights, std::vector<float> state, std::int64_t step, std::int64_t samples,
             std::int64_t recalibrate_bn = 0);
  /// The score that finished since the last call, if any (never blocks). Rethrows its error.
  std::optional<PhysicsScore> poll();
  /// Waits for the running score, if any, and returns it.
  std::optional<PhysicsScore> wait();
  /// The best figure of merit kept so far (call when not busy()).
  std::optional<double> best() const { return m_monitor.best(); }
  bool busy() const { return m_thread.joinable(); }
  std::int64_t skipped() const { return m_skipped; }

 private:
  std::optional<PhysicsScore> join();

  ExperimentConfig m_experiment;
  PhysicsMonitor m_monitor;
  std::unique_ptr<Session> m_session;  ///< created by the first score, used by the thread only
  std::thread m_thread;
  std::atomic<bool> m_done{false};
  std::optional<PhysicsScore> m_result;
  std::exception_ptr m_error;
  std::int64_t m_skipped = 0;
};

}  // namespace mpigan::train
