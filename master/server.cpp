// A master rank's request loop (server.hpp).
#include "mpigan/master/server.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/core/stop_signal.hpp"
#include "mpigan/dist/run_files.hpp"
#include "mpigan/master/checkpoints.hpp"
#include "mpigan/master/child_watch.hpp"
#include "mpigan/master/parent_link.hpp"
#include "mpigan/master/progress.hpp"
#include "mpigan/master/update_service.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <optional>
#include <utility>

namespace mpigan::master {

using dist::Header;
using dist::Kind;

namespace {

using Clock = std::chrono::steady_clock;

/// The loop's view of a child: its rank, the request being served and where it stands.
struct Child {
  int rank = -1;
  bool done = false, stopped = false;
  /// Its reply is deferred (topology.max_lead): it is too far ahead; pull: what it sent was a pull
  /// (pull-then-push), answered and followed by its update on release; else its update was applied.
  bool deferred = false, deferred_pull = false;
  std::int64_t applied = 0;   ///< its updates applied (asynchronous rules)
  Header header;              ///< the request being served (the receive buffer)
  Header last;                ///< a copy of the last request served (header is reused by the receive)
  std::int64_t flagged = -1;  ///< the last checkpoint it was asked to write its part of
  double arrived = 0;         ///< wall time its current request was seen
  ChildWatch watch;           ///< how long it may stay silent (topology.rank_timeout)
  MPI_Request req = MPI_REQUEST_NULL;
};

class Server {
 public:
  explicit Server(dist::RoleContext& ctx)
      : m_ctx(ctx),
        m_t(ctx.t),
        m_e(ctx.d.experiment),
        m_top(ctx.t.role == dist::Role::top_master),
        m_children(ctx.t.children.size()),
        m_service(
            *ctx.d.dist.algorithm,
            UpdateService::Networks::of(*ctx.session.model, *ctx.session.backend, ctx.d.experiment),
            {static_cast<int>(ctx.t.children.size()), m_top && ctx.t.masters > 1, m_top, ctx.d.dist.max_nonfinite},
            [this](int child) { return reply_span(static_cast<std::size_t>(child)); }),
        m_progress(ProgressContext::of(ctx), static_cast<int>(ctx.t.children.size())),
        m_checkpoints(ctx, m_service),
        m_reply(ctx.layout.total()) {
    for (std::size_t i = 0; i < m_children.size(); ++i) m_children[i].rank = m_t.children[i];
    if (!m_top) m_parent.emplace(ctx, m_service);
    // Updates that do not lie in a shared-memory slot are received here.
    if (m_ctx.channels.shared_children() < static_cast<int>(m_children.size())) m_update.resize(ctx.layout.total());
  }

  dist::MasterResult run() {
    const auto t_start = Clock::now();
    const double cpu_start = process_cpu_seconds();
    const bool resume = m_ctx.resume >= 0;
    if (resume) m_top ? m_checkpoints.load(m_ctx.resume, m_result) : m_parent->load_part(m_ctx.resume);
    if (m_top) m_progress.open_logs(resume ? m_service.version() : -1);
    if (!m_top) m_parent->receive_initial();
    for (std::size_t i = 0; i < m_children.size(); ++i) send_weights(i, 0, -1);
    {
      ScopedHostThreads serving(m_ctx.d.dist.topology.master_threads);
      serve();
    }
    if (m_ctx.d.dist.topology.max_lead > 0)
      spdlog::info("topology.max_lead {}: {} replies waited for the slowest child to catch up",
                   m_ctx.d.dist.topology.max_lead, m_deferred);
    if (m_ctx.before_barrier) m_ctx.before_barrier();
    if (m_hung) end_hung();  // never returns: the hung rank cannot meet the closing barrier
    if (m_top) {
      m_checkpoints.finish();
      m_progress.finish_physics(m_service, m_result);  // after the closing barrier: workers are not held
    } else
      m_t.links.barrier();  // matches the top master's closing barrier
    m_result.wall_s = std::chrono::duration<double>(Clock::now() - t_start).count();
    m_result.cpu_s = process_cpu_seconds() - cpu_start;
    m_result.version = m_service.version();
    m_result.samples = m_service.samples();
    m_result.applied = m_service.applied();
    m_result.rejected = m_service.rejected();
    m_result.steady_samples_per_s = m_progress.steady_samples_per_s();
    return m_result;
  }

 private:
  // ---------------------------------------------------------------- replies
  /// Where the reply to child i is built: its shared-memory slot (the rule writes the weights
  /// straight into the child's view), or the buffer an MPI message is sent from.
  std::span<float> reply_span(std::size_t i) {
    return m_ctx.channels.child_shared(i) ? m_ctx.channels.child_down(i) : std::span<float>(m_reply);
  }

  void send_weights(std::size_t i, std::int32_t flags, std::int64_t ckpt) {
    const std::span<float> r = reply_span(i);
    m_service.pull(static_cast<int>(i), r);
    send_reply(i, r, flags, ckpt);
  }

  void send_reply(std::size_t i, std::span<const float> payload, std::int32_t flags, std::int64_t ckpt) {
    const auto& ch = m_ctx.channels;
    Header h;
    h.kind = Kind::weights;
    h.version = m_service.version();
    h.flags = flags;
    h.checkpoint = ckpt;
    auto span = m_ctx.trace.span("reply", "comm");
    if (ch.child_shared(i)) {
      MPIGAN_CHECK(payload.data() == ch.child_down(i).data(), "the reply to child {} was not built in its slot", i);
      ch.sync();
      dist::send_header(m_t.links, h, m_children[i].rank, dist::kTagReply, ch.to_child(i));
      return;
    }
    dist::send_header(m_t.links, h, m_children[i].rank, dist::kTagReply, ch.to_child(i));
    m_t.links.send(payload, m_children[i].rank, dist::kTagReplyPayload);
  }

  /// The answer to a served update: the weights (with a checkpoint request when one is pending).
  void answer(std::size_t i) { send_weights(i, flags_for(i), m_checkpoints.pending()); }

  void send_stop(std::size_t i, bool not_applied = false) {
    Header h;
    h.kind = Kind::stop;
    h.version = m_service.version();
    if (not_applied) h.flags |= dist::kFlagNotApplied;
    if (m_final_checkpoint >= 0) {
      h.flags |= dist::kFlagCheckpoint;
      h.checkpoint = m_final_checkpoint;
    }
    dist::send_header(m_t.links, h, m_children[i].rank, dist::kTagReply, m_ctx.channels.to_child(i));
    m_children[i].stopped = true;
  }

  /// Ask each child once per checkpoint to write its part (on the next reply it gets).
  std::int32_t flags_for(std::size_t i) {
    Child& c = m_children[i];
    const std::int64_t pending = m_checkpoints.pending();
    if (pending < 0 || c.flagged == pending) return 0;
    c.flagged = pending;
    return dist::kFlagCheckpoint;
  }

  // ---------------------------------------------------------------- the loop
  void post(std::size_t i) {
    Child& c = m_children[i];
    c.req = m_t.links.irecv_bytes(&c.header, sizeof(Header), c.rank, dist::kTagHeader);
    c.watch.awaiting(MPI_Wtime());
  }

  /// A child the master has waited on for longer than its limit: hung (SIGSTOP, a deadlock, swap).
  std::optional<std::size_t> hung_child(double now) const {
    for (std::size_t i = 0; i < m_children.size(); ++i) {
      const Child& c = m_children[i];
      // A held child waits for its round's reply, a deferred one for the others to catch up: it is
      // silent because of the others.
      if (c.req != MPI_REQUEST_NULL && !c.stopped && !c.deferred && !m_service.held(static_cast<int>(i)) &&
          c.watch.too_long(now, m_ctx.d.dist.topology.rank_timeout_s))
        return i;
    }
    return std::nullopt;
  }

  /// Ends the job naming the hung child: FAILED, then an exception (the rank aborts the job, the
  /// hung process included).
  [[noreturn]] void fail_hung(std::size_t i, double now, std::int64_t taken_at_hang = -1) {
    const auto latest = dist::latest_checkpoint_id_or_none(m_ctx.run_dir);
    std::string why = hung_report(m_children[i].rank, i, m_children[i].watch, now, m_ctx.d.dist.topology.rank_timeout_s,
                                  latest, m_ctx.run_dir);
    if (taken_at_hang >= 0 && latest == taken_at_hang)
      why += m_hung_part_by_master
                 ? fmt::format(
                       " (taken at the hang: rank {}'s part holds its data position, its rule state starts afresh)",
                       m_children[i].rank)
                 : fmt::format(" (taken at the hang, with rank {}'s own part, written before it stopped)",
                               m_children[i].rank);
    std::ofstream(m_ctx.run_dir + "/FAILED") << why << '\n';
    MPIGAN_THROW(Error, "{}", why);
  }

  /// A hung child. The top master of a flat job (its children are worker groups) ends the job with
  /// a checkpoint of the current version: it writes the main file and the hung group's part itself
  /// (the data position of its last request; its rule's worker state starts afresh on resume),
  /// stops the other children asking for their parts (now, for those held in a round), and once
  /// serving is over waits for the parts, commits and ends the job (end_hung). A hung sub-master,
  /// or a child of one, ends the job at once with the last complete checkpoint.
  void stop_for_hung(std::size_t i, double now) {
    if (!m_top || m_t.masters > 1) fail_hung(i, now);
    Child& c = m_children[i];
    c.stopped = true;  // never answered again; its receive is cancelled after serving
    m_hung = {i, now};
    const auto v = m_service.version();
    spdlog::error("rank {} (child {}) has sent nothing for {:.0f} s: ending the job with a checkpoint of version {}",
                  c.rank, i, c.watch.silent_for(now), v);
    if (m_stopping) return;  // a final checkpoint is under way already
    m_checkpoints.write(v, m_result);
    if (m_checkpoints.pending() == v) {
      m_checkpoints.write_part_for((c.rank - m_t.masters) / m_t.group_size, c.last);
      m_hung_checkpoint = v;
      m_hung_part_by_master = true;
    } else if (dist::latest_checkpoint_id_or_none(m_ctx.run_dir) == v) {
      // Committed at once: every part of version v was there, the hung rank's own included (it
      // wrote its part of the periodic checkpoint v, then stopped before the master committed it).
      m_hung_checkpoint = v;
    }
    enter_stopping(m_checkpoints.pending() == v ? v : -1);
    for (std::size_t k = 0; k < m_children.size(); ++k)
      if (m_service.held(static_cast<int>(k)) && !m_children[k].stopped) send_stop(k, true);
  }

  /// After serving with a hung child: wait (up to the rank timeout, at least 30 s) for the other
  /// children's parts, commit the checkpoint, record FAILED and end the job.
  [[noreturn]] void end_hung() {
    // The commit may have happened while serving already (the last part arrived): then nothing
    // is pending, and 'latest' says whether the checkpoint taken at the hang made it.
    if (m_checkpoints.pending() >= 0) m_checkpoints.wait_commit(std::max(30.0, m_ctx.d.dist.topology.rank_timeout_s));
    const bool committed =
        m_hung_checkpoint >= 0 && dist::latest_checkpoint_id_or_none(m_ctx.run_dir) == m_hung_checkpoint;
    fail_hung(m_hung->first, m_hung->second, committed ? m_hung_checkpoint : -1);
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

  /// The requests that have arrived, waiting (idle) until at least one has.
  std::vector<int> wait_for_requests(std::vector<MPI_Request>& reqs) {
    for (std::size_t i = 0; i < m_children.size(); ++i) reqs[i] = m_children[i].req;
    std::vector<int> ready;
    {
      auto span = m_ctx.trace.span("idle", "wait");
      const double w0 = MPI_Wtime();
      mpigan::Idle idle = m_ctx.channels.from_children(idle_sleep_cap());
      idle.give_up = [this] { return hung_child(MPI_Wtime()).has_value(); };
      ready = wait_some_quietly(reqs, idle);
      m_result.idle_s += MPI_Wtime() - w0;
    }
    const double now = MPI_Wtime();
    note_arrivals(now, ready.size());
    for (int k : ready) {
      Child& c = m_children[static_cast<std::size_t>(k)];
      c.req = MPI_REQUEST_NULL;
      c.watch.arrived(now, c.arrived);
      c.arrived = now;
    }
    // Also while the others keep the master busy: an asynchronous rule would go on without the
    // silent child, but no checkpoint could complete without its part.
    if (const auto hung = hung_child(now)) stop_for_hung(*hung, now);
    return ready;
  }

  void serve() {
    const std::size_t n = m_children.size();
    for (std::size_t i = 0; i < n; ++i) post(i);
    std::vector<MPI_Request> reqs(n);
    std::size_t next = 0;
    while (std::any_of(m_children.begin(), m_children.end(), [](const Child& c) { return !c.stopped; })) {
      std::vector<int> ready = wait_for_requests(reqs);
      // Round-robin from the child after the one served last: no child starves another.
      std::sort(ready.begin(), ready.end(), [&](int a, int b) {
        return (static_cast<std::size_t>(a) + n - next) % n < (static_cast<std::size_t>(b) + n - next) % n;
      });
      for (int k : ready) {
        const auto i = static_cast<std::size_t>(k);
        handle(i);
        next = (i + 1) % n;
        if (!m_children[i].stopped && !m_children[i].deferred_pull) post(i);
      }
      release_deferred();
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
    c.last = c.header;
    switch (c.header.kind) {
      case Kind::done: {
        // The child's data is exhausted: it waits for the stop, which comes when training ends
        // for everyone (so it can still write its part of the final checkpoint).
        c.done = true;
        spdlog::debug("child {} (rank {}) finished its data at step {}", i, c.rank, c.header.steps);
        if (m_stopping) {
          send_stop(i);
          return;
        }
        const Decision d = m_service.child_done(static_cast<int>(i));
        if (!d.round.empty()) round_closed(d);
        maybe_all_done();
        return;
      }
      case Kind::pull: {
        if (m_stopping) {
          send_stop(i);
          return;
        }
        if (too_far_ahead(i)) {
          defer(i, true);
          return;
        }
        serve_pull(i);
        return;
      }
      case Kind::update:
        serve_update(i, true);
        return;
      default:
        MPIGAN_FATAL("unexpected '{}' message from rank {}", dist::to_string(c.header.kind), c.rank);
    }
  }

  /// A pull (pull-then-push): the weights, then the update computed on them.
  void serve_pull(std::size_t i) {
    Child& c = m_children[i];
    answer(i);
    // The same child's update follows at once (pull-then-push): serve it before anyone else,
    // so the weights it computed against are exactly the ones the update is applied to.
    const double w0 = MPI_Wtime();  // waiting for the child's update counts as idle time
    c.header = dist::recv_header(m_t.links, c.rank, dist::kTagHeader, dist::kReplySpinSeconds,
                                 m_ctx.channels.from_children(idle_sleep_cap()));
    m_result.idle_s += MPI_Wtime() - w0;
    MPIGAN_CHECK(c.header.kind == Kind::update, "child {} (rank {}) pulled, then sent a '{}' message", i, c.rank,
                 dist::to_string(c.header.kind));
    serve_update(i, false);
  }

  // ---------------------------------------------------------------- bounded staleness (max_lead)
  /// Child @p i has had more than topology.max_lead updates applied beyond the child least served
  /// of those still training.
  bool too_far_ahead(std::size_t i) const {
    const std::int64_t bound = m_ctx.d.dist.topology.max_lead;
    if (bound <= 0) return false;
    std::int64_t least = m_children[i].applied;
    for (const Child& c : m_children)
      if (!c.done && !c.stopped) least = std::min(least, c.applied);
    return m_children[i].applied - least > bound;
  }

  void defer(std::size_t i, bool pull) {
    Child& c = m_children[i];
    c.deferred = true;
    c.deferred_pull = pull;
    ++m_deferred;
    spdlog::debug("child {} (rank {}) is {} updates ahead: its reply waits", i, c.rank, c.applied);
  }

  /// Answers the deferred children that are no longer too far ahead, with the weights of now.
  void release_deferred() {
    for (std::size_t i = 0; i < m_children.size(); ++i) {
      Child& c = m_children[i];
      if (!c.deferred || c.stopped || too_far_ahead(i)) continue;
      c.deferred = false;
      c.watch.awaiting(MPI_Wtime());  // its silence counts from the reply
      if (!std::exchange(c.deferred_pull, false)) {
        answer(i);
        continue;
      }
      serve_pull(i);
      if (!c.stopped) post(i);
    }
  }

  /// The update's payload: in the child's shared-memory slot, or received into m_update.
  std::span<const float> receive_payload(std::size_t i) {
    auto span = m_ctx.trace.span("receive", "comm");
    const auto& ch = m_ctx.channels;
    if (ch.child_shared(i)) {
      ch.sync();  // the child wrote its slot before the header; read the update in place
      return ch.child_up(i);
    }
    m_t.links.recv(std::span<float>(m_update), m_children[i].rank, dist::kTagPayload);
    return m_update;
  }

  void serve_update(std::size_t i, bool reply) {
    Child& c = m_children[i];
    const Header& h = c.header;
    const std::span<const float> u = receive_payload(i);
    LogRow row{h,
               static_cast<int>(i),
               c.rank,
               m_service.version(),
               std::sqrt(h.sumsq[0]),
               std::sqrt(h.sumsq[1]),
               MPI_Wtime() - c.arrived};
    if (m_stopping) {
      // Training is over (max updates, early stopping): the update is not applied.
      row.verdict = "ignored";
      m_progress.log_update(row, m_service.version());
      if (reply) send_stop(i, true);
      return;
    }
    const std::span<float> r = reply ? reply_span(i) : std::span<float>();
    Decision d;
    {
      auto span = m_ctx.trace.span("apply", "compute");
      d = m_service.submit({static_cast<int>(i), h.version, h.samples, h.sumsq, u, m_ctx.channels.child_shared(i)}, r);
    }
    m_progress.log_decision(row, d, m_service.version());
    switch (d.outcome) {
      case Outcome::rejected_nonfinite:
      case Outcome::diverged:
        spdlog::warn("rejected a non-finite update from child {} (rank {}) at version {} (|g| G {:.4g}, D {:.4g})", i,
                     c.rank, m_service.version(), row.norm_g, row.norm_d);
        [[fallthrough]];
      case Outcome::rejected_by_rule:
        // Nothing changed; the child gets the weights (or the stop, when training diverged).
        if (d.outcome == Outcome::diverged) diverged(i);
        if (reply) m_stopping ? send_stop(i) : answer(i);
        return;
      case Outcome::held:
        if (!d.round.empty()) round_closed(d);
        return;
      case Outcome::applied:
        break;
    }
    ++c.applied;
    after_version();
    if (!reply) return;
    if (m_stopping) {
      send_stop(i);
      return;
    }
    if (too_far_ahead(i)) {
      defer(i, false);  // the reply is built again on release, with the weights of then
      return;
    }
    m_service.fill_state(r);
    send_reply(i, r, flags_for(i), m_checkpoints.pending());
  }

  /// The service applied a synchronous round: log it, then answer its children.
  void round_closed(const Decision& d) {
    m_progress.log_round(m_service.version());
    after_version();
    for (int k : d.round) {
      const auto i = static_cast<std::size_t>(k);
      if (m_stopping) {
        send_stop(i);
        continue;
      }
      const std::span<float> r = reply_span(i);
      m_service.round_reply(k, r, d.first_reply_written && k == d.round.front());
      send_reply(i, r, flags_for(i), m_checkpoints.pending());
      m_children[i].watch.awaiting(MPI_Wtime());  // its silence counts from the reply
    }
  }

  // ---------------------------------------------------------------- the end of training
  void maybe_all_done() {
    if (m_stopping || !std::all_of(m_children.begin(), m_children.end(), [](const Child& c) { return c.done; })) return;
    spdlog::info("every child has finished its data (version {})", m_service.version());
    if (m_top) {
      begin_stop("data exhausted");
      return;
    }
    // A sub-master tells the top master and waits for the end of training.
    if (!m_parent_stopped) parent_said(m_parent->done());
  }

  void parent_said(const ParentLink::Reply& r) {
    if (!r.stop) {
      if (r.checkpoint >= 0) m_checkpoints.set_pending(r.checkpoint);
      return;
    }
    m_parent_stopped = true;
    enter_stopping(r.checkpoint);
  }

  /// From now on every request is answered with stop; children waiting after `done` get it now.
  void enter_stopping(std::int64_t final_checkpoint) {
    m_stopping = true;
    m_final_checkpoint = final_checkpoint;
    // Deferred children too: their updates were applied (or they pulled), and they wait.
    for (std::size_t i = 0; i < m_children.size(); ++i) {
      Child& c = m_children[i];
      if ((c.done || c.deferred) && !c.stopped) send_stop(i);
      c.deferred = c.deferred_pull = false;
    }
  }

  /// max_nonfinite updates in a row were non-finite: training has diverged. The canonical weights
  /// never took any of them, so they are checkpointed and the run ends with the failure recorded.
  void diverged(std::size_t last_child) {
    const auto v = m_service.version();
    const std::string why = fmt::format(
        "training diverged: {} non-finite updates in a row (the last from child {}, rank {}) at version {}; the "
        "weights of version {} are finite and checkpointed. Lower the learning rate (optimizer.lr, or algorithm.lr "
        "for gem), or raise training.max_nonfinite if a few bad batches are expected",
        m_service.nonfinite_run(), last_child, m_children[last_child].rank, v, v);
    spdlog::error("{}", why);
    MPIGAN_CHECK(m_top, "{}", why);  // a sub-master ends the job; the watchdog reports it
    m_result.failure = why;
    begin_stop("diverged");
  }

  void begin_stop(const std::string& why) {
    if (m_stopping) return;
    const auto v = m_service.version();
    spdlog::info("stopping at version {}: {}", v, why);
    std::int64_t final_id = -1;
    if (m_top) {
      if (m_progress.validated_at() != v && stop_signal() == 0) m_progress.validate(m_service, m_result);
      if (m_result.last_checkpoint != dist::checkpoint_main_path(m_ctx.run_dir, v)) m_checkpoints.write(v, m_result);
      final_id = v;
    }
    enter_stopping(final_id);
  }

  /// After every new version: limits, sub-master exchange, validation, checkpoints, progress.
  void after_version() {
    const auto v = m_service.version();
    if (!m_top) {
      if (v % m_ctx.d.dist.topology.submaster_every == 0) parent_said(m_parent->exchange());
      return;
    }
    m_checkpoints.try_commit();
    m_progress.after_version(v, m_service.samples());
    if (stop_signal() != 0) {
      // mpiexec and srun deliver the signal to every rank; the top master alone acts on it, and the
      // workers and sub-masters go on until its stop reaches them with the final checkpoint.
      m_result.stopped_by_signal = stop_signal();
      begin_stop(signal_name(stop_signal()) + " received");
      return;
    }
    if (m_e.max_updates > 0 && v >= m_e.max_updates) {
      begin_stop("max_updates reached");
      return;
    }
    if (m_e.physics.enabled && m_e.physics.every > 0 && v % m_e.physics.every == 0)
      m_progress.request_physics(m_service);
    const bool stop_validation =
        m_e.validate_every > 0 && v % m_e.validate_every == 0 && m_progress.validate(m_service, m_result);
    if (stop_validation || m_progress.poll_physics(m_result)) {
      m_result.stopped_early = true;
      begin_stop("early stopping");
      return;
    }
    if (m_ctx.prune && m_e.validate_every > 0 && v % m_e.validate_every == 0 && m_ctx.prune()) {
      m_result.stopped_early = true;
      begin_stop("pruned by the hyper-parameter search");
      return;
    }
    if (m_e.checkpoint_every > 0 && v % m_e.checkpoint_every == 0) m_checkpoints.write(v, m_result);
  }

  dist::RoleContext& m_ctx;
  dist::Topology& m_t;
  const train::ExperimentConfig& m_e;
  bool m_top;
  std::vector<Child> m_children;
  UpdateService m_service;
  Progress m_progress;
  Checkpoints m_checkpoints;
  std::optional<ParentLink> m_parent;  ///< sub-masters only
  std::vector<float> m_update, m_reply;
  bool m_stopping = false, m_parent_stopped = false;
  std::optional<std::pair<std::size_t, double>> m_hung;  ///< the hung child and when it was found
  std::int64_t m_hung_checkpoint = -1;                   ///< the checkpoint written at the hang
  bool m_hung_part_by_master = false;                    ///< its hung group's part written by the master
  std::int64_t m_final_checkpoint = -1;
  double m_last_arrival = 0, m_mean_interval = 0;  ///< seconds between requests (moving average)
  std::int64_t m_deferred = 0;                     ///< replies deferred by topology.max_lead
  dist::MasterResult m_result;
};

}  // namespace

dist::MasterResult run_master(dist::RoleContext& ctx) {
  Server s(ctx);
  return s.run();
}

}  // namespace mpigan::master
