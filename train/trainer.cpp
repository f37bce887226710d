// The single-process trainer (trainer.hpp): the Keras recipe step by step, logs, validation, checkpoints, resume.
#include "mpigan/train/trainer.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/core/stop_signal.hpp"
#include "mpigan/data/file_list.hpp"
#include "mpigan/data/simulator/simulate_dataset.hpp"
#include "mpigan/train/early_stopper.hpp"
#include "mpigan/train/run_dir.hpp"
#include "mpigan/train/session.hpp"
#include "mpigan/train/sources.hpp"
#include "mpigan/train/validation.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>

namespace mpigan::train {

namespace {

bool any_file_matches(const std::vector<std::string>& patterns) {
  try {
    return !data::expand_file_list(patterns).empty();
  } catch (const Error&) {
    return false;
  }
}

std::string duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const auto t = static_cast<long long>(s);
  return t >= 3600 ? fmt::format("{}h{:02d}m", t / 3600, t % 3600 / 60) : fmt::format("{}m{:02d}s", t / 60, t % 60);
}

}  // namespace

data::Datasets prepare_datasets(const ExperimentConfig& e) {
  if (e.simulate.enabled && !any_file_matches(e.data.train_files)) {
    data::sim::SimulateOptions so;
    so.events = e.simulate.events;
    so.geometry = e.data.geometry;
    so.energy_lo = e.simulate.energy_lo;
    so.energy_hi = e.simulate.energy_hi;
    so.angle_lo = e.simulate.angle_lo;
    so.angle_hi = e.simulate.angle_hi;
    so.out_dir = e.simulate.dir;
    so.seed = e.simulate.seed;
    so.events_per_file = e.simulate.events_per_file;
    so.threads = e.threads;
    spdlog::info("data: no file matches data.train; simulating {} showers into {} (data.simulate)", so.events,
                 so.out_dir);
    const auto rep = data::sim::simulate_dataset(so);
    spdlog::info("data: simulated {} events in {} files at {:.0f} events/s", rep.events, rep.files.size(),
                 rep.events_per_second());
    MPIGAN_CHECK(any_file_matches(e.data.train_files),
                 "data.simulate wrote {} files to '{}', but data.train ({}) matches none of them", rep.files.size(),
                 so.out_dir, fmt::join(e.data.train_files, ", "));
  }
  data::Datasets ds = data::open_datasets(e.data);
  spdlog::info("data: {} training events{}", ds.train->size(),
               ds.validation ? fmt::format(", {} validation events", ds.validation->size()) : std::string());
  return ds;
}

void LossAverager::add(const models::StepLosses& l) {
  if (m_count == 0) {
    m_sum = l;
  } else {
    m_sum.d_real += l.d_real;
    m_sum.d_fake += l.d_fake;
    m_sum.g += l.g;
    for (std::size_t i = 0; i < l.d_real_heads.size(); ++i) {
      m_sum.d_real_heads[i] += l.d_real_heads[i];
      m_sum.d_fake_heads[i] += l.d_fake_heads[i];
      m_sum.g_heads[i] += l.g_heads[i];
    }
  }
  ++m_count;
}

models::StepLosses LossAverager::mean() const {
  models::StepLosses m = m_sum;
  if (m_count == 0) return m;
  const double k = 1.0 / static_cast<double>(m_count);
  m.d_real *= k;
  m.d_fake *= k;
  m.g *= k;
  for (auto* v : {&m.d_real_heads, &m.d_fake_heads, &m.g_heads})
    for (double& x : *v) x *= k;
  return m;
}

namespace {

/// One single-process run: set-up (and resume), the step loop, epoch ends, validation,
/// checkpoints and the summary.
class SingleProcessRun {
 public:
  using clock = std::chrono::steady_clock;

  SingleProcessRun(const ExperimentConfig& e, const RunOptions& options)
      : m_experiment(e),
        m_resume(!options.resume_dir.empty()),
        m_dir(m_resume ? options.resume_dir : (options.out_dir.empty() ? e.output_dir : options.out_dir)),
        m_run(m_dir, m_resume),
        m_plan(prepare()),
        m_session(Session::create(e, mix64(e.seed ^ 0x51A6E5ull))),
        m_source(m_plan.train(e.batch)),
        m_loader(*m_source),
        m_metrics(m_run.file("metrics.csv"), metrics_columns(m_session.step->loss_names()), m_resume),
        m_stopper(e.early_stopping),
        m_prune(options.prune) {
    if (e.physics.enabled) {
      m_physics.emplace(e, m_plan, m_run.file("checkpoints/best.h5"));
      m_summary.physics.best_path = m_physics->best_path();
    }
    spdlog::info("backend: {}", m_session.backend->describe());
    spdlog::info("model {}: generator {} parameters, discriminator {}; data: {}", e.model.name,
                 m_session.model->generator.weights().count(), m_session.model->discriminator.weights().count(),
                 m_plan.describe());
    if (m_resume) resume();
    m_samples_at_start = m_samples;
    const std::int64_t all = e.epochs * m_loader.batches_per_epoch();
    m_total_steps = e.max_updates > 0 ? std::min(e.max_updates, all) : all;
    if (e.max_samples > 0) m_total_steps = std::min(m_total_steps, (e.max_samples + e.batch - 1) / e.batch);
    m_summary.run_dir = m_dir;
  }

  TrainSummary run() {
    defer_stop_signals();  // the loop checkpoints and stops on a signal from here
    m_t_start = m_t_epoch = clock::now();
    data::Batch batch;
    while (m_step < m_total_steps && !m_summary.stopped_early && stop_signal() == 0) {
      if (!m_loader.next(batch)) {
        end_epoch();
        continue;
      }
      train_step(batch);
    }
    return finish();
  }

 private:
  /// Opens (and simulates, when asked) the data, then writes the resolved configuration: data
  /// that do not fit the model leave the run directory as it was.
  DataPlan prepare() {
    YAML::Node resolved = YAML::Clone(m_experiment.resolved);
    resolved["output"]["dir"] = m_dir;
    if (m_resume)
      m_run.check_resumed_config(resolved);
    else
      m_run.refuse_existing_run();
    DataPlan plan = DataPlan::open(m_experiment, true);
    m_run.write_config(resolved);
    return plan;
  }

  void resume() {
    const std::string ckpt = *m_run.latest_checkpoint();
    CheckpointReader r(ckpt);
    m_session.load(r);
    m_step = r.get_int("progress/step");
    m_samples = r.get_int("progress/samples");
    m_loader.seek({r.get_int("progress/epoch"), r.get_int("progress/cursor")});
    m_metrics.drop_after(m_step);
    // The last sane checkpoint when this one was written (itself, or an older one it spared).
    const std::string sane = r.has("progress/last_sane") ? r.get_string("progress/last_sane") : std::string();
    m_last_sane = sane.empty() ? std::string() : m_run.file("checkpoints/" + sane);
    if (!r.has("progress/last_sane") || (!m_last_sane.empty() && !std::filesystem::exists(m_last_sane)))
      m_last_sane = ckpt;
    // The scale the losses' growth is measured against: the run's, not the resumed weights' first step.
    if (r.has("progress/loss_scale")) m_reference = std::stod(r.get_string("progress/loss_scale"));
    spdlog::info("resumed from {} at step {} (epoch {}, batch {} of {})", ckpt, m_step, m_loader.position().epoch + 1,
                 m_loader.position().cursor, m_loader.batches_per_epoch());
  }

  double seconds_since(clock::time_point t) const { return std::chrono::duration<double>(clock::now() - t).count(); }

  /// The message of a divergence. 'latest' is moved back to the last checkpoint written while the
  /// losses were within kGrowthLimit of their start, if a newer one exists: a resume then starts
  /// from sane weights, BatchNorm statistics and optimizer state, not from the blown-up ones.
  std::string diverged(const std::string& what) const {
    const auto latest = m_run.latest_checkpoint();
    if (!latest)
      return fmt::format(
          "training diverged at step {}: {}. No checkpoint was written before it: start again with a smaller learning "
          "rate (optimizer.lr)",
          m_step, what);
    if (m_last_sane.empty())
      return fmt::format(
          "training diverged at step {}: {}. Every checkpoint of this run was written while the losses were more than "
          "{:.0f}x their start, so none is a sane point to resume from: start again with a smaller learning rate "
          "(optimizer.lr)",
          m_step, what, kGrowthLimit);
    if (m_last_sane != *latest) m_run.point_latest(m_last_sane);
    return fmt::format(
        "training diverged at step {}: {}. {}, the last checkpoint written before the losses grew {:.0f}x beyond "
        "their start, holds only finite values{}: resume from it with a smaller learning rate, `mpigan train EXP "
        "--resume {} --set optimizer.lr=...`",
        m_step, what, m_last_sane, kGrowthLimit, m_last_sane != *latest ? " (checkpoints/latest now names it)" : "",
        m_dir);
  }

  void save_checkpoint() {
    // Never a checkpoint with inf or NaN in it: nothing could resume from it.
    if (const std::string bad = m_session.first_non_finite(); !bad.empty())
      MPIGAN_THROW(NumericError, "{}", diverged(fmt::format("the {} are not finite; no checkpoint is written", bad)));
    const std::string path = m_run.checkpoint_path(m_step);
    // A checkpoint of a run whose losses have grown kGrowthLimit-fold is kept, but the last sane one
    // is spared, and each checkpoint names it: a divergence, even after a resume, offers it.
    const bool sane = growth() < kGrowthLimit;
    const std::string last_sane = sane ? path : m_last_sane;
    CheckpointWriter w(path);
    m_session.save(w);
    w.put_string("progress/last_sane", std::filesystem::path(last_sane).filename().string());
    w.put_string("progress/loss_scale", fmt::format("{:.17g}", m_reference));
    w.put_int("progress/step", m_step);
    w.put_int("progress/samples", m_samples);
    w.put_int("progress/epoch", m_loader.position().epoch);
    w.put_int("progress/cursor", m_loader.position().cursor);
    w.put_string("experiment/name", m_experiment.name);
    w.put_string("experiment/model", m_experiment.model.name);
    w.commit();
    m_run.commit_checkpoint(path, m_experiment.checkpoint_keep, last_sane);
    m_last_sane = last_sane;
    m_summary.last_checkpoint = path;
    spdlog::info("checkpoint: {}", path);
  }

  void validate_losses() {
    if (!m_experiment.validate) return;
    auto vsource = m_plan.validation(m_experiment.batch);
    if (!vsource) return;
    const auto m = validation_losses(m_experiment, *m_session.step, *vsource);
    if (!m) return;
    m_metrics.row(metrics_row("validation", m_loader.position().epoch, m_step, m_samples, 0, 0, *m));
    m_metrics.flush();
    spdlog::info("validation: D {:.4f} (real {:.4f}, fake {:.4f})  G {:.4f}", m->d_loss(), m->d_real, m->d_fake, m->g);
    for (const auto& [name, value] : {std::pair{"val_d_loss", m->d_loss()}, std::pair{"val_g_loss", m->g},
                                      std::pair{"val_d_real", m->d_real}, std::pair{"val_d_fake", m->d_fake}})
      if (m_stopper.watches(name) && m_stopper.update(value)) m_summary.stopped_early = true;
  }

  /// Loss validation, and the physics one when it follows the loss validations.
  void validate() {
    validate_losses();
    if (m_physics && m_experiment.physics.every == 0) validate_physics();
    if (m_prune && m_prune()) {
      spdlog::info("validation at step {}: the search prunes this trial", m_step);
      m_summary.stopped_early = true;
    }
  }

  /// The physics figure of merit of the current generator (physics_monitor.hpp).
  void validate_physics() {
    if (!m_physics || m_physics_at == m_step) return;
    m_physics_at = m_step;
    // One process trains on the statistics it scores: re-estimated only when asked (auto: 0), and
    // put back after the score (best.h5 keeps the re-estimated ones it was scored with).
    const std::int64_t recalibrate = m_experiment.physics.recalibrate_passes(false);
    auto& g_state = m_session.model->generator.state();
    std::vector<float> kept(recalibrate > 0 ? g_state.size() : 0);
    if (recalibrate > 0) {
      copy_to_host(*m_session.backend, g_state, kept);
      m_physics->recalibrate(m_session, recalibrate);
    }
    PhysicsScore& sc = m_summary.physics.last.emplace(m_physics->score(m_session, m_step, m_samples));
    sc.recalibrated = recalibrate;
    sc.best = m_physics->keep_if_best(sc, m_session);
    if (recalibrate > 0) {
      copy_from_host(*m_session.backend, kept, g_state);
      m_session.model->generator.reset_state_decay();
    }
    m_metrics.row(physics_row(m_metrics.columns(), m_loader.position().epoch, seconds_since(m_t_start), sc));
    m_metrics.flush();
    spdlog::info("physics at step {}: {}{}", m_step, sc.describe(),
                 sc.best ? " (best so far: checkpoints/best.h5)" : "");
    if (m_stopper.watches(physics::kFigureOfMeritName) && m_stopper.update(sc.fom)) m_summary.stopped_early = true;
    m_summary.physics.best = m_physics->best();
  }

  void end_epoch() {
    const double dt = seconds_since(m_t_epoch);
    if (m_epoch_avg.count() > 0) {
      const auto m = m_epoch_avg.mean();
      m_metrics.row(metrics_row("epoch", m_loader.position().epoch - 1, m_step, m_samples, seconds_since(m_t_start),
                                m_epoch_samples / dt, m));
      spdlog::info("epoch {} done: D {:.4f}  G {:.4f}  ({:.1f} samples/s)", m_loader.position().epoch, m.d_loss(), m.g,
                   m_epoch_samples / dt);
      m_summary.last_epoch = m;
    }
    if (m_experiment.validate_every == 0) validate();
    if (m_experiment.checkpoint_every == 0) save_checkpoint();
    m_epoch_avg.reset();
    m_epoch_samples = 0;
    m_t_epoch = clock::now();
  }

  void train_step(const data::Batch& batch) {
    const auto t0 = clock::now();
    const auto apply = [&](models::Net n) { m_session.apply_local(n); };
    if (m_experiment.lr_schedule.kind != "constant") {
      const double f = m_experiment.lr_schedule.factor(m_step, m_total_steps);
      m_session.opt_g->set_lr(m_experiment.opt_generator.lr * f);
      m_session.opt_d->set_lr(m_experiment.opt_discriminator.lr * f);
    }
    models::StepLosses l;
    try {
      l = m_session.step->run(real_batch(batch), static_cast<std::uint64_t>(m_step), apply);
    } catch (const NumericError& e) {
      MPIGAN_THROW(NumericError, "{}", diverged(e.what()));
    }
    warn_if_growing(l);
    const double dt = seconds_since(t0);
    ++m_step;
    m_samples += batch.size();
    m_epoch_samples += batch.size();
    m_epoch_avg.add(l);
    const double elapsed = seconds_since(m_t_start);
    // Steady state: from the end of this run's first step (start-up and warm-up excluded).
    if (m_steady_t0 < 0) {
      m_steady_t0 = elapsed;
      m_steady_samples0 = m_samples;
    } else {
      m_summary.steady_samples_per_s = static_cast<double>(m_samples - m_steady_samples0) / (elapsed - m_steady_t0);
    }
    m_metrics.row(metrics_row("step", m_loader.position().epoch, m_step, m_samples, elapsed, batch.size() / dt, l));
    if (m_step % m_experiment.log_every == 0 || m_step == m_total_steps) {
      m_metrics.flush();
      const double rate = static_cast<double>(m_samples - m_samples_at_start) / elapsed;
      spdlog::info(
          "step {}/{} epoch {}/{} | D {:.4f} (real {:.4f}, fake {:.4f}) G {:.4f} | {:.2f} samples/s | ETA {}", m_step,
          m_total_steps, m_loader.position().epoch + 1, m_experiment.epochs, l.d_loss(), l.d_real, l.d_fake, l.g, rate,
          duration(static_cast<double>(m_total_steps - m_step) * static_cast<double>(m_experiment.batch) / rate));
    }
    if (m_experiment.validate_every > 0 && m_step % m_experiment.validate_every == 0) validate();
    if (m_experiment.physics.every > 0 && m_step % m_experiment.physics.every == 0) validate_physics();
    if (m_experiment.checkpoint_every > 0 && m_step % m_experiment.checkpoint_every == 0) save_checkpoint();
  }

  /// Losses that grow by orders of magnitude announce a divergence long before inf: warn at each
  /// new decade of the mean of the last 20 steps over the run's scale, the smaller of its first
  /// step (the initial weights: losses of order one) and the lowest such mean seen. The first step
  /// counts because a large learning rate can blow the losses up within the first 20 steps.
  void warn_if_growing(const models::StepLosses& l) {
    const double v = std::fabs(l.d_loss()) + std::fabs(l.g);
    if (!std::isfinite(v)) return;  // the step itself reports it
    m_reference = std::min(m_reference, v);
    m_window.push_back(v);
    if (m_window.size() > 20) m_window.erase(m_window.begin());
    if (m_window.size() < 20) return;
    double mean = 0;
    for (double x : m_window) mean += x / 20;
    m_reference = std::min(m_reference, mean);
    const double g = growth();
    if (g >= kGrowthLimit && std::log10(g) >= m_warned_decade + 1) {
      m_warned_decade = std::floor(std::log10(g));
      spdlog::warn(
          "step {}: the losses (D + G, mean of 20 steps) are {:.3g}, {:.0f}x their scale at the start ({:.3g}): the "
          "run is diverging; consider a smaller optimizer.lr (the last checkpoint before the growth: {})",
          m_step + 1, mean, g, m_reference, m_last_sane.empty() ? "none" : m_last_sane);
    }
  }

  /// The mean loss of the last 20 steps (of those there are, before the 20th) over the run's scale.
  double growth() const {
    if (m_window.empty() || !(m_reference > 0)) return 0.0;
    double mean = 0;
    for (double x : m_window) mean += x / static_cast<double>(m_window.size());
    return mean / m_reference;
  }

  TrainSummary finish() {
    // Stopped by a signal: checkpoint at once (Slurm allows ~30 s before SIGKILL), no validation.
    m_summary.stopped_by_signal = stop_signal();
    const bool signalled = m_summary.stopped_by_signal != 0;
    if (signalled)
      spdlog::warn("{} received: checkpointing at step {} and stopping", signal_name(stop_signal()), m_step);
    if (m_epoch_avg.count() > 0) {
      m_summary.last_epoch = m_epoch_avg.mean();
      if (m_experiment.validate_every == 0 && !signalled) validate();  // the run ended inside an epoch
    }
    if (m_physics && m_physics_at != m_step && !signalled) validate_physics();  // the final weights' figure
    if (m_summary.last_checkpoint.empty() || !m_summary.last_checkpoint.ends_with(fmt::format("{:08d}.h5", m_step)))
      save_checkpoint();
    m_metrics.flush();
    m_summary.steps = m_step;
    m_summary.samples = m_samples;
    m_summary.epochs = m_loader.position().epoch;
    m_summary.epoch_fraction =
        static_cast<double>(m_loader.position().cursor) / static_cast<double>(m_loader.batches_per_epoch());
    m_summary.seconds = seconds_since(m_t_start);
    m_summary.samples_per_s = m_summary.seconds > 0 ? static_cast<double>(m_samples) / m_summary.seconds : 0;
    return m_summary;
  }

  const ExperimentConfig& m_experiment;
  bool m_resume;
  std::string m_dir;
  RunDirectory m_run;
  DataPlan m_plan;
  Session m_session;
  std::unique_ptr<data::BatchSource> m_source;
  data::BatchSource& m_loader;
  CsvLog m_metrics;
  TrainSummary m_summary;
  std::int64_t m_step = 0, m_samples = 0, m_samples_at_start = 0, m_total_steps = 0;
  std::int64_t m_epoch_samples = 0, m_steady_samples0 = 0;
  double m_steady_t0 = -1;
  LossAverager m_epoch_avg;
  clock::time_point m_t_start, m_t_epoch;
  EarlyStopper m_stopper;
  std::function<bool()> m_prune;
  std::optional<PhysicsMonitor> m_physics;
  std::int64_t m_physics_at = -1;  ///< step of the last physics validation
  /// Growth of the losses over their scale at which a run is called diverging.
  static constexpr double kGrowthLimit = 100.0;
  std::vector<double> m_window;                                  ///< |D| + |G| of the last 20 steps
  double m_reference = std::numeric_limits<double>::infinity();  ///< the scale: first step, lowest mean
  double m_warned_decade = 1;  ///< log10 of the growth last warned about (first warning at 100x)
  std::string m_last_sane;     ///< the last checkpoint written with the losses within kGrowthLimit
};

}  // namespace

TrainSummary run_single_process(const ExperimentConfig& e, const RunOptions& options) {
  SingleProcessRun run(e, options);
  return run.run();
}

}  // namespace mpigan::train
