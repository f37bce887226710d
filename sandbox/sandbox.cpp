// The research sandbox's set-up, event loop, workers' phases and summary (sandbox.hpp,
// sandbox_loop.hpp); the masters' side is in sandbox_masters.cpp.
#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/core/stop_signal.hpp"
#include "mpigan/master/checkpoints.hpp"
#include "mpigan/sandbox/sandbox_loop.hpp"
#include "mpigan/train/run_dir.hpp"
#include "mpigan/train/sources.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>

namespace mpigan::sandbox {

namespace detail {

using models::Net;

namespace {

/// Mean and maximum of a staleness histogram.
std::pair<double, std::int64_t> moments(const std::vector<std::int64_t>& histogram) {
  std::int64_t n = 0, sum = 0, max = 0;
  for (std::size_t s = 0; s < histogram.size(); ++s) {
    n += histogram[s];
    sum += static_cast<std::int64_t>(s) * histogram[s];
    if (histogram[s] > 0) max = static_cast<std::int64_t>(s);
  }
  return {n > 0 ? static_cast<double>(sum) / static_cast<double>(n) : 0.0, max};
}

}  // namespace

Sandbox::Sandbox(const dist::DistExperiment& d, const SandboxOptions& o)
    : m_job(d),
      m_experiment(d.experiment),
      m_options(o),
      m_dir(o.out_dir.empty() ? d.experiment.output_dir : o.out_dir),
      m_session(train::Session::create(d.experiment, d.experiment.seed)),
      m_layout(dist::PayloadLayout::of(*m_session.model)),
      m_bytes(m_layout.total() * sizeof(float)) {
  const auto& topo = d.dist.topology;
  const int subs = topo.masters - 1;
  MPIGAN_CHECK(o.workers >= 1, "sandbox: --workers must be at least 1, got {}", o.workers);
  MPIGAN_CHECK(topo.group_size == 1,
               "sandbox: topology.group_size is {}; the sandbox runs single-rank workers (set "
               "topology.group_size=1)",
               topo.group_size);
  MPIGAN_CHECK(o.workers >= subs,
               "sandbox: {} virtual workers for topology.masters {} ({} sub-masters): each sub-master needs at "
               "least one worker",
               o.workers, topo.masters, subs);
  init_logging(m_experiment.log_level);
  const train::RunDirectory run(m_dir, false);  // created; config.yaml is written by run()
  // As dist/topology.cpp places ranks: worker k is rank masters + k; with sub-masters, group k
  // goes to sub-master 1 + k mod subs, as its (k / subs)-th child.
  m_workers.resize(static_cast<std::size_t>(o.workers));
  for (int k = 0; k < o.workers; ++k) {
    VirtualWorker& w = m_workers[static_cast<std::size_t>(k)];
    w.id = k;
    w.master = subs == 0 ? 0 : 1 + k % subs;
    w.child = subs == 0 ? k : k / subs;
  }
  add_master(0, subs == 0 ? o.workers : subs);
  for (int s = 1; s <= subs; ++s) add_master(s, (o.workers - s + subs) / subs);
  const train::DataPlan plan = train::DataPlan::open(m_experiment, true);
  const bool local = d.dist.algorithm->worker_mode() == algos::WorkerMode::local;
  for (VirtualWorker& w : m_workers) {
    const int siblings = static_cast<int>(master_of(w).workers.size());
    w.update = std::make_unique<worker::UpdateBuilder>(*d.dist.algorithm, m_session, m_experiment, m_layout, siblings);
    w.step = std::make_unique<models::GanStep>(*m_session.model, *m_session.backend, m_experiment.step,
                                               dist::worker_step_seed(m_experiment, topo.masters + w.id));
    if (local) {
      w.opt[0] =
          nn::make_optimizer(m_experiment.opt_generator, *m_session.backend, m_session.model->generator.weights());
      w.opt[1] = nn::make_optimizer(m_experiment.opt_discriminator, *m_session.backend,
                                    m_session.model->discriminator.weights());
    }
    w.data = plan.train(m_experiment.batch, w.id, o.workers);
  }
}

void Sandbox::add_master(int rank, int children) {
  auto m = std::make_unique<VirtualMaster>();
  m->rank = rank;
  const std::size_t index = m_masters.size();
  const bool tree_top = rank == 0 && m_job.dist.topology.masters > 1;
  if (!tree_top)
    for (const VirtualWorker& w : m_workers)
      if (w.master == rank) m->workers.push_back(w.id);
  MPIGAN_CHECK(tree_top || static_cast<int>(m->workers.size()) == children, "sandbox: master {} has {} workers, not {}",
               rank, m->workers.size(), children);
  m->service = std::make_unique<master::UpdateService>(
      *m_job.dist.algorithm, master::UpdateService::Networks::of(*m_session.model, *m_session.backend, m_experiment),
      master::UpdateService::Options{children, tree_top, rank == 0, m_job.dist.max_nonfinite,
                                     m_job.dist.topology.submaster_scale,
                                     // The top follows the schedule; a sub-master takes the top's
                                     // factor with each reply (answer_submaster).
                                     rank == 0 ? master::UpdateService::Options::schedule_of(m_experiment) : nullptr},
      [this, index](int child) -> std::span<float> {
        const VirtualMaster& at = *m_masters[index];
        if (at.workers.empty()) return m_masters[static_cast<std::size_t>(child) + 1]->down;  // the top of a tree
        return m_workers[static_cast<std::size_t>(at.workers[static_cast<std::size_t>(child)])].update->reply_buffer();
      });
  m->progress = std::make_unique<master::Progress>(
      master::ProgressContext{m_experiment, m_dir, m_session, m_trace, [this] { return m_now; }}, children);
  if (rank > 0) {
    m->change = std::make_unique<master::ParentChange>(*m->service);
    m->up.resize(m_layout.total());
    m->down.resize(m_layout.total());
  }
  m_masters.push_back(std::move(m));
}

SandboxResult Sandbox::run() {
  m_wall0 = std::chrono::steady_clock::now();
  spdlog::info(
      "sandbox: {} master(s), {} virtual workers; rule: {}; compute {}; {:.3g} GB/s, {:.3g} us latency; "
      "master {:.3g} ms per update; payload {:.1f} MB",
      m_masters.size(), m_options.workers, m_job.dist.algorithm->describe(), m_options.compute.spec(),
      m_options.network.bandwidth_bytes_per_s / 1e9, m_options.network.latency_s * 1e6, m_options.master_s * 1e3,
      static_cast<double>(m_bytes) / 1e6);
  if (m_options.resume) {
    const std::int64_t from = m_resumed_from = load_state();
    const auto& t = *top().service;
    if (const char* spent = m_experiment.budget_spent(from, t.samples()))
      MPIGAN_THROW(ConfigError,
                   "sandbox --resume {}: the run stopped at version {} ({} samples) and its budget is spent ({}): "
                   "raise training.max_samples or training.max_updates (--set) to continue it",
                   m_dir, from, t.samples(), spent);
    release_deferred();  // what the stopping event left to the end of its turn
    write_config();      // only now: a refused resume leaves the run directory as it was
  } else {
    train::RunDirectory(m_dir, false).refuse_existing_run();
    write_config();
    top().progress->open_logs(-1);
    send_initial();
  }
  defer_stop_signals();  // the loop stops after the event in hand on a signal from here
  while (true) {
    if (!m_pause.empty()) {
      if (!m_stopping) save_state();
      begin_stop(std::exchange(m_pause, {}));
    }
    if (std::exchange(m_save_due, false) && !m_stopping) {
      write_checkpoint(top().service->version());
      save_state();
    }
    if (m_stopping || m_events.empty()) break;
    const Event ev = m_events.top();
    m_events.pop();
    VirtualWorker& w = m_workers[static_cast<std::size_t>(ev.worker)];
    VirtualMaster& m = master_of(w);
    if (m.blocked) {
      m.waiting.push_back(ev);  // its sub-master waits for the top master
      continue;
    }
    set_now(std::max(ev.t, m.free));
    switch (ev.kind) {
      case Event::Kind::update:
        serve_update(w, ev.t, true);
        break;
      case Event::Kind::pull:
        if (too_far_ahead(w)) {
          w.deferred = w.deferred_pull = true;
          w.deferred_at = ev.t;
          break;
        }
        serve_pull(w, ev.t);
        break;
      case Event::Kind::done:
        worker_done(w);
        break;
    }
    release_deferred();
  }
  if (!m_stopping) begin_stop("no events left");
  top().progress->finish_physics(*top().service, m_result.master);
  fill_result();
  m_result.master.wall_s =
      m_wall_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - m_wall0).count();
  write_summary();
  return m_result;
}

/// The initial weights, sent one after the other: the top's to its children; in a tree each
/// sub-master then sends them on to its workers.
void Sandbox::send_initial() {
  VirtualMaster& t = top();
  for (std::size_t s = 1; s < m_masters.size(); ++s) {
    VirtualMaster& sub = *m_masters[s];
    t.service->pull(sub.rank - 1, sub.down);
    t.free += m_options.network.transfer(m_bytes);
    sub.change->adopt(*sub.service, sub.down, t.service->version());
    sub.service->set_lr_factor(t.service->lr_factor());
    sub.free = t.free;
  }
  for (VirtualWorker& w : m_workers) {
    VirtualMaster& m = master_of(w);
    m.service->pull(w.child, w.update->reply_buffer());
    note_base(w);
    w.update->set_local_from_reply();
    m.free += m_options.network.transfer(m_bytes);
    start_phase(w, m.free);
  }
}

/// The worker got its weights (in its reply buffer) at @p t: it computes its next update now,
/// for real, and the update arrives when its simulated compute and transfer are over.
void Sandbox::start_phase(VirtualWorker& w, double t) {
  if (w.exhausted) {
    push(t + m_options.network.latency_s, w.id, Event::Kind::done);
    return;
  }
  w.update->load();
  w.update->begin_phase();
  const bool gradients = w.update->mode() == algos::WorkerMode::gradients;
  auto& m = *m_session.model;
  const auto on_gradients = [&](Net n) {
    if (gradients) return w.update->accumulate(n);
    nn::Network& net = n == Net::generator ? m.generator : m.discriminator;
    w.opt[dist::index(n)]->step(net.weights(), net.grads());
  };
  std::int64_t samples = 0;
  std::int64_t steps = 0;
  models::StepLosses losses;
  data::Batch batch;
  for (std::int64_t k = 0; k < m_job.dist.sync_every; ++k) {
    if (!train::next_batch(*w.data, batch, m_experiment.epochs)) {
      w.exhausted = true;
      break;
    }
    losses = w.step->run(train::real_batch(batch), static_cast<std::uint64_t>(w.steps), on_gradients);
    ++w.steps;
    ++steps;
    samples += batch.size();
  }
  if (samples == 0) {
    push(t + m_options.network.latency_s, w.id, Event::Kind::done);
    return;
  }
  w.update->build();
  const double compute = m_options.compute.draw(m_options.seed, w.id, w.exchanges, steps);
  ++w.exchanges;
  dist::Header& h = w.header;
  h = dist::Header{};
  h.kind = dist::Kind::update;
  h.child = w.child;
  h.version = w.version;
  h.samples = samples;
  h.steps = w.steps;
  h.epoch = w.data->position().epoch;
  h.cursor = w.data->position().cursor;
  h.compute_s = compute;
  worker::put_losses(h, losses);
  const bool pull_push = m_job.dist.algorithm->exchange() == algos::Exchange::pull_push;
  w.sent_at = t + compute;
  if (pull_push)
    push(w.sent_at + m_options.network.latency_s, w.id, Event::Kind::pull);
  else
    push(w.sent_at + m_options.network.transfer(m_bytes), w.id, Event::Kind::update);
}

void Sandbox::follow_schedule(VirtualWorker& w) {
  w.update->follow_schedule(w.lr_factor, {w.opt[0].get(), w.opt[1].get()});
}

/// The worker's reply reaches it at @p t: merge, then its next phase.
void Sandbox::deliver(VirtualWorker& w, double t) {
  w.header.wait_s = t - w.sent_at;
  w.update->merge(w.update->reply_buffer());
  w.version = master_of(w).service->version();
  follow_schedule(w);
  start_phase(w, t);
}

master::Incoming Sandbox::incoming(VirtualWorker& w) {
  const std::span<const float> p = w.update->payload();
  w.header.sumsq = dist::block_sums_of_squares(p, m_layout);
  return {w.child, w.header.version, w.header.samples, w.header.sumsq, p, true, w.update->state_decay()};
}

master::LogRow Sandbox::row_for(const VirtualWorker& w, double arrived) const {
  const auto& service = *m_masters[static_cast<std::size_t>(w.master)]->service;
  return {w.header,
          w.child,
          m_job.dist.topology.masters + w.id,
          service.version(),
          std::sqrt(w.header.sumsq[0]),
          std::sqrt(w.header.sumsq[1]),
          m_now - arrived};
}

void Sandbox::fill_result() {
  const master::UpdateService& s = *top().service;
  m_result.master.version = s.version();
  m_result.master.samples = s.samples();
  m_result.master.applied = s.applied();
  m_result.master.rejected = s.rejected();
  m_result.master.steady_samples_per_s = top().progress->steady_samples_per_s();
  m_result.simulated_s = m_latest;
  m_result.samples_per_s = m_latest > 0 ? static_cast<double>(s.samples()) / m_latest : 0;
  for (const auto& w : m_workers) m_result.updates.push_back(w.served);
  m_result.masters = static_cast<int>(m_masters.size());
  auto& hist = m_result.staleness_histogram;
  for (std::size_t k = tree() ? 1 : 0; k < m_masters.size(); ++k) {
    const auto& h = m_masters[k]->progress->staleness_histogram();
    if (hist.size() < h.size()) hist.resize(h.size(), 0);
    for (std::size_t i = 0; i < h.size(); ++i) hist[i] += h[i];
  }
  std::tie(m_result.mean_staleness, m_result.max_staleness) = moments(hist);
  if (tree()) {
    m_result.top_staleness_histogram = top().progress->staleness_histogram();
    m_result.top_mean_staleness = moments(m_result.top_staleness_histogram).first;
    m_result.canonical_staleness_histogram = m_canonical;
    m_result.canonical_mean_staleness = moments(m_canonical).first;
  }
  m_result.run_dir = m_dir;
}

void Sandbox::write_config() const {
  YAML::Node resolved = YAML::Clone(m_experiment.resolved);
  resolved["output"]["dir"] = m_dir;
  // A resume may not change what the run trains (the seed, model, data, batch): checked against
  // the configuration of the run it continues, as `mpigan train --resume` checks it.
  if (m_options.resume)
    train::RunDirectory(m_options.resume_from.empty() ? m_dir : m_options.resume_from, false)
        .check_resumed_config(resolved);
  train::RunDirectory(m_dir, false).write_config(resolved);
}

void Sandbox::write_checkpoint(std::int64_t v) {
  train::RunDirectory run(m_dir, false);
  const std::string path = run.checkpoint_path(v);
  train::CheckpointWriter out(path);
  master::save_canonical(out, *top().service, m_job);
  out.put_int("sandbox/workers", m_options.workers);
  out.put_int("sandbox/masters", static_cast<std::int64_t>(m_masters.size()));
  if (!out.first_non_finite().empty()) {
    spdlog::error("sandbox: no checkpoint written: {} not finite", out.first_non_finite());
    return;
  }
  out.commit();
  run.commit_checkpoint(path, m_experiment.checkpoint_keep);
  m_result.master.last_checkpoint = path;
}

void Sandbox::write_summary() const {
  nlohmann::json j;
  j["workers"] = m_options.workers;
  j["masters"] = m_masters.size();
  j["submaster_every"] = m_job.dist.topology.submaster_every;
  j["rule"] = m_job.dist.algorithm->describe();
  j["compute"] = m_options.compute.spec();
  j["compute_mean_s"] = m_options.compute.mean();
  j["bandwidth_bytes_per_s"] = m_options.network.bandwidth_bytes_per_s;
  j["latency_s"] = m_options.network.latency_s;
  j["master_s"] = m_options.master_s;
  j["seed"] = m_options.seed;
  j["max_lead"] = m_job.dist.topology.max_lead;
  j["deferred_replies"] = m_deferred;
  j["payload_bytes"] = m_bytes;
  j["version"] = m_result.master.version;
  j["samples"] = m_result.master.samples;
  j["rejected"] = m_result.master.rejected;
  j["simulated_s"] = m_result.simulated_s;
  j["samples_per_s"] = m_result.samples_per_s;
  j["updates_per_worker"] = m_result.updates;
  j["mean_staleness"] = m_result.mean_staleness;
  j["max_staleness"] = m_result.max_staleness;
  j["staleness_histogram"] = m_result.staleness_histogram;
  if (tree()) {
    j["top_mean_staleness"] = m_result.top_mean_staleness;
    j["top_staleness_histogram"] = m_result.top_staleness_histogram;
    j["canonical_mean_staleness"] = m_result.canonical_mean_staleness;
    j["canonical_staleness_histogram"] = m_result.canonical_staleness_histogram;
  }
  j["failure"] = m_result.master.failure;
  j["wall_s"] = m_result.master.wall_s;  // the parts' sum when the run was continued
  if (m_resumed_from >= 0) j["resumed_from_version"] = m_resumed_from;
  if (m_result.master.physics.last) {
    j["physics"]["fom"] = m_result.master.physics.last->fom;
    j["physics"]["step"] = m_result.master.physics.last->step;
    j["physics"]["events"] = m_result.master.physics.last->events;
    j["physics"]["empty_showers"] = m_result.master.physics.last->empty;
    j["physics"]["dead"] = m_result.master.physics.last->dead();
  }
  std::ofstream(train::RunDirectory(m_dir, false).file("sandbox.json")) << j.dump(2) << '\n';
}

}  // namespace detail

SandboxResult run_sandbox(const dist::DistExperiment& d, const SandboxOptions& options) {
  detail::Sandbox s(d, options);
  return s.run();
}

}  // namespace mpigan::sandbox
