// The top master's logs, progress line, throughput and validation (progress.hpp).
#include "mpigan/master/progress.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/core/stop_signal.hpp"
#include "mpigan/train/session.hpp"
#include "mpigan/train/validation.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

namespace mpigan::master {

using models::Net;

ProgressContext ProgressContext::of(dist::RoleContext& ctx) {
  return {ctx.job.experiment, ctx.run_dir, ctx.session, ctx.trace, [] { return MPI_Wtime(); }};
}

Progress::Progress(ProgressContext ctx, int children)
    : m_ctx(std::move(ctx)),
      m_compute_threads(host_threads()),
      m_stopper(m_ctx.experiment.early_stopping),
      m_contributed(static_cast<std::size_t>(children), false) {}

train::DataPlan& Progress::plan() {
  if (!m_plan) m_plan = std::make_unique<train::DataPlan>(train::DataPlan::open(m_ctx.experiment, false));
  return *m_plan;
}

void Progress::open_logs(std::int64_t resumed_version) {
  const bool append = resumed_version >= 0;
  train::RunDirectory run(m_ctx.run_dir, false);
  m_updates = std::make_unique<train::CsvLog>(
      run.file("updates.csv"),
      std::vector<std::string>{"time_s", "step", "worker", "rank", "pulled", "staleness", "samples", "update_norm",
                               "update_norm_g", "update_norm_d", "scale_g", "scale_d", "queue_s", "wait_s", "compute_s",
                               "verdict", "d_loss", "g_loss", "lr_factor"},
      append);
  m_metrics = std::make_unique<train::CsvLog>(run.file("metrics.csv"),
                                              train::metrics_columns(m_ctx.session.step->loss_names()), append);
  if (append) {
    m_updates->drop_after(resumed_version);
    m_metrics->drop_after(resumed_version);
  }
  m_t0 = m_ctx.now();
  if (m_ctx.experiment.physics.enabled)
    m_physics = std::make_unique<train::AsyncPhysicsMonitor>(m_ctx.experiment, plan(), run.file("checkpoints/best.h5"));
}

void Progress::log_update(const LogRow& r, std::int64_t version) {
  if (!m_updates) return;
  const double d_loss = r.h.n_losses >= 2 ? 0.5 * (r.h.losses[0] + r.h.losses[1]) : 0.0;
  const double g_loss = r.h.n_losses >= 3 ? r.h.losses[2] : 0.0;
  const std::int64_t staleness = r.version - r.h.version;
  m_updates->row({train::csv_number(m_ctx.now() - m_t0), std::to_string(version), std::to_string(r.child),
                  std::to_string(r.rank), std::to_string(r.h.version), std::to_string(staleness),
                  std::to_string(r.h.samples), train::csv_number(std::sqrt(r.norm_g * r.norm_g + r.norm_d * r.norm_d)),
                  train::csv_number(r.norm_g), train::csv_number(r.norm_d), train::csv_number(r.scale[0]),
                  train::csv_number(r.scale[1]), train::csv_number(r.queue_s), train::csv_number(r.h.wait_s),
                  train::csv_number(r.h.compute_s), r.verdict, train::csv_number(d_loss), train::csv_number(g_loss),
                  train::csv_number(r.lr_factor)});
  m_staleness_sum += static_cast<double>(staleness);
  m_d_sum += d_loss;
  m_g_sum += g_loss;
  ++m_logged;
}

void Progress::log_decision(LogRow row, const Decision& d, std::int64_t version) {
  row.scale = d.scale;
  row.lr_factor = d.lr_factor;
  switch (d.outcome) {
    case Outcome::rejected_nonfinite:
    case Outcome::diverged:
      row.verdict = "rejected_nonfinite";
      return log_update(row, version);
    case Outcome::rejected_by_rule:
      row.verdict = "rejected_by_rule";
      return log_update(row, version);
    case Outcome::held:
      row.verdict = "held";
      m_held.push_back(row);
      return;
    case Outcome::applied:
      return applied(row, "applied", version);
  }
}

void Progress::log_round(std::int64_t version) {
  for (auto& row : m_held) applied(row, "applied_round", version);
  m_held.clear();
}

void Progress::applied(LogRow& row, const char* verdict, std::int64_t version) {
  note_applied(row.child, row.h.samples);
  row.verdict = verdict;
  const auto s = static_cast<std::size_t>(std::max<std::int64_t>(0, row.version - row.h.version));
  if (m_staleness.size() <= s) m_staleness.resize(s + 1, 0);
  ++m_staleness[s];
  log_update(row, version);
}

void Progress::note_applied(int child, std::int64_t samples) {
  const double now = m_ctx.now();
  m_contributed[static_cast<std::size_t>(child)] = true;
  if (m_steady_t0 < 0) {
    if (std::all_of(m_contributed.begin(), m_contributed.end(), [](bool c) { return c; })) {
      m_steady_t0 = now;
      m_steady_samples = 0;
    }
    return;
  }
  m_steady_samples += samples;
  m_steady_t1 = now;
}

double Progress::steady_samples_per_s() const {
  if (m_steady_t1 > m_steady_t0 && m_steady_t0 >= 0)
    return static_cast<double>(m_steady_samples) / (m_steady_t1 - m_steady_t0);
  return 0;
}

void Progress::after_version(std::int64_t version, std::int64_t samples) {
  const auto every = m_ctx.experiment.log_every;
  if (m_updates && every > 0 && version % every == 0) print(version, samples);
}

void Progress::print(std::int64_t version, std::int64_t samples) {
  const auto& e = m_ctx.experiment;
  m_updates->flush();
  const double elapsed = m_ctx.now() - m_t0;
  const double rate = elapsed > 0 ? static_cast<double>(samples) / elapsed : 0;
  std::string eta = "?";
  double spent = 0;  // the fraction spent of the budget that ends the run first
  if (e.max_updates > 0) spent = static_cast<double>(version) / static_cast<double>(e.max_updates);
  if (e.max_samples > 0) spent = std::max(spent, static_cast<double>(samples) / static_cast<double>(e.max_samples));
  if (spent > 0 && spent < 1) {
    const double left = elapsed * (1 - spent) / spent;
    eta = fmt::format("{}m{:02d}s", static_cast<long long>(left) / 60, static_cast<long long>(left) % 60);
  }
  const double k = m_logged > 0 ? 1.0 / static_cast<double>(m_logged) : 0.0;
  spdlog::info("update {}{} | D {:.4f} G {:.4f} | {:.2f} samples/s | mean staleness {:.2f} | ETA {}", version,
               e.max_updates > 0 ? fmt::format("/{}", e.max_updates) : std::string(), m_d_sum * k, m_g_sum * k, rate,
               m_staleness_sum * k, eta);
  m_d_sum = m_g_sum = m_staleness_sum = 0;
  m_logged = 0;
}

bool Progress::validate(const UpdateService& service, dist::MasterResult& result) {
  const auto& e = m_ctx.experiment;
  if (!e.validate) return false;
  auto span = m_ctx.trace.span("validate", "compute");
  ScopedHostThreads validating(m_compute_threads);
  m_validated_at = service.version();
  if (m_physics && e.physics.every == 0) request_physics(service);
  if (!m_val_loader) {
    m_val_loader = plan().validation(e.batch);
    if (!m_val_loader) return false;
  }
  // The canonical weights and state into the session's model.
  auto& m = *m_ctx.session.model;
  auto& be = *m_ctx.session.backend;
  const auto& layout = service.layout();
  train::copy_from_host(be, service.weights(Net::generator), m.generator.weights());
  train::copy_from_host(be, service.weights(Net::discriminator), m.discriminator.weights());
  train::copy_from_host(be, layout.in_state(Net::generator, service.state()), m.generator.state());
  train::copy_from_host(be, layout.in_state(Net::discriminator, service.state()), m.discriminator.state());
  const auto l = train::validation_losses(e, *m_ctx.session.step, *m_val_loader);
  if (!l) return false;
  m_metrics->row(train::metrics_row("validation", 0, service.version(), service.samples(), m_ctx.now() - m_t0, 0, *l));
  m_metrics->flush();
  result.last_val_d = l->d_loss();
  result.last_val_g = l->g;
  spdlog::info("validation at update {}: D {:.4f} (real {:.4f}, fake {:.4f})  G {:.4f}", service.version(), l->d_loss(),
               l->d_real, l->d_fake, l->g);
  bool stop = false;
  for (const auto& [name, value] : {std::pair{"val_d_loss", l->d_loss()}, std::pair{"val_g_loss", l->g},
                                    std::pair{"val_d_real", l->d_real}, std::pair{"val_d_fake", l->d_fake}})
    if (m_stopper.watches(name) && m_stopper.update(value)) stop = true;
  return stop;
}

void Progress::request_physics(const UpdateService& service) {
  if (!m_physics || m_physics_at == service.version()) return;
  const auto& layout = service.layout();
  const auto w = service.weights(Net::generator);
  const auto st = layout.in_state(Net::generator, service.state());
  // auto: an asynchronous rule's canonical statistics were gathered on other weights (stale
  // ones, or EASGD's workers'): re-estimated for the canonical generator before it is scored.
  const std::int64_t recalibrate = m_ctx.experiment.physics.recalibrate_passes(!service.synchronous());
  if (m_physics->start({w.begin(), w.end()}, {st.begin(), st.end()}, service.version(), service.samples(), recalibrate))
    m_physics_at = service.version();
}

bool Progress::poll_physics(dist::MasterResult& result) {
  if (!m_physics) return false;
  const auto s = m_physics->poll();
  return s && record_physics(*s, result);
}

bool Progress::record_physics(const train::PhysicsScore& s, dist::MasterResult& result) {
  m_metrics->row(train::physics_row(m_metrics->columns(), 0, m_ctx.now() - m_t0, s));
  m_metrics->flush();
  spdlog::info("physics at update {}: {}{}", s.step, s.describe(), s.best ? " (best so far: checkpoints/best.h5)" : "");
  result.physics.last = s;
  result.physics.best = m_physics->best();
  result.physics.skipped = m_physics->skipped();
  return m_stopper.watches(physics::kFigureOfMeritName) && m_stopper.update(s.fom);
}

bool Progress::physics_now(const UpdateService& service, dist::MasterResult& result) {
  if (!m_physics) return false;
  ScopedHostThreads validating(m_compute_threads);
  request_physics(service);
  const auto s = m_physics->wait();
  return s && record_physics(*s, result);
}

void Progress::finish_physics(const UpdateService& service, dist::MasterResult& result) {
  if (!m_physics) return;
  result.physics.best_path = train::RunDirectory(m_ctx.run_dir, false).file("checkpoints/best.h5");
  ScopedHostThreads validating(m_compute_threads);
  if (auto s = m_physics->wait()) record_physics(*s, result);
  if (m_physics_at != service.version() && stop_signal() == 0) {  // a signalled job ends at once
    request_physics(service);
    if (auto s = m_physics->wait()) record_physics(*s, result);
  }
}

void Progress::save_state(train::CheckpointWriter& w, const std::string& prefix) const {
  MPIGAN_CHECK(m_held.empty(), "progress is saved between rounds; {} updates are held", m_held.size());
  const auto best = m_stopper.best();
  w.put(prefix + "/scalars",
        std::vector<double>{m_t0, m_staleness_sum, m_d_sum, m_g_sum, static_cast<double>(m_logged),
                            static_cast<double>(m_physics_at), static_cast<double>(m_validated_at), m_steady_t0,
                            m_steady_t1, static_cast<double>(m_steady_samples), best ? 1.0 : 0.0, best.value_or(0.0),
                            static_cast<double>(m_stopper.since_best())});
  w.put(prefix + "/contributed", std::vector<double>(m_contributed.begin(), m_contributed.end()));
  w.put(prefix + "/staleness", std::span<const std::int64_t>(m_staleness));
}

void Progress::load_state(const train::CheckpointReader& r, const std::string& prefix) {
  const auto v = r.doubles(prefix + "/scalars", 13);
  m_t0 = v[0];
  m_staleness_sum = v[1];
  m_d_sum = v[2];
  m_g_sum = v[3];
  m_logged = static_cast<std::int64_t>(v[4]);
  m_physics_at = static_cast<std::int64_t>(v[5]);
  m_validated_at = static_cast<std::int64_t>(v[6]);
  m_steady_t0 = v[7];
  m_steady_t1 = v[8];
  m_steady_samples = static_cast<std::int64_t>(v[9]);
  m_stopper.restore(v[10] != 0 ? std::optional<double>(v[11]) : std::nullopt, static_cast<std::int64_t>(v[12]));
  const auto contributed = r.doubles(prefix + "/contributed", m_contributed.size());
  std::transform(contributed.begin(), contributed.end(), m_contributed.begin(), [](double c) { return c != 0; });
  m_staleness = r.int64s(prefix + "/staleness");
}

}  // namespace mpigan::master
