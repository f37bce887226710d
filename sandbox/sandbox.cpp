// The research sandbox's event loop (sandbox.hpp).
#include "mpigan/sandbox/sandbox.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/core/stop_signal.hpp"
#include "mpigan/dist/payload_channel.hpp"
#include "mpigan/master/checkpoints.hpp"
#include "mpigan/master/progress.hpp"
#include "mpigan/master/update_service.hpp"
#include "mpigan/train/run_dir.hpp"
#include "mpigan/train/sources.hpp"
#include "mpigan/worker/update_builder.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <queue>
#include <utility>

namespace mpigan::sandbox {

using master::Decision;
using master::LogRow;
using master::Outcome;
using models::Net;

namespace {

/// What a worker rank keeps, less the transport.
struct VirtualWorker {
  int id = 0;
  std::unique_ptr<worker::UpdateBuilder> update;
  std::unique_ptr<models::GanStep> step;              ///< its own step seed
  std::array<std::unique_ptr<nn::Optimizer>, 2> opt;  ///< local rules: its own optimizers
  std::unique_ptr<data::BatchSource> data;
  std::int64_t version = 0, steps = 0, exchanges = 0, served = 0;
  bool exhausted = false, done = false;
  /// topology.max_lead: its reply (or, pull-then-push, its pull) waits for the others to catch up.
  bool deferred = false, deferred_pull = false;
  double deferred_at = 0;  ///< when the deferred pull arrived
  dist::Header header;     ///< the update in flight, as its header would say
  double sent_at = 0;      ///< simulated time its update (or pull) left
};

struct Event {
  enum class Kind { update, pull, done };
  double t = 0;
  std::uint64_t seq = 0;  ///< creation order: ties in time break deterministically
  int worker = 0;
  Kind kind = Kind::update;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

class Sandbox {
 public:
  Sandbox(const dist::DistExperiment& d, const SandboxOptions& o)
      : m_d(d),
        m_e(d.experiment),
        m_o(o),
        m_dir(o.out_dir.empty() ? d.experiment.output_dir : o.out_dir),
        m_session(train::Session::create(d.experiment, d.experiment.seed)),
        m_layout(dist::PayloadLayout::of(*m_session.model)),
        m_bytes(m_layout.total() * sizeof(float)),
        m_service(*d.dist.algorithm, master::UpdateService::Networks::of(*m_session.model, *m_session.backend, m_e),
                  {o.workers, false, true, d.dist.max_nonfinite},
                  [this](int child) { return m_workers[static_cast<std::size_t>(child)].update->reply_buffer(); }),
        m_progress(master::ProgressContext{m_e, m_dir, m_session, m_trace, [this] { return m_now; }}, o.workers) {
    MPIGAN_CHECK(o.workers >= 1, "sandbox: --workers must be at least 1, got {}", o.workers);
    init_logging(m_e.log_level);
    train::RunDirectory run(m_dir, false);
    YAML::Node resolved = YAML::Clone(m_e.resolved);
    resolved["output"]["dir"] = m_dir;
    run.write_config(resolved);
    const train::DataPlan plan = train::DataPlan::open(m_e, true);
    const bool local = d.dist.algorithm->worker_mode() == algos::WorkerMode::local;
    m_workers.resize(static_cast<std::size_t>(o.workers));
    for (int k = 0; k < o.workers; ++k) {
      VirtualWorker& w = m_workers[static_cast<std::size_t>(k)];
      w.id = k;
      w.update = std::make_unique<worker::UpdateBuilder>(*d.dist.algorithm, m_session, m_e, m_layout, m_o.workers);
      w.step = std::make_unique<models::GanStep>(*m_session.model, *m_session.backend, m_e.step,
                                                 dist::worker_step_seed(m_e, k + 1));
      if (local) {
        w.opt[0] = nn::make_optimizer(m_e.opt_generator, *m_session.backend, m_session.model->generator.weights());
        w.opt[1] =
            nn::make_optimizer(m_e.opt_discriminator, *m_session.backend, m_session.model->discriminator.weights());
      }
      w.data = plan.train(m_e.batch, k, o.workers);
    }
  }

  SandboxResult run() {
    const auto wall0 = std::chrono::steady_clock::now();
    m_progress.open_logs(-1);
    spdlog::info(
        "sandbox: 1 master, {} virtual workers; rule: {}; compute {}; {:.3g} GB/s, {:.3g} us latency; "
        "master {:.3g} ms per update; payload {:.1f} MB",
        m_o.workers, m_d.dist.algorithm->describe(), m_o.compute.spec(), m_o.network.bandwidth_bytes_per_s / 1e9,
        m_o.network.latency_s * 1e6, m_o.master_s * 1e3, static_cast<double>(m_bytes) / 1e6);
    // The initial weights, sent one after the other.
    for (auto& w : m_workers) {
      m_service.pull(w.id, w.update->reply_buffer());
      w.update->set_local_from_reply();
      m_master_free += m_o.network.transfer(m_bytes);
      start_phase(w, m_master_free);
    }
    while (!m_stopping && !m_events.empty()) {
      const Event ev = m_events.top();
      m_events.pop();
      VirtualWorker& w = m_workers[static_cast<std::size_t>(ev.worker)];
      m_now = std::max(ev.t, m_master_free);
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
    m_progress.finish_physics(m_service, m_result.master);
    m_result.master.version = m_service.version();
    m_result.master.samples = m_service.samples();
    m_result.master.applied = m_service.applied();
    m_result.master.rejected = m_service.rejected();
    m_result.master.steady_samples_per_s = m_progress.steady_samples_per_s();
    m_result.master.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    m_result.simulated_s = m_now;
    m_result.samples_per_s = m_now > 0 ? static_cast<double>(m_service.samples()) / m_now : 0;
    for (const auto& w : m_workers) m_result.updates.push_back(w.served);
    m_result.staleness_histogram = m_progress.staleness_histogram();
    std::int64_t n = 0, sum = 0;
    for (std::size_t s = 0; s < m_result.staleness_histogram.size(); ++s) {
      n += m_result.staleness_histogram[s];
      sum += static_cast<std::int64_t>(s) * m_result.staleness_histogram[s];
      if (m_result.staleness_histogram[s] > 0) m_result.max_staleness = static_cast<std::int64_t>(s);
    }
    m_result.mean_staleness = n > 0 ? static_cast<double>(sum) / static_cast<double>(n) : 0;
    m_result.run_dir = m_dir;
    write_summary();
    return m_result;
  }

 private:
  void push(double t, int worker, Event::Kind kind) { m_events.push({t, m_seq++, worker, kind}); }

  /// The worker got its weights (in its reply buffer) at @p t: it computes its next update now,
  /// for real, and the update arrives when its simulated compute and transfer are over.
  void start_phase(VirtualWorker& w, double t) {
    if (w.exhausted) {
      push(t + m_o.network.latency_s, w.id, Event::Kind::done);
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
    for (std::int64_t k = 0; k < m_d.dist.sync_every; ++k) {
      if (!train::next_batch(*w.data, batch, m_e.epochs)) {
        w.exhausted = true;
        break;
      }
      losses = w.step->run(train::real_batch(batch), static_cast<std::uint64_t>(w.steps), on_gradients);
      ++w.steps;
      ++steps;
      samples += batch.size();
    }
    if (samples == 0) {
      push(t + m_o.network.latency_s, w.id, Event::Kind::done);
      return;
    }
    w.update->build();
    const double compute = m_o.compute.draw(m_o.seed, w.id, w.exchanges, steps);
    ++w.exchanges;
    dist::Header& h = w.header;
    h = dist::Header{};
    h.kind = dist::Kind::update;
    h.child = w.id;
    h.version = w.version;
    h.samples = samples;
    h.steps = w.steps;
    h.epoch = w.data->position().epoch;
    h.cursor = w.data->position().cursor;
    h.compute_s = compute;
    worker::put_losses(h, losses);
    const bool pull_push = m_d.dist.algorithm->exchange() == algos::Exchange::pull_push;
    w.sent_at = t + compute;
    if (pull_push)
      push(w.sent_at + m_o.network.latency_s, w.id, Event::Kind::pull);
    else
      push(w.sent_at + m_o.network.transfer(m_bytes), w.id, Event::Kind::update);
  }

  /// The worker's reply reaches it at @p t: merge, then its next phase.
  void deliver(VirtualWorker& w, double t) {
    w.header.wait_s = t - w.sent_at;
    w.update->merge(w.update->reply_buffer());
    w.version = m_service.version();
    start_phase(w, t);
  }

  master::Incoming incoming(VirtualWorker& w) {
    const std::span<const float> p = w.update->payload();
    w.header.sumsq = dist::block_sums_of_squares(p, m_layout);
    return {w.id, w.header.version, w.header.samples, w.header.sumsq, p, true, w.update->state_decay()};
  }

  LogRow row_for(const VirtualWorker& w, double arrived) const {
    return {
        w.header,       w.id, w.id + 1, m_service.version(), std::sqrt(w.header.sumsq[0]), std::sqrt(w.header.sumsq[1]),
        m_now - arrived};
  }

  /// An update arrives (push then pull): the service decides; the reply follows its service time.
  void serve_update(VirtualWorker& w, double arrived, bool reply) {
    if (reply) w.update->before_send({});
    const master::Incoming in = incoming(w);
    LogRow row = row_for(w, arrived);
    ++w.served;
    const std::span<float> r = reply ? w.update->reply_buffer() : std::span<float>();
    const Decision d = m_service.submit(in, r);
    m_master_free = m_now + m_o.master_s;
    m_progress.log_decision(row, d, m_service.version());
    switch (d.outcome) {
      case Outcome::rejected_nonfinite:
      case Outcome::diverged:
      case Outcome::rejected_by_rule:
        if (d.outcome == Outcome::diverged) return diverged(w);
        if (reply) {
          m_service.pull(w.id, r);
          reply_to(w);
        }
        return;
      case Outcome::held:
        if (!d.round.empty()) round_closed(d);
        return;
      case Outcome::applied:
        break;
    }
    after_version();
    if (!reply || m_stopping) return;
    if (too_far_ahead(w)) {
      w.deferred = true;  // answered on release with the weights of then, as the real master does
      return;
    }
    m_service.fill_state(w.id, r);
    reply_to(w);
  }

  /// topology.max_lead, decided as the real master does (UpdateService::lead).
  bool too_far_ahead(const VirtualWorker& w) const {
    const std::int64_t bound = m_d.dist.topology.max_lead;
    return bound > 0 && m_service.lead(w.id) > bound;
  }

  void release_deferred() {
    for (bool again = true; again && !m_stopping;) {
      again = false;
      for (auto& w : m_workers) {
        if (!w.deferred || too_far_ahead(w)) continue;
        w.deferred = false;
        ++m_deferred;
        again = true;
        m_master_free = std::max(m_master_free, m_now);
        if (std::exchange(w.deferred_pull, false)) {
          serve_pull(w, w.deferred_at);
        } else {
          m_service.pull(w.id, w.update->reply_buffer());
          reply_to(w);
        }
        if (m_stopping) return;
      }
    }
  }

  /// Send the reply in the worker's buffer: the master's link is busy for its transfer.
  void reply_to(VirtualWorker& w) {
    m_master_free += m_o.network.transfer(m_bytes);
    deliver(w, m_master_free);
  }

  /// Pull then push (GEM): the master sends its current weights, then waits for this worker's
  /// update, which the worker transforms against them, and applies it; no reply follows.
  void serve_pull(VirtualWorker& w, double arrived) {
    m_service.pull(w.id, w.update->reply_buffer());
    const double pulled_at = m_now + m_o.network.transfer(m_bytes);
    const std::int64_t pulled_version = m_service.version();
    w.update->before_send(w.update->reply_buffer());
    const double pushed_at = pulled_at + m_o.network.transfer(m_bytes);
    m_now = pushed_at;  // the master waits for this worker's update, as the real one does
    w.header.wait_s = pulled_at - w.sent_at;
    serve_update(w, arrived, false);
    if (m_stopping) return;
    w.update->merge(w.update->reply_buffer());
    w.version = pulled_version;
    start_phase(w, pushed_at);
  }

  void worker_done(VirtualWorker& w) {
    spdlog::debug("virtual worker {} finished its data at step {}", w.id, w.steps);
    m_done.push_back(w.id);
    w.done = true;
    const Decision d = m_service.child_done(w.id);
    if (!d.round.empty()) round_closed(d);
    if (!m_stopping && static_cast<int>(m_done.size()) == m_o.workers) {
      spdlog::info("every virtual worker has finished its data (version {})", m_service.version());
      begin_stop("data exhausted");
    }
  }

  void round_closed(const Decision& d) {
    m_progress.log_round(m_service.version());
    after_version();
    if (m_stopping) return;
    for (int k : d.round) {
      VirtualWorker& w = m_workers[static_cast<std::size_t>(k)];
      m_service.round_reply(k, w.update->reply_buffer(), d.first_reply_written && k == d.round.front());
      reply_to(w);
    }
  }

  void diverged(const VirtualWorker& w) {
    const auto v = m_service.version();
    m_result.master.failure = fmt::format(
        "training diverged: {} non-finite updates in a row (the last from virtual worker {}) at version {}; the "
        "weights of version {} are finite. Lower the learning rate (optimizer.lr, or algorithm.lr for gem)",
        m_service.nonfinite_run(), w.id, v, v);
    spdlog::error("{}", m_result.master.failure);
    begin_stop("diverged");
  }

  void after_version() {
    const auto v = m_service.version();
    m_progress.after_version(v, m_service.samples());
    if (stop_signal() != 0) {
      m_result.master.stopped_by_signal = stop_signal();
      return begin_stop(signal_name(stop_signal()) + " received");
    }
    if (const char* spent = m_e.budget_spent(v, m_service.samples())) return begin_stop(spent);
    bool early = false;
    if (m_e.physics.enabled && m_e.physics.every > 0 && v % m_e.physics.every == 0)
      early = m_progress.physics_now(m_service, m_result.master);
    if (m_e.validate_every > 0 && v % m_e.validate_every == 0)
      early = m_progress.validate(m_service, m_result.master) || early;
    if (early) {
      m_result.master.stopped_early = true;
      begin_stop("early stopping");
    }
  }

  void begin_stop(const std::string& why) {
    if (m_stopping) return;
    m_stopping = true;
    const auto v = m_service.version();
    spdlog::info("sandbox: stopping at version {} (simulated {:.1f} s): {}", v, m_now, why);
    if (m_progress.validated_at() != v && stop_signal() == 0) m_progress.validate(m_service, m_result.master);
    if (m_o.final_checkpoint) write_checkpoint(v);
  }

  void write_checkpoint(std::int64_t v) {
    train::RunDirectory run(m_dir, false);
    const std::string path = run.checkpoint_path(v);
    train::CheckpointWriter out(path);
    master::save_canonical(out, m_service, m_d);
    out.put_int("sandbox/workers", m_o.workers);
    if (!out.first_non_finite().empty()) {
      spdlog::error("sandbox: no checkpoint written: {} not finite", out.first_non_finite());
      return;
    }
    out.commit();
    run.commit_checkpoint(path, m_e.checkpoint_keep);
    m_result.master.last_checkpoint = path;
  }

  void write_summary() const {
    nlohmann::json j;
    j["workers"] = m_o.workers;
    j["rule"] = m_d.dist.algorithm->describe();
    j["compute"] = m_o.compute.spec();
    j["compute_mean_s"] = m_o.compute.mean();
    j["bandwidth_bytes_per_s"] = m_o.network.bandwidth_bytes_per_s;
    j["latency_s"] = m_o.network.latency_s;
    j["master_s"] = m_o.master_s;
    j["seed"] = m_o.seed;
    j["max_lead"] = m_d.dist.topology.max_lead;
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
    j["failure"] = m_result.master.failure;
    j["wall_s"] = m_result.master.wall_s;
    if (m_result.master.physics.last) {
      j["physics"]["fom"] = m_result.master.physics.last->fom;
      j["physics"]["step"] = m_result.master.physics.last->step;
      j["physics"]["events"] = m_result.master.physics.last->events;
      j["physics"]["empty_showers"] = m_result.master.physics.last->empty;
      j["physics"]["dead"] = m_result.master.physics.last->dead();
    }
    std::ofstream(train::RunDirectory(m_dir, false).file("sandbox.json")) << j.dump(2) << '\n';
  }

  const dist::DistExperiment& m_d;
  const train::ExperimentConfig& m_e;
  SandboxOptions m_o;
  std::string m_dir;
  train::Session m_session;  ///< shared by the virtual workers (one computes at a time) and validation
  dist::PayloadLayout m_layout;
  std::size_t m_bytes = 0;
  std::vector<VirtualWorker> m_workers;
  master::UpdateService m_service;
  dist::Trace m_trace;  ///< disabled
  double m_now = 0, m_master_free = 0;
  master::Progress m_progress;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> m_events;
  std::uint64_t m_seq = 0;
  std::vector<int> m_done;
  std::int64_t m_deferred = 0;  ///< replies released after waiting for topology.max_lead
  bool m_stopping = false;
  SandboxResult m_result;
};

}  // namespace

SandboxResult run_sandbox(const dist::DistExperiment& d, const SandboxOptions& options) {
  Sandbox s(d, options);
  return s.run();
}

}  // namespace mpigan::sandbox
