// The physics figure of merit during training (physics_monitor.hpp).
#include "mpigan/train/physics_monitor.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/data/preprocess.hpp"
#include "mpigan/train/checkpoint.hpp"
#include "mpigan/train/run_dir.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>

namespace mpigan::train {

namespace {

/// A fixed seed for the latent noise of every physics validation: scores differ by weights only.
constexpr std::uint64_t kPhysicsSeed = 0x9B15C5ull;

/// The observables of showers in GeV (events x cells floats).
physics::Observables observables_of(const std::vector<float>& cells, const Dims3& dims, const ShowerConditions& c) {
  return physics::compute_observables(cells, dims, c.energy, c.angle);
}

/// A figure that may not have been computed: empty when NaN (the classifier skipped).
std::string optional_number(double v) {
  return std::isnan(v) ? std::string() : csv_number(v);
}

}  // namespace

std::string PhysicsScore::describe() const {
  if (diverged) return fmt::format("diverged: the generator's showers hold NaN or inf ({} events)", events);
  if (dead()) return fmt::format("dead: every one of the generator's {} showers is empty", events);
  const std::string empties = empty > 0 ? fmt::format(", {} of {} showers empty", empty, events) : std::string();
  return fmt::format(
      "{} {:.3g} +- {:.2g}, sampling-fraction MRE {:.2f} % +- {:.2f}, 3DGAN metric {:.3g}, KPD {:.3g}{} "
      "({} events{}{}, {:.1f} s)",
      physics::kFigureOfMeritName, fom, fom_error, 100 * sf_mre, 100 * sf_mre_error, gan3d, kpd,
      std::isnan(auc) ? std::string() : fmt::format(", classifier AUC {:.3f} +- {:.3f}", auc, auc_error), events,
      empties, recalibrated > 0 ? fmt::format(", BatchNorm statistics re-estimated over {} batches", recalibrated) : "",
      seconds);
}

bool PhysicsOutcome::ruined() const {
  return last && (last->diverged || last->dead() || !(last->fom < kFomOffScale));
}

std::string PhysicsOutcome::summary() const {
  if (!last) return {};
  std::string s = fmt::format("Physics at step {} ({} samples): {}.\n", last->step, last->samples, last->describe());
  if (best)
    s += fmt::format("Best {} {:.3g}: the generator is kept in {}.\n", physics::kFigureOfMeritName, *best, best_path);
  if (skipped > 0)
    s += fmt::format("{} physics validations were skipped while one was still running (validation.physics.every).\n",
                     skipped);
  if (last->diverged)
    s += "WARNING: the generator is ruined: its showers hold NaN or inf. Do not use this run's latest checkpoint.\n";
  else if (last->dead())
    s += "WARNING: the generator is dead: every shower it makes is empty (its output ReLU is off everywhere, and "
         "with zero gradients there training cannot bring it back). Steps too large for the generator killed it: "
         "a lower learning rate, or another update rule at this number of workers (docs/algorithms.md).\n";
  if (!last->diverged && !last->dead() && last->events > 0 &&
      static_cast<double>(last->empty) >= kEmptyWarnFraction * static_cast<double>(last->events))
    s += fmt::format(
        "WARNING: {} of the generator's {} showers ({:.0f} %) are empty: its output is off everywhere for part of "
        "its conditions, the start of a dead generator (Monte Carlo showers are never empty). Watch the "
        "empty_showers column of metrics.csv; a lower learning rate or another update rule at this number of "
        "workers (docs/algorithms.md).\n",
        last->empty, last->events, 100.0 * static_cast<double>(last->empty) / static_cast<double>(last->events));
  if (!last->diverged && !last->dead() && ruined())
    s += fmt::format(
        "WARNING: {} = {:.3g} is off the scale (>= {:g}; Monte Carlo against itself scores below 1, a 10 % error in "
        "energy scale or shower width about 10): the generator does not make showers like the Monte Carlo. Look at "
        "`mpigan validate {} --reference HELD_OUT.h5` before using it.\n",
        physics::kFigureOfMeritName, last->fom, kFomOffScale, best_path.empty() ? "RUN_DIR" : best_path);
  return s;
}

std::vector<std::string> physics_columns() {
  return {physics::kFigureOfMeritName,
          "fpd_hlf_error",
          "sf_mre",
          "sf_mre_error",
          "gan3d_metric",
          "kpd",
          "empty_showers",
          "auc",
          "auc_error"};
}

std::vector<std::string> physics_row(const std::vector<std::string>& columns, std::int64_t epoch, double elapsed_s,
                                     const PhysicsScore& s) {
  std::vector<std::string> r{"physics", std::to_string(epoch), std::to_string(s.step), std::to_string(s.samples),
                             csv_number(elapsed_s)};
  const std::vector<std::string> values{
      csv_number(s.fom),          csv_number(s.fom_error), csv_number(s.sf_mre),
      csv_number(s.sf_mre_error), csv_number(s.gan3d),     csv_number(s.kpd),
      std::to_string(s.empty),    optional_number(s.auc),  optional_number(s.auc_error)};
  MPIGAN_CHECK(columns.size() >= r.size() + values.size(), "physics_row: {} metrics columns", columns.size());
  r.resize(columns.size() - values.size());
  r.insert(r.end(), values.begin(), values.end());
  return r;
}

PhysicsMonitor::PhysicsMonitor(const ExperimentConfig& e, DataPlan& plan, std::string best_path)
    : m_experiment(e), m_best_path(std::move(best_path)) {
  if (!m_best_path.empty() && std::filesystem::exists(m_best_path)) {
    const CheckpointReader r(m_best_path);
    if (r.has("physics/fpd_hlf")) m_best = std::stod(r.get_string("physics/fpd_hlf"));
  }
  auto source = plan.validation(e.batch);
  if (!source)
    throw ConfigError("validation.physics", {"needs held-out showers to compare with: give data.validation or "
                                             "data.validation_fraction (this run has no validation data)"});
  const data::Preprocess& pre = e.data.preprocess;
  std::vector<float> cells;
  Dims3 dims{};
  source->seek({0, 0});
  data::Batch b;
  while (static_cast<std::int64_t>(m_conditions.energy.size()) < e.physics.events && source->next(b)) {
    const Tensor showers = data::postprocess_images(b.image, pre, data::Units::gev);
    const Shape& s = showers.shape();
    dims = Dims3{s[2], s[3], s[4]};
    const std::int64_t per = dims.product();
    const std::int64_t take =
        std::min<std::int64_t>(b.size(), e.physics.events - static_cast<std::int64_t>(m_conditions.energy.size()));
    cells.insert(cells.end(), showers.data(), showers.data() + take * per);
    for (std::int64_t i = 0; i < take; ++i) {
      m_conditions.energy.push_back(data::energy_from_target(b.energy.data()[i], pre));
      if (b.angle.defined()) m_conditions.angle.push_back(b.angle.data()[i]);
    }
  }
  MPIGAN_CHECK(!m_conditions.energy.empty(), "validation.physics: the validation data hold no events");
  m_ref = observables_of(cells, dims, m_conditions);
  spdlog::info("physics validation: reference of {} held-out showers{}", m_ref.events,
               m_ref.events < e.physics.events
                   ? fmt::format(" (validation.physics.events asks for {})", e.physics.events)
                   : std::string());
}

PhysicsScore PhysicsMonitor::score(Session& session, std::int64_t at_step, std::int64_t samples) const {
  const auto t0 = std::chrono::steady_clock::now();
  PhysicsScore r;
  r.step = at_step;
  r.samples = samples;
  r.events = m_ref.events;
  const auto diverged = [&] {
    r.diverged = true;
    r.fom = r.sf_mre = r.gan3d = r.kpd = std::numeric_limits<double>::infinity();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  };
  const auto& g = session.model->generator;
  std::vector<float> host(g.weights().size() + g.state().size());
  copy_to_host(*session.backend, g.weights(), std::span(host).first(g.weights().size()));
  copy_to_host(*session.backend, g.state(), std::span(host).subspan(g.weights().size()));
  for (float x : host)
    if (!std::isfinite(x)) return diverged();
  models::GanStep& step = *session.step;
  std::vector<float> cells(static_cast<std::size_t>(m_ref.events * m_ref.dims.product()));
  const std::int64_t per = m_ref.dims.product();
  generate_batches(step, m_experiment.data.preprocess, m_conditions, m_experiment.physics.batch, kPhysicsSeed,
                   data::Units::gev, [&](std::int64_t b0, const Tensor& showers) {
                     std::copy(showers.data(), showers.data() + showers.numel(), cells.begin() + b0 * per);
                   });
  for (std::int64_t i = 0; i < m_ref.events; ++i) {
    const auto first = cells.begin() + i * per;
    if (std::all_of(first, first + per, [](float x) { return x == 0.0f; })) ++r.empty;
  }
  try {
    const physics::Observables gen = observables_of(cells, m_ref.dims, m_conditions);
    physics::CompareOptions o;
    o.separation_enabled = false;
    o.binning.energy_half_width = physics::kValidationEnergyHalfWidthGev;
    const physics::Comparison c = physics::compare(m_ref, gen, o);
    r.fom = c.fom.value;
    r.fom_error = c.fom.error;
    r.sf_mre = c.sampling_fraction.mre;
    r.sf_mre_error = c.sampling_fraction.error;
    r.gan3d = c.gan3d.total;
    r.kpd = c.kpd.value;
    if (c.classifier) {
      r.auc = c.classifier->auc;
      r.auc_error = c.classifier->auc_error;
    }
  } catch (const NumericError&) {
    return diverged();
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

void PhysicsMonitor::recalibrate(Session& session, std::int64_t batches) const {
  recalibrate_generator(*session.step, m_experiment.data.preprocess, m_conditions, m_experiment.physics.batch, batches,
                        kPhysicsSeed);
}

bool PhysicsMonitor::keep_if_best(const PhysicsScore& s, Session& session) {
  if (s.diverged || !std::isfinite(s.fom) || (m_best && s.fom >= *m_best) || m_best_path.empty()) return false;
  m_best = s.fom;
  CheckpointWriter w(m_best_path);
  save_parameters(w, "model/generator/weights", session.model->generator.weights(), *session.backend);
  save_parameters(w, "model/generator/state", session.model->generator.state(), *session.backend);
  w.put_string("physics/fpd_hlf", fmt::format("{:.17g}", s.fom));
  w.put_string("physics/describe", s.describe());
  w.put_int("progress/step", s.step);
  w.put_int("progress/samples", s.samples);
  w.put_string("experiment/name", m_experiment.name);
  w.put_string("experiment/model", m_experiment.model.name);
  w.commit();
  return true;
}

AsyncPhysicsMonitor::AsyncPhysicsMonitor(const ExperimentConfig& e, DataPlan& plan, std::string best_path)
    : m_experiment(e), m_monitor(m_experiment, plan, std::move(best_path)) {}

AsyncPhysicsMonitor::~AsyncPhysicsMonitor() {
  if (m_thread.joinable()) m_thread.join();
}

bool AsyncPhysicsMonitor::start(std::vector<float> weights, std::vector<float> state, std::int64_t step,
                                std::int64_t samples, std::int64_t recalibrate_bn) {
  if (m_thread.joinable()) {
    ++m_skipped;
    return false;
  }
  m_done = false;
  m_thread = std::thread([this, w = std::move(weights), st = std::move(state), step, samples, recalibrate_bn] {
    try {
      if (!m_session) m_session = std::make_unique<Session>(Session::create(m_experiment, kPhysicsSeed));
      auto& g = m_session->model->generator;
      copy_from_host(*m_session->backend, w, g.weights());
      copy_from_host(*m_session->backend, st, g.state());
      // Non-finite weights give non-finite statistics: score() finds either and says diverged.
      if (recalibrate_bn > 0) m_monitor.recalibrate(*m_session, recalibrate_bn);
      m_result = m_monitor.score(*m_session, step, samples);
      m_result->recalibrated = recalibrate_bn;
      m_monitor.keep_if_best(*m_result, *m_session);
    } catch (...) {
      m_error = std::current_exception();
    }
    m_done = true;
  });
  return true;
}

std::optional<PhysicsScore> AsyncPhysicsMonitor::join() {
  m_thread.join();
  if (m_error) std::rethrow_exception(std::exchange(m_error, nullptr));
  return std::exchange(m_result, std::nullopt);
}

std::optional<PhysicsScore> AsyncPhysicsMonitor::poll() {
  if (!m_thread.joinable() || !m_done) return std::nullopt;
  return join();
}

std::optional<PhysicsScore> AsyncPhysicsMonitor::wait() {
  if (!m_thread.joinable()) return std::nullopt;
  return join();
}

}  // namespace mpigan::train
