#include "mpigan/master/master.hpp"

#include "mpigan/core/backend/cpu/vector_kernels.hpp"
#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/train/checkpoint.hpp"
#include "mpigan/train/run_dir.hpp"
#include "mpigan/train/session.hpp"
#include "mpigan/train/sources.hpp"
#include "mpigan/train/trainer.hpp"
#include "mpigan/worker/protocol.hpp"
#include "mpigan/worker/worker.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>

namespace mpigan::master {

using namespace worker;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

/// The top master of a tree: sub-masters send the change of their weights since they last pulled;
/// it is added (asynchronously), or averaged over all sub-masters in rounds for synchronous rules.
class TreeMaster final : public algos::MasterRule {
 public:
  TreeMaster(ParameterSet& w, Backend& b, bool sync) : MasterRule(w, b), m_sync(sync), m_sum(w.size()) {}
  algos::Verdict submit(const algos::UpdateMeta& meta, std::span<const float> delta, std::span<float> reply,
                        algos::RuleStats&) override {
    if (m_sync) {
      Held& h = m_held[meta.worker];
      if (meta.stable) {
        h.view = delta;  // in the sub-master's slot until its reply: no copy
      } else {
        h.copy.assign(delta.begin(), delta.end());
        h.view = h.copy;
      }
      return algos::Verdict::held;
    }
    cpu::add_scaled_range(m_weights.data(), delta.data(), 1.0f, reply.data(), delta.size());
    return algos::Verdict::applied;
  }
  bool round_ready(int expected) const override { return static_cast<int>(m_held.size()) >= expected; }
  bool close_round(int, std::span<float>) override {
    m_parts.clear();
    for (const auto& [k, h] : m_held) m_parts.push_back(h.view);  // in sub-master order
    algos::sum_scaled(m_parts, 1.0f / static_cast<float>(m_held.size()), m_sum);
    float* w = m_weights.data();
    for (std::size_t i = 0; i < m_sum.size(); ++i) w[i] += m_sum[i];
    m_held.clear();
    return false;
  }

 private:
  struct Held {
    std::vector<float> copy;
    std::span<const float> view;
  };
  bool m_sync;
  std::map<int, Held> m_held;
  std::vector<std::span<const float>> m_parts;
  std::vector<float> m_sum;
};

struct Child {
  int rank = -1;
  bool done = false, stopped = false;
  Header header;               ///< the request being served
  std::vector<float> state;    ///< latest BatchNorm state it reported
  bool has_state = false;
  Header last;                 ///< its latest update header (progress, losses)
  std::int64_t pulled = 0;     ///< version of the weights it has
  bool contributed = false;    ///< has had an update applied
  std::int64_t flagged = -1;   ///< the last checkpoint it was asked to write its part of
  double arrived = 0;          ///< wall time its current request was seen
  MPI_Request req = MPI_REQUEST_NULL;
};

class Master {
 public:
  Master(const DistExperiment& d, Topology& t, const std::string& run_dir, Trace& trace,
         const PayloadChannels& channels, std::function<void()> before_barrier)
      : m_d(d), m_e(d.experiment), m_t(t), m_run_dir(run_dir), m_trace(trace), m_ch(channels),
        m_before_barrier(std::move(before_barrier)),
        m_top(t.role == Role::top_master),
        m_host(make_backend("cpu")) {
    train::ExperimentConfig e = m_e;
    if (!m_top) e.backend = "cpu";  // a sub-master only adds vectors: no GPU needed
    m_session = std::make_unique<train::Session>(train::Session::create(e, m_e.seed, t.device_id));
    m_compute_threads = host_threads();
    auto& m = *m_session->model;
    m_theta_g = ParameterSet::like(m.generator.weights(), *m_host);
    m_theta_d = ParameterSet::like(m.discriminator.weights(), *m_host);
    m_layout = {m_theta_g.size(), m_theta_d.size(), m.generator.state().size(), m.discriminator.state().size()};
    copy_out(m.generator.weights(), {m_theta_g.data(), m_theta_g.size()});
    copy_out(m.discriminator.weights(), {m_theta_d.data(), m_theta_d.size()});
    m_state.resize(m_layout.g_state + m_layout.d_state);
    copy_out(m.generator.state(), std::span<float>(m_state).subspan(0, m_layout.g_state));
    copy_out(m.discriminator.state(), std::span<float>(m_state).subspan(m_layout.g_state));
    const auto& alg = *d.dist.algorithm;
    const int n = static_cast<int>(t.children.size());
    if (m_top && t.masters > 1) {
      m_rule_g = std::make_unique<TreeMaster>(m_theta_g, *m_host, alg.synchronous());
      m_rule_d = std::make_unique<TreeMaster>(m_theta_d, *m_host, alg.synchronous());
      m_synchronous = alg.synchronous();
    } else {
      m_rule_g = alg.make_master(m_theta_g, {*m_host, m_theta_g, m_e.opt_generator, n, "generator"});
      m_rule_d = alg.make_master(m_theta_d, {*m_host, m_theta_d, m_e.opt_discriminator, n, "discriminator"});
      m_synchronous = alg.synchronous();
    }
    m_children.resize(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) m_children[static_cast<std::size_t>(i)].rank = t.children[static_cast<std::size_t>(i)];
    m_update.resize(m_layout.total());
    m_reply.resize(m_layout.total());
  }

  MasterResult run(std::int64_t resume) {
    const auto t_start = Clock::now();
    const double cpu_start = process_cpu_seconds();
    if (resume >= 0) load(resume);
    if (m_top) open_logs(resume >= 0);
    if (!m_top) m_theta_pulled_g.assign(m_theta_g.data(), m_theta_g.data() + m_theta_g.size()),
                m_theta_pulled_d.assign(m_theta_d.data(), m_theta_d.data() + m_theta_d.size());
    if (!m_top) receive_parent_weights_initial();
    for (std::size_t i = 0; i < m_children.size(); ++i) send_weights(i, 0, -1);
    {
      ScopedHostThreads serving(m_d.dist.topology.master_threads);
      serve();
    }
    if (m_before_barrier) m_before_barrier();
    if (m_top) finish_checkpoints();
    else m_t.links.barrier();  // matches the top master's closing barrier
    m_result.wall_s = std::chrono::duration<double>(Clock::now() - t_start).count();
    m_result.cpu_s = process_cpu_seconds() - cpu_start;
    m_result.version = m_version;
    if (m_steady_t1 > m_steady_t0 && m_steady_t0 >= 0)
      m_result.steady_samples_per_s = static_cast<double>(m_steady_samples) / (m_steady_t1 - m_steady_t0);
    return m_result;
  }

 private:
  // ---------------------------------------------------------------- helpers
  void copy_out(const ParameterSet& p, std::span<float> out) {
    const Tensor h = m_session->backend->to_host(p.flat());
    std::copy(h.data(), h.data() + p.size(), out.begin());
  }

  /// Fill the reply's state part with the canonical BatchNorm state.
  void fill_state(std::span<float> reply) {
    std::copy(m_state.begin(), m_state.end(), reply.begin() + static_cast<std::ptrdiff_t>(m_layout.g + m_layout.d));
  }

  /// Canonical BN state = mean of the children's latest reports, in child order.
  void update_state() {
    std::vector<double> sum(m_state.size(), 0.0);
    int n = 0;
    for (const auto& c : m_children) {
      if (!c.has_state) continue;
      for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += c.state[i];
      ++n;
    }
    if (n == 0) return;
    for (std::size_t i = 0; i < sum.size(); ++i) m_state[i] = static_cast<float>(sum[i] / n);
  }

  /// Where the reply to child i is built: its shared-memory slot (the rule writes the weights
  /// straight into the child's view), or the buffer an MPI message is sent from.
  std::span<float> reply_span(std::size_t i) {
    return m_ch.child_shared(i) ? m_ch.child_down(i) : std::span<float>(m_reply);
  }

  void send_weights(std::size_t i, std::int32_t flags, std::int64_t ckpt) {
    Child& c = m_children[i];
    std::span<float> r = reply_span(i);
    m_rule_g->pull(static_cast<int>(i), m_layout.gen(r));
    m_rule_d->pull(static_cast<int>(i), m_layout.dis(r));
    fill_state(r);
    send_reply(i, r, flags, ckpt);
    c.pulled = m_version;
  }

  void send_reply(std::size_t i, std::span<const float> payload, std::int32_t flags, std::int64_t ckpt) {
    Header h;
    h.kind = Kind::weights;
    h.version = m_version;
    h.flags = flags;
    h.checkpoint = ckpt;
    auto span = m_trace.span("reply", "comm");
    if (m_ch.child_shared(i)) {
      MPIGAN_CHECK(payload.data() == m_ch.child_down(i).data(), "{}: the reply to child {} was not built in its slot",
                   m_t.label(), i);
      m_ch.sync();
      send_header(m_t.links, h, m_children[i].rank, kTagReply, m_ch.to_child(i));
      return;
    }
    send_header(m_t.links, h, m_children[i].rank, kTagReply, m_ch.to_child(i));
    m_t.links.send(payload, m_children[i].rank, kTagReplyPayload);
  }

  void send_stop(std::size_t i) {
    Header h;
    h.kind = Kind::stop;
    h.version = m_version;
    if (m_final_checkpoint >= 0) {
      h.flags = kFlagCheckpoint;
      h.checkpoint = m_final_checkpoint;
    }
    send_header(m_t.links, h, m_children[i].rank, kTagReply, m_ch.to_child(i));
    m_children[i].stopped = true;
  }

  /// Ask each child once per checkpoint to write its part (on the next reply it gets).
  std::int32_t flags_for(std::size_t i) {
    Child& c = m_children[i];
    if (m_pending_checkpoint < 0 || c.flagged == m_pending_checkpoint) return 0;
    c.flagged = m_pending_checkpoint;
    return kFlagCheckpoint;
  }

  // ---------------------------------------------------------------- serving
  void post(std::size_t i) {
    Child& c = m_children[i];
    c.req = m_t.links.irecv_bytes(&c.header, sizeof(Header), c.rank, kTagHeader);
  }

  /// Idle polling: the master sleeps between polls, backing off up to a cap of 1% of the mean
  /// time between requests (1-10 ms). Slow CPU workers (a request every second or so) then cost
  /// the master ~100 wake-ups per second instead of 1000 (it shares a node with them), while the
  /// latency a request may wait stays ~1% of the interval; fast GPU workers keep the 1 ms cap.
  double idle_sleep_cap() const {
    if (m_mean_interval <= 0) return 1e-3;
    return std::clamp(m_mean_interval / 100.0, 1e-3, 10e-3);
  }
  void note_arrivals(double now, std::size_t n) {
    if (n == 0) return;
    if (m_last_arrival > 0) {
      const double dt = (now - m_last_arrival) / static_cast<double>(n);
      m_mean_interval = m_mean_interval <= 0 ? dt : 0.8 * m_mean_interval + 0.2 * dt;
    }
    m_last_arrival = now;
  }

  void serve() {
    const std::size_t n = m_children.size();
    for (std::size_t i = 0; i < n; ++i) post(i);
    std::vector<MPI_Request> reqs(n);
    std::size_t next = 0;
    while (std::any_of(m_children.begin(), m_children.end(), [](const Child& c) { return !c.stopped; })) {
      for (std::size_t i = 0; i < n; ++i) reqs[i] = m_children[i].req;
      std::vector<int> ready;
      {
        auto span = m_trace.span("idle", "wait");
        const double w0 = MPI_Wtime();
        ready = wait_some_quietly(reqs, m_ch.from_children(idle_sleep_cap()));
        m_result.idle_s += MPI_Wtime() - w0;
      }
      const double now = MPI_Wtime();
      note_arrivals(now, ready.size());
      for (int k : ready) {
        m_children[static_cast<std::size_t>(k)].req = MPI_REQUEST_NULL;
        m_children[static_cast<std::size_t>(k)].arrived = now;
      }
      // Round-robin from the child after the one served last: no child starves another.
      std::sort(ready.begin(), ready.end(), [&](int a, int b) {
        return (static_cast<std::size_t>(a) + n - next) % n < (static_cast<std::size_t>(b) + n - next) % n;
      });
      for (int k : ready) {
        const auto i = static_cast<std::size_t>(k);
        handle(i);
        next = (i + 1) % n;
        if (!m_children[i].stopped) post(i);
      }
    }
    // Children stopped while a receive was posted for them (a synchronous round ending in a stop)
    // will not send again: cancel those receives, so none outlives this master.
    for (auto& c : m_children) {
      if (c.req == MPI_REQUEST_NULL) continue;
      MPIGAN_MPI_CHECK(MPI_Cancel(&c.req));
      MPIGAN_MPI_CHECK(MPI_Wait(&c.req, MPI_STATUS_IGNORE));
    }
  }

  void handle(std::size_t i) {
    Child& c = m_children[i];
    const Header h = c.header;
    switch (h.kind) {
      case Kind::done:
        // The child's data is exhausted: it waits for the stop, which comes when training ends
        // for everyone (so it can still write its part of the final checkpoint).
        c.done = true;
        c.last = h;
        spdlog::debug("{}: child {} (rank {}) finished its data at step {}", m_t.label(), i, c.rank, h.steps);
        if (m_stopping) {
          send_stop(i);
          return;
        }
        if (m_synchronous && ready_round()) close_round();
        maybe_all_done();
        return;
      case Kind::pull: {
        if (m_stopping) {
          send_stop(i);
          return;
        }
        send_weights(i, flags_for(i), m_pending_checkpoint);
        // The same child's update follows at once (pull-then-push): serve it before anyone else,
        // so the weights it computed against are exactly the ones the update is applied to.
        const double w0 = MPI_Wtime();  // waiting for the child's update counts as idle time
        c.header = recv_header(m_t.links, c.rank, kTagHeader, kReplySpinSeconds, m_ch.from_children(idle_sleep_cap()));
        m_result.idle_s += MPI_Wtime() - w0;
        MPIGAN_CHECK(c.header.kind == Kind::update, "{}: child {} (rank {}) pulled but then sent message kind {}",
                     m_t.label(), i, c.rank, static_cast<int>(c.header.kind));
        serve_update(i, false);
        return;
      }
      case Kind::update:
        serve_update(i, true);
        return;
      default:
        MPIGAN_FATAL("{}: unexpected message kind {} from rank {}", m_t.label(), static_cast<int>(h.kind), c.rank);
    }
  }

  void serve_update(std::size_t i, bool reply) {
    Child& c = m_children[i];
    const Header& h = c.header;
    std::span<float> u(m_update);
    {
      auto span = m_trace.span("receive", "comm");
      if (m_ch.child_shared(i)) {
        m_ch.sync();  // the child wrote its slot before the header; read the update in place
        u = m_ch.child_up(i);
      } else {
        m_t.links.recv(u, c.rank, kTagPayload);
      }
    }
    const double queue_s = MPI_Wtime() - c.arrived;
    c.last = h;
    c.state.assign(u.begin() + static_cast<std::ptrdiff_t>(m_layout.g + m_layout.d), u.end());
    c.has_state = true;
    algos::UpdateMeta meta{static_cast<int>(i), h.version, m_version, h.samples, m_ch.child_shared(i)};
    // The sender computed the blocks' sums of squares as it copied the update out (push_payload).
    const double ss_g = h.sumsq[0], ss_d = h.sumsq[1];
    const bool finite = std::isfinite(ss_g) && std::isfinite(ss_d) && std::isfinite(h.sumsq[2]);
    LogRow row{h, meta, std::sqrt(ss_g), std::sqrt(ss_d), queue_s};
    if (m_stopping) {
      // Training is over (max updates, early stopping): the update is not applied.
      row.verdict = "ignored";
      log_update(row);
      if (reply) send_stop(i);
      return;
    }
    if (!finite) {
      ++m_result.rejected;
      row.verdict = "rejected_nonfinite";
      spdlog::warn("{}: rejected a non-finite update from child {} (rank {}) at version {} (|g| G {:.4g}, D {:.4g})",
                   m_t.label(), i, c.rank, m_version, std::sqrt(ss_g), std::sqrt(ss_d));
      log_update(row);
      if (++m_nonfinite_run >= nonfinite_limit()) {
        diverged(i);
        if (reply) send_stop(i);
        return;
      }
      if (reply) send_weights(i, flags_for(i), m_pending_checkpoint);
      return;
    }
    m_nonfinite_run = 0;
    std::span<float> r = reply_span(i);
    algos::RuleStats sg, sd;
    algos::Verdict vg, vd;
    {
      auto span = m_trace.span("apply", "compute");
      // No reply follows the update of a pull-then-push exchange: the rule gets empty reply spans.
      const std::span<float> rg = reply ? m_layout.gen(r) : std::span<float>();
      const std::span<float> rd = reply ? m_layout.dis(r) : std::span<float>();
      vg = m_rule_g->submit(meta, m_layout.gen(std::span<const float>(u)), rg, sg);
      vd = m_rule_d->submit(meta, m_layout.dis(std::span<const float>(u)), rd, sd);
    }
    MPIGAN_CHECK(vg == vd, "{}: the update rule gave different verdicts for G and D", m_t.label());
    row.scale_g = sg.scale;
    row.scale_d = sd.scale;
    if (vg == algos::Verdict::rejected) {
      // The rule declined it (e.g. too stale): nothing changed; the worker gets the weights.
      ++m_result.rejected;
      row.verdict = "rejected_by_rule";
      log_update(row);
      if (reply) send_weights(i, flags_for(i), m_pending_checkpoint);
      return;
    }
    m_result.samples += h.samples;
    m_samples_since += h.samples;
    if (vg == algos::Verdict::held) {
      row.verdict = "held";
      m_held.push_back(i);
      m_held_rows.push_back(row);
      if (ready_round()) close_round();
      return;
    }
    ++m_result.applied;
    ++m_version;
    note_applied(i, h.samples);
    update_state();
    row.verdict = "applied";
    log_update(row);
    after_version();
    if (!reply) return;
    if (m_stopping) {
      send_stop(i);
      return;
    }
    fill_state(r);
    send_reply(i, r, flags_for(i), m_pending_checkpoint);
    c.pulled = m_version;
  }

  /// Throughput bookkeeping: the steady window starts once every child has contributed.
  void note_applied(std::size_t i, std::int64_t samples) {
    const double now = MPI_Wtime();
    m_children[i].contributed = true;
    if (m_steady_t0 < 0) {
      if (std::all_of(m_children.begin(), m_children.end(), [](const Child& c) { return c.contributed; })) {
        m_steady_t0 = now;
        m_steady_samples = 0;
      }
      return;
    }
    m_steady_samples += samples;
    m_steady_t1 = now;
  }

  bool ready_round() const {
    int active = 0;
    for (const auto& c : m_children) active += !c.done;
    return !m_held.empty() && m_rule_g->round_ready(active);
  }

  void close_round() {
    // The rule may write the first held child's reply as it applies the round, where nothing can
    // change the weights before the replies go out: not on a sub-master, whose exchange with its
    // parent (after_version) replaces them.
    const std::size_t first = m_held.front();
    std::span<float> first_reply = m_top ? reply_span(first) : std::span<float>();
    bool first_written = false;
    {
      auto span = m_trace.span("apply_round", "compute");
      const bool any = !first_reply.empty();
      const bool g = m_rule_g->close_round(static_cast<int>(first), any ? m_layout.gen(first_reply) : first_reply);
      const bool d = m_rule_d->close_round(static_cast<int>(first), any ? m_layout.dis(first_reply) : first_reply);
      first_written = g && d && !first_reply.empty();
      if (!first_written && !first_reply.empty() && (g || d))
        MPIGAN_FATAL("{}: the update rule wrote the first reply for one network only", m_t.label());
    }
    ++m_version;
    m_result.applied += static_cast<std::int64_t>(m_held.size());
    for (std::size_t k = 0; k < m_held.size(); ++k) note_applied(m_held[k], m_held_rows[k].h.samples);
    update_state();
    for (auto& row : m_held_rows) {
      row.verdict = "applied_round";
      log_update(row);
    }
    after_version();
    for (std::size_t i : m_held) {
      if (m_stopping) {
        send_stop(i);
        continue;
      }
      std::span<float> r = reply_span(i);
      if (!(first_written && i == first)) {
        m_rule_g->reply_after_round(static_cast<int>(i), m_layout.gen(r));
        m_rule_d->reply_after_round(static_cast<int>(i), m_layout.dis(r));
      }
      fill_state(r);
      send_reply(i, r, flags_for(i), m_pending_checkpoint);
      m_children[i].pulled = m_version;
    }
    m_held.clear();
    m_held_rows.clear();
  }

  void maybe_all_done() {
    if (m_stopping || !std::all_of(m_children.begin(), m_children.end(), [](const Child& c) { return c.done; })) return;
    spdlog::info("{}: every child has finished its data (version {})", m_t.label(), m_version);
    if (m_top) {
      begin_stop("data exhausted");
      return;
    }
    // A sub-master tells the top master and waits for the end of training.
    if (!m_parent_stopped) {
      Header h;
      h.kind = Kind::done;
      h.child = m_t.child_id;
      h.version = m_parent_version;
      send_header(m_t.links, h, m_t.parent, kTagHeader, m_ch.to_parent());
      const Header r = recv_header(m_t.links, m_t.parent, kTagReply, 0.0, m_ch.from_parent());
      MPIGAN_CHECK(r.kind == Kind::stop, "{}: expected stop after done, got message kind {}", m_t.label(),
                   static_cast<int>(r.kind));
      m_parent_stopped = true;
      if (r.flags & kFlagCheckpoint) write_part(r.checkpoint);
      enter_stopping(r.flags & kFlagCheckpoint ? r.checkpoint : -1);
    }
  }

  /// From now on every request is answered with stop; children waiting after `done` get it now.
  void enter_stopping(std::int64_t final_checkpoint) {
    m_stopping = true;
    m_final_checkpoint = final_checkpoint;
    for (std::size_t i = 0; i < m_children.size(); ++i)
      if (m_children[i].done && !m_children[i].stopped) send_stop(i);
  }

  std::int64_t nonfinite_limit() const {
    const auto n = m_d.dist.max_nonfinite;
    return n > 0 ? n : std::max<std::int64_t>(10, 2 * static_cast<std::int64_t>(m_children.size()));
  }

  /// max_nonfinite updates in a row were non-finite: training has diverged. The canonical weights
  /// never took any of them, so they are checkpointed and the run ends with the failure recorded.
  void diverged(std::size_t last_child) {
    const std::string why = fmt::format(
        "training diverged: {} non-finite updates in a row (the last from child {}, rank {}) at version {}; the "
        "weights of version {} are finite and checkpointed. Lower the learning rate (optimizer.lr, or algorithm.lr "
        "for gem), or raise training.max_nonfinite if a few bad batches are expected",
        m_nonfinite_run, last_child, m_children[last_child].rank, m_version, m_version);
    spdlog::error("{}: {}", m_t.label(), why);
    MPIGAN_CHECK(m_top, "{}: {}", m_t.label(), why);  // a sub-master ends the job; the watchdog reports it
    m_result.failure = why;
    begin_stop("diverged");
  }

  void begin_stop(const std::string& why) {
    if (m_stopping) return;
    m_stop_reason = why;
    spdlog::info("{}: stopping at version {}: {}", m_t.label(), m_version, why);
    std::int64_t final_id = -1;
    if (m_top) {
      if (m_validated_at != m_version) validate_and_check();
      if (m_result.last_checkpoint != checkpoint_main_path(m_run_dir, m_version)) write_checkpoint(m_version);
      final_id = m_version;
    }
    enter_stopping(final_id);
  }

  /// After every new version: limits, sub-master exchange, validation, checkpoints, progress.
  void after_version() {
    if (!m_top) {
      if (m_version % m_d.dist.topology.submaster_every == 0) exchange_with_parent();
      return;
    }
    if (m_pending_checkpoint >= 0) try_commit();
    if (m_d.experiment.log_every > 0 && m_version % m_d.experiment.log_every == 0) progress();
    if (m_e.max_updates > 0 && m_version >= m_e.max_updates) {
      begin_stop("max_updates reached");
      return;
    }
    if (m_e.validate_every > 0 && m_version % m_e.validate_every == 0 && validate_and_check()) {
      m_result.stopped_early = true;
      begin_stop("early stopping");
      return;
    }
    if (m_e.checkpoint_every > 0 && m_version % m_e.checkpoint_every == 0) write_checkpoint(m_version);
  }

  // ---------------------------------------------------------------- sub-master <-> top
  void receive_parent_weights_initial() {
    const Header h = recv_header(m_t.links, m_t.parent, kTagReply, 0.0, m_ch.from_parent());
    MPIGAN_CHECK(h.kind == Kind::weights, "{}: expected the initial weights from the master", m_t.label());
    std::vector<float> buf(m_layout.total());
    pull_payload(m_t.links, m_ch, m_t.parent, buf);
    set_from_parent(buf, h);
  }

  void set_from_parent(std::span<const float> buf, const Header& h) {
    std::copy(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(m_layout.g), m_theta_g.data());
    std::copy(buf.begin() + static_cast<std::ptrdiff_t>(m_layout.g),
              buf.begin() + static_cast<std::ptrdiff_t>(m_layout.g + m_layout.d), m_theta_d.data());
    std::copy(buf.begin() + static_cast<std::ptrdiff_t>(m_layout.g + m_layout.d), buf.end(), m_state.begin());
    m_theta_pulled_g.assign(m_theta_g.data(), m_theta_g.data() + m_layout.g);
    m_theta_pulled_d.assign(m_theta_d.data(), m_theta_d.data() + m_layout.d);
    m_parent_version = h.version;
    if (h.flags & kFlagCheckpoint) {
      // The top master's checkpoint: write this sub-master's part and pass the request on.
      write_part(h.checkpoint);
      m_pending_checkpoint = h.checkpoint;
    }
  }

  void exchange_with_parent() {
    auto span = m_trace.span("parent_exchange", "comm");
    std::vector<float> buf(m_layout.total());
    for (std::size_t k = 0; k < m_layout.g; ++k) buf[k] = m_theta_g.data()[k] - m_theta_pulled_g[k];
    for (std::size_t k = 0; k < m_layout.d; ++k) buf[m_layout.g + k] = m_theta_d.data()[k] - m_theta_pulled_d[k];
    std::copy(m_state.begin(), m_state.end(), buf.begin() + static_cast<std::ptrdiff_t>(m_layout.g + m_layout.d));
    Header h;
    h.kind = Kind::update;
    h.child = m_t.child_id;
    h.version = m_parent_version;
    h.samples = m_samples_since;
    m_samples_since = 0;
    push_payload(m_t.links, m_ch, h, m_t.parent, buf, m_layout);
    const Header r = recv_header(m_t.links, m_t.parent, kTagReply, kReplySpinSeconds, m_ch.from_parent());
    if (r.kind == Kind::stop) {
      if (r.flags & kFlagCheckpoint) write_part(r.checkpoint);
      m_parent_stopped = true;
      enter_stopping(r.flags & kFlagCheckpoint ? r.checkpoint : -1);
      return;
    }
    pull_payload(m_t.links, m_ch, m_t.parent, buf);
    set_from_parent(buf, r);
  }

  // ---------------------------------------------------------------- checkpoints
  void write_checkpoint(std::int64_t id) {
    auto span = m_trace.span("checkpoint", "io");
    const std::string path = checkpoint_main_path(m_run_dir, id);
    train::CheckpointWriter w(path);
    train::save_parameters(w, "model/generator/weights", m_theta_g, *m_host);
    train::save_parameters(w, "model/discriminator/weights", m_theta_d, *m_host);
    w.put("model/state", m_state);
    m_rule_g->save(w, "rule/generator");
    m_rule_d->save(w, "rule/discriminator");
    w.put_int("progress/version", m_version);
    w.put_int("progress/samples", m_result.samples);
    w.put_int("topology/masters", m_t.masters);
    w.put_int("topology/groups", m_t.groups);
    w.put_int("topology/group_size", m_t.group_size);
    w.put_string("algorithm/name", m_d.dist.algorithm->name());
    w.put_string("experiment/name", m_e.name);
    w.put_string("experiment/model", m_e.model.name);
    w.commit();
    m_pending_checkpoint = id;
    m_pending_path = path;
    m_result.last_checkpoint = path;
    spdlog::info("checkpoint {} written; 'latest' moves to it once every rank has written its part", path);
    try_commit();
  }

  /// The parts every other rank writes for checkpoint @p id (sub-masters, worker group leaders).
  std::vector<std::string> expected_parts(std::int64_t id) const {
    std::vector<std::string> parts;
    for (int s = 1; s < m_t.masters; ++s) parts.push_back(checkpoint_part_path(m_run_dir, id, fmt::format("submaster-{}", s)));
    for (int g = 0; g < m_t.groups; ++g) parts.push_back(checkpoint_part_path(m_run_dir, id, fmt::format("worker-{}", g)));
    return parts;
  }

  bool try_commit() {
    if (!m_top || m_pending_checkpoint < 0) return false;
    for (const auto& p : expected_parts(m_pending_checkpoint))
      if (!fs::exists(p)) return false;
    train::RunDirectory run(m_run_dir, false);
    run.commit_checkpoint(m_pending_path, m_e.checkpoint_keep);
    // Parts of checkpoints no longer kept go too.
    for (const auto& e : fs::directory_iterator(m_run_dir + "/checkpoints")) {
      const std::string name = e.path().filename().string();
      const auto dot = name.find('.');
      if (!name.starts_with("step-") || dot == std::string::npos || name.ends_with(".tmp")) continue;
      const std::string main = name.substr(0, dot) + ".h5";
      if (name != main && !fs::exists(m_run_dir + "/checkpoints/" + main)) fs::remove(e.path());
    }
    spdlog::info("checkpoint {} complete (latest)", m_pending_path);
    m_pending_checkpoint = -1;
    return true;
  }

  void finish_checkpoints() {
    // Every rank wrote its final part before the closing barrier of run_distributed; commit then.
    m_t.links.barrier();
    if (m_pending_checkpoint >= 0 && !try_commit())
      spdlog::warn("checkpoint {}: some ranks did not write their part; 'latest' stays at the previous checkpoint",
                   m_pending_path);
  }

  void write_part(std::int64_t id) {
    train::CheckpointWriter w(checkpoint_part_path(m_run_dir, id, fmt::format("submaster-{}", m_t.rank)));
    train::save_parameters(w, "model/generator/weights", m_theta_g, *m_host);
    train::save_parameters(w, "model/discriminator/weights", m_theta_d, *m_host);
    w.put("model/state", m_state);
    w.put("pulled/generator", m_theta_pulled_g);
    w.put("pulled/discriminator", m_theta_pulled_d);
    m_rule_g->save(w, "rule/generator");
    m_rule_d->save(w, "rule/discriminator");
    w.put_int("progress/version", m_version);
    w.put_int("progress/parent_version", m_parent_version);
    w.commit();
  }

  void load(std::int64_t id) {
    const bool sub = !m_top;
    const std::string path = sub ? checkpoint_part_path(m_run_dir, id, fmt::format("submaster-{}", m_t.rank))
                                 : checkpoint_main_path(m_run_dir, id);
    train::CheckpointReader r(path);
    if (m_top) {
      const auto masters = r.get_int("topology/masters"), groups = r.get_int("topology/groups"),
                 gs = r.get_int("topology/group_size");
      if (masters != m_t.masters || groups != m_t.groups || gs != m_t.group_size)
        MPIGAN_THROW(DataError, "checkpoint '{}' was written by {} master(s) and {} group(s) of {}; this run has {}, {} and {}: "
                     "resume with the same topology",
                     path, masters, groups, gs, m_t.masters, m_t.groups, m_t.group_size);
      const std::string alg = r.get_string("algorithm/name");
      if (alg != m_d.dist.algorithm->name())
        MPIGAN_THROW(DataError, "checkpoint '{}' was written by update rule '{}', this run uses '{}'", path, alg,
                     m_d.dist.algorithm->name());
      m_result.samples = r.get_int("progress/samples");
    }
    train::load_parameters(r, "model/generator/weights", m_theta_g, *m_host);
    train::load_parameters(r, "model/discriminator/weights", m_theta_d, *m_host);
    const auto st = r.floats("model/state");
    MPIGAN_CHECK(st.size() == m_state.size(), "checkpoint '{}': BatchNorm state of {} values, model has {}", path,
                 st.size(), m_state.size());
    m_state = st;
    m_rule_g->load(r, "rule/generator");
    m_rule_d->load(r, "rule/discriminator");
    m_version = r.get_int("progress/version");
    if (sub) {
      m_parent_version = r.get_int("progress/parent_version");
      m_theta_pulled_g = r.floats("pulled/generator");
      m_theta_pulled_d = r.floats("pulled/discriminator");
    }
    spdlog::info("{}: resumed from {} at version {}", m_t.label(), path, m_version);
  }

  // ---------------------------------------------------------------- validation and logging
  struct LogRow {
    Header h;
    algos::UpdateMeta meta;
    double norm_g = 0, norm_d = 0, queue_s = 0;
    double scale_g = 1, scale_d = 1;
    std::string verdict;
  };

  void open_logs(bool append) {
    train::RunDirectory run(m_run_dir, false);
    m_updates = std::make_unique<train::CsvLog>(
        run.file("updates.csv"),
        std::vector<std::string>{"time_s", "step", "worker", "rank", "pulled", "staleness", "samples", "update_norm",
                                 "update_norm_g", "update_norm_d", "scale_g", "scale_d", "queue_s", "wait_s",
                                 "compute_s", "verdict", "d_loss", "g_loss"},
        append);
    m_metrics = std::make_unique<train::CsvLog>(run.file("metrics.csv"),
                                                train::metrics_columns(m_session->model->discriminator.output_names()),
                                                append);
    m_t0 = MPI_Wtime();
  }

  void log_update(const LogRow& r) {
    if (!m_top || !m_updates) return;
    const double d_loss = r.h.n_losses >= 2 ? 0.5 * (r.h.losses[0] + r.h.losses[1]) : 0.0;
    const double g_loss = r.h.n_losses >= 3 ? r.h.losses[2] : 0.0;
    m_updates->row({train::csv_number(MPI_Wtime() - m_t0), std::to_string(m_version), std::to_string(r.meta.worker),
                    std::to_string(m_children[static_cast<std::size_t>(r.meta.worker)].rank), std::to_string(r.meta.pulled),
                    std::to_string(r.meta.staleness()), std::to_string(r.h.samples),
                    train::csv_number(std::sqrt(r.norm_g * r.norm_g + r.norm_d * r.norm_d)), train::csv_number(r.norm_g),
                    train::csv_number(r.norm_d), train::csv_number(r.scale_g), train::csv_number(r.scale_d),
                    train::csv_number(r.queue_s), train::csv_number(r.h.wait_s), train::csv_number(r.h.compute_s), r.verdict,
                    train::csv_number(d_loss), train::csv_number(g_loss)});
    m_staleness_sum += static_cast<double>(r.meta.staleness());
    m_d_sum += d_loss;
    m_g_sum += g_loss;
    ++m_logged;
  }

  void progress() {
    m_updates->flush();
    const double elapsed = MPI_Wtime() - m_t0;
    const double rate = elapsed > 0 ? static_cast<double>(m_result.samples) / elapsed : 0;
    std::string eta = "?";
    if (m_e.max_updates > 0 && m_version > 0) {
      const double left = elapsed / static_cast<double>(m_version) * static_cast<double>(m_e.max_updates - m_version);
      eta = fmt::format("{}m{:02d}s", static_cast<long long>(left) / 60, static_cast<long long>(left) % 60);
    }
    const double k = m_logged > 0 ? 1.0 / static_cast<double>(m_logged) : 0.0;
    spdlog::info("update {}{} | D {:.4f} G {:.4f} | {:.2f} samples/s | mean staleness {:.2f} | ETA {}", m_version,
                 m_e.max_updates > 0 ? fmt::format("/{}", m_e.max_updates) : std::string(), m_d_sum * k, m_g_sum * k, rate,
                 m_staleness_sum * k, eta);
    m_d_sum = m_g_sum = m_staleness_sum = 0;
    m_logged = 0;
  }

  /// Validation losses of the canonical weights; returns true when early stopping triggers.
  bool validate_and_check() {
    if (!m_e.validate) return false;
    auto span = m_trace.span("validate", "compute");
    ScopedHostThreads validating(m_compute_threads);
    m_validated_at = m_version;
    if (!m_val_loader) {
      if (!m_plan) m_plan = std::make_unique<train::DataPlan>(train::DataPlan::open(m_e, false));
      m_val_loader = m_plan->validation(m_e.batch);
      if (!m_val_loader) return false;
    }
    auto& m = *m_session->model;
    auto& be = *m_session->backend;
    Tensor g = m.generator.weights().flat(), d = m.discriminator.weights().flat();
    be.from_host(Tensor::view_of(g.shape(), m_theta_g.data(), Device::cpu), g);
    be.from_host(Tensor::view_of(d.shape(), m_theta_d.data(), Device::cpu), d);
    Tensor gs = m.generator.state().flat(), ds = m.discriminator.state().flat();
    be.from_host(Tensor::view_of(gs.shape(), m_state.data(), Device::cpu), gs);
    be.from_host(Tensor::view_of(ds.shape(), m_state.data() + m_layout.g_state, Device::cpu), ds);
    m_val_loader->seek({0, 0});
    train::LossAverager avg;
    data::Batch b;
    while ((m_e.validation_batches == 0 || avg.count() < m_e.validation_batches) && m_val_loader->next(b))
      avg.add(m_session->step->evaluate(train::real_batch(b), m_e.seed + static_cast<std::uint64_t>(avg.count())));
    if (avg.count() == 0) return false;
    const auto l = avg.mean();
    m_metrics->row(train::metrics_row("validation", 0, m_version, m_result.samples, MPI_Wtime() - m_t0, 0, l));
    m_metrics->flush();
    m_result.last_val_d = l.d_loss();
    m_result.last_val_g = l.g;
    spdlog::info("validation at update {}: D {:.4f} (real {:.4f}, fake {:.4f})  G {:.4f}", m_version, l.d_loss(), l.d_real,
                 l.d_fake, l.g);
    const auto& es = m_d.dist.early;
    if (!es.enabled) return false;
    const double v = es.metric == "val_d_loss" ? l.d_loss() : es.metric == "val_g_loss" ? l.g
                     : es.metric == "val_d_real" ? l.d_real : l.d_fake;
    const double sign = es.minimize ? 1.0 : -1.0;
    if (es.threshold && sign * v <= sign * *es.threshold) {
      spdlog::info("early stopping: {} = {:.5g} reached the threshold {:.5g}", es.metric, v, *es.threshold);
      return true;
    }
    if (!m_best || sign * v < sign * *m_best) {
      m_best = v;
      m_since_best = 0;
    } else if (es.patience > 0 && ++m_since_best >= es.patience) {
      spdlog::info("early stopping: {} did not improve for {} validations (best {:.5g})", es.metric, es.patience, *m_best);
      return true;
    }
    return false;
  }

  const DistExperiment& m_d;
  const train::ExperimentConfig& m_e;
  Topology& m_t;
  std::string m_run_dir;
  Trace& m_trace;
  const PayloadChannels& m_ch;  ///< shared-memory slots of the children on this node
  std::function<void()> m_before_barrier;
  bool m_top;
  std::unique_ptr<Backend> m_host;
  std::unique_ptr<train::Session> m_session;
  int m_compute_threads = 0;  ///< host threads for validation (the experiment's `threads`)
  ParameterSet m_theta_g, m_theta_d;
  std::vector<float> m_theta_pulled_g, m_theta_pulled_d;
  std::vector<float> m_state;
  PayloadLayout m_layout;
  std::unique_ptr<algos::MasterRule> m_rule_g, m_rule_d;
  bool m_synchronous = false;
  std::vector<Child> m_children;
  std::vector<float> m_update, m_reply;
  std::vector<std::size_t> m_held;
  std::vector<LogRow> m_held_rows;
  std::int64_t m_version = 0, m_parent_version = 0, m_samples_since = 0;
  bool m_stopping = false, m_parent_stopped = false;
  std::string m_stop_reason;
  std::int64_t m_nonfinite_run = 0;
  double m_last_arrival = 0, m_mean_interval = 0;  ///< seconds between requests (moving average)  ///< non-finite updates since the last applied one
  std::int64_t m_pending_checkpoint = -1, m_final_checkpoint = -1;
  std::string m_pending_path;
  std::unique_ptr<train::CsvLog> m_updates, m_metrics;
  double m_t0 = 0, m_staleness_sum = 0, m_d_sum = 0, m_g_sum = 0;
  std::int64_t m_logged = 0;
  std::unique_ptr<train::DataPlan> m_plan;
  std::unique_ptr<data::BatchSource> m_val_loader;
  std::optional<double> m_best;
  std::int64_t m_since_best = 0;
  std::int64_t m_validated_at = -1;
  double m_steady_t0 = -1, m_steady_t1 = -1;
  std::int64_t m_steady_samples = 0;
  MasterResult m_result;
};

}  // namespace

MasterResult run_master(const DistExperiment& d, Topology& t, const std::string& run_dir, std::int64_t resume_checkpoint,
                        Trace& trace, const PayloadChannels& channels, const std::function<void()>& before_barrier) {
  Master m(d, t, run_dir, trace, channels, before_barrier);
  return m.run(resume_checkpoint);
}

}  // namespace mpigan::master
