// The single-process trainer (trainer.hpp): the Keras recipe step by step, logs, validation, checkpoints, resume.
#include "mpigan/train/trainer.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/data/file_list.hpp"
#include "mpigan/data/simulator/simulate_dataset.hpp"
#include "mpigan/train/run_dir.hpp"
#include "mpigan/train/session.hpp"
#include "mpigan/train/sources.hpp"
#include "mpigan/train/validation.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>

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

TrainSummary run_single_process(const ExperimentConfig& e, const RunOptions& options) {
  using clock = std::chrono::steady_clock;
  const bool resume = !options.resume_dir.empty();
  const std::string dir = resume ? options.resume_dir : (options.out_dir.empty() ? e.output_dir : options.out_dir);
  RunDirectory run(dir, resume);
  YAML::Node resolved = YAML::Clone(e.resolved);
  resolved["output"]["dir"] = dir;
  run.write_config(resolved);

  const DataPlan plan = DataPlan::open(e, true);
  Session s = Session::create(e, mix64(e.seed ^ 0x51A6E5ull));
  spdlog::info("backend: {}", s.backend->describe());
  spdlog::info("model {}: generator {} parameters, discriminator {}; data: {}", e.model.name,
               s.model->generator.weights().count(), s.model->discriminator.weights().count(), plan.describe());
  std::unique_ptr<data::BatchSource> source = plan.train(e.batch);
  data::BatchSource& loader = *source;

  std::int64_t step = 0, samples = 0;
  if (resume) {
    const std::string ckpt = *run.latest_checkpoint();
    CheckpointReader r(ckpt);
    s.load(r);
    step = r.get_int("progress/step");
    samples = r.get_int("progress/samples");
    loader.seek({r.get_int("progress/epoch"), r.get_int("progress/cursor")});
    spdlog::info("resumed from {} at step {} (epoch {}, batch {} of {})", ckpt, step, loader.position().epoch + 1,
                 loader.position().cursor, loader.batches_per_epoch());
  }

  const std::int64_t samples_at_start = samples;
  const auto heads = s.model->discriminator.output_names();
  CsvLog metrics(run.file("metrics.csv"), metrics_columns(heads), resume);
  const std::int64_t total_steps = e.max_updates > 0 ? std::min(e.max_updates, e.epochs * loader.batches_per_epoch())
                                                     : e.epochs * loader.batches_per_epoch();

  TrainSummary summary;
  summary.run_dir = dir;
  double steady_t0 = -1;
  std::int64_t steady_samples0 = 0;
  auto save_checkpoint = [&] {
    const std::string path = run.checkpoint_path(step);
    CheckpointWriter w(path);
    s.save(w);
    w.put_int("progress/step", step);
    w.put_int("progress/samples", samples);
    w.put_int("progress/epoch", loader.position().epoch);
    w.put_int("progress/cursor", loader.position().cursor);
    w.put_string("experiment/name", e.name);
    w.put_string("experiment/model", e.model.name);
    w.commit();
    run.commit_checkpoint(path, e.checkpoint_keep);
    summary.last_checkpoint = path;
    spdlog::info("checkpoint: {}", path);
  };
  auto validate = [&] {
    if (!e.validate) return;
    auto vsource = plan.validation(e.batch);
    if (!vsource) return;
    const auto m = validation_losses(e, *s.step, *vsource);
    if (!m) return;
    metrics.row(metrics_row("validation", loader.position().epoch, step, samples, 0, 0, *m));
    metrics.flush();
    spdlog::info("validation: D {:.4f} (real {:.4f}, fake {:.4f})  G {:.4f}", m->d_loss(), m->d_real, m->d_fake, m->g);
  };

  LossAverager epoch_avg;
  data::Batch batch;
  const auto t_start = clock::now();
  auto t_epoch = t_start;
  std::int64_t epoch_samples = 0;
  const auto apply = [&](models::Net n) { s.apply_local(n); };
  while (step < total_steps) {
    if (!loader.next(batch)) {
      // End of an epoch.
      const double dt = std::chrono::duration<double>(clock::now() - t_epoch).count();
      if (epoch_avg.count() > 0) {
        const auto m = epoch_avg.mean();
        metrics.row(metrics_row("epoch", loader.position().epoch - 1, step, samples,
                                std::chrono::duration<double>(clock::now() - t_start).count(), epoch_samples / dt, m));
        spdlog::info("epoch {} done: D {:.4f}  G {:.4f}  ({:.1f} samples/s)", loader.position().epoch, m.d_loss(), m.g,
                     epoch_samples / dt);
        summary.last_epoch = m;
      }
      if (e.validate_every == 0) validate();
      if (e.checkpoint_every == 0) save_checkpoint();
      epoch_avg.reset();
      epoch_samples = 0;
      t_epoch = clock::now();
      continue;
    }
    const auto t0 = clock::now();
    const models::StepLosses l = s.step->run(real_batch(batch), static_cast<std::uint64_t>(step), apply);
    const double dt = std::chrono::duration<double>(clock::now() - t0).count();
    ++step;
    samples += batch.size();
    epoch_samples += batch.size();
    epoch_avg.add(l);
    const double elapsed = std::chrono::duration<double>(clock::now() - t_start).count();
    // Steady state: from the end of this run's first step (start-up and warm-up excluded).
    if (steady_t0 < 0) {
      steady_t0 = elapsed;
      steady_samples0 = samples;
    } else {
      summary.steady_samples_per_s = static_cast<double>(samples - steady_samples0) / (elapsed - steady_t0);
    }
    metrics.row(metrics_row("step", loader.position().epoch, step, samples, elapsed, batch.size() / dt, l));
    if (step % e.log_every == 0 || step == total_steps) {
      metrics.flush();
      const double rate = static_cast<double>(samples - samples_at_start) / elapsed;
      spdlog::info("step {}/{} epoch {}/{} | D {:.4f} (real {:.4f}, fake {:.4f}) G {:.4f} | {:.2f} samples/s | ETA {}",
                   step, total_steps, loader.position().epoch + 1, e.epochs, l.d_loss(), l.d_real, l.d_fake, l.g, rate,
                   duration(static_cast<double>(total_steps - step) * static_cast<double>(e.batch) / rate));
    }
    if (e.validate_every > 0 && step % e.validate_every == 0) validate();
    if (e.checkpoint_every > 0 && step % e.checkpoint_every == 0) save_checkpoint();
  }
  if (epoch_avg.count() > 0) {
    summary.last_epoch = epoch_avg.mean();
    if (e.validate_every == 0) validate();  // the run ended inside an epoch
  }
  if (summary.last_checkpoint.empty() || !summary.last_checkpoint.ends_with(fmt::format("{:08d}.h5", step)))
    save_checkpoint();
  metrics.flush();
  summary.steps = step;
  summary.samples = samples;
  summary.epochs = loader.position().epoch;
  summary.epoch_fraction =
      static_cast<double>(loader.position().cursor) / static_cast<double>(loader.batches_per_epoch());
  summary.seconds = std::chrono::duration<double>(clock::now() - t_start).count();
  summary.samples_per_s = summary.seconds > 0 ? static_cast<double>(samples) / summary.seconds : 0;
  return summary;
}

}  // namespace mpigan::train
