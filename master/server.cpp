// A master rank's request loop (server.hpp): start-up, replies, the loop, serving updates and pulls,
// and bounded staleness (topology.max_lead). Hung children and the end of training: server_stop.cpp.
#include "mpigan/master/server.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/master/server_loop.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

namespace mpigan::master {

namespace detail {

Server::Server(dist::RoleContext& ctx)
    : m_ctx(ctx),
      m_topology(ctx.topology),
      m_experiment(ctx.job.experiment),
      m_top(ctx.topology.role == dist::Role::top_master),
      m_children(ctx.topology.children.size()),
      m_service(*ctx.job.dist.algorithm,
                UpdateService::Networks::of(*ctx.session.model, *ctx.session.backend, ctx.job.experiment),
                {static_cast<int>(ctx.topology.children.size()), m_top && ctx.topology.masters > 1, m_top,
                 ctx.job.dist.max_nonfinite, ctx.job.dist.topology.submaster_scale,
                 // The top master follows the schedule over its budget spent; a sub-master takes
                 // its parent's factor (ParentLink).
                 m_top ? UpdateService::Options::schedule_of(ctx.job.experiment) : nullptr},
                [this](int child) { return reply_span(static_cast<std::size_t>(child)); }),
      m_progress(ProgressContext::of(ctx), static_cast<int>(ctx.topology.children.size())),
      m_checkpoints(ctx, m_service),
      m_reply(ctx.layout.total()) {
  for (std::size_t i = 0; i < m_children.size(); ++i) m_children[i].rank = m_topology.children[i];
  if (!m_top) m_parent.emplace(ctx, m_service);
  // Updates that do not lie in a shared-memory slot are received here.
  if (m_ctx.channels.shared_children() < static_cast<int>(m_children.size())) m_update.resize(ctx.layout.total());
}

dist::MasterResult Server::run() {
  const double t_start = MPI_Wtime();  // the simulated clock under SMPI
  const double cpu_start = process_cpu_seconds();
  const bool resume = m_ctx.resume >= 0;
  if (resume) m_top ? m_checkpoints.load(m_ctx.resume, m_result) : m_parent->load_part(m_ctx.resume);
  if (m_top) m_progress.open_logs(resume ? m_service.version() : -1);
  if (!m_top) m_parent->receive_initial();
  for (std::size_t i = 0; i < m_children.size(); ++i) send_weights(i, 0, -1);
  {
    ScopedHostThreads serving(m_ctx.job.dist.topology.master_threads);
    serve();
  }
  if (m_ctx.job.dist.topology.max_lead > 0)
    spdlog::info("topology.max_lead {}: {} replies waited for the slowest child to catch up",
                 m_ctx.job.dist.topology.max_lead, m_deferred);
  if (m_ctx.before_barrier) m_ctx.before_barrier();
  if (!m_hung.empty()) end_hung();  // never returns: the hung rank cannot meet the closing barrier
  if (m_top) {
    m_checkpoints.finish();
    m_progress.finish_physics(m_service, m_result);  // after the closing barrier: workers are not held
  } else
    m_topology.links.barrier();  // matches the top master's closing barrier
  m_result.wall_s = MPI_Wtime() - t_start;
  m_result.cpu_s = process_cpu_seconds() - cpu_start;
  m_result.version = m_service.version();
  m_result.samples = m_service.samples();
  m_result.applied = m_service.applied();
  m_result.rejected = m_service.rejected();
  m_result.steady_samples_per_s = m_progress.steady_samples_per_s();
  return m_result;
}

// ---------------------------------------------------------------- replies
std::span<float> Server::reply_span(std::size_t i) {
  return m_ctx.channels.child_shared(i) ? m_ctx.channels.child_down(i) : std::span<float>(m_reply);
}

void Server::send_weights(std::size_t i, std::int32_t flags, std::int64_t ckpt) {
  const std::span<float> r = reply_span(i);
  m_service.pull(static_cast<int>(i), r);
  send_reply(i, r, flags, ckpt);
}

void Server::send_reply(std::size_t i, std::span<const float> payload, std::int32_t flags, std::int64_t ckpt) {
  const auto& ch = m_ctx.channels;
  Header h;
  h.kind = Kind::weights;
  h.version = m_service.version();
  h.flags = flags;
  h.checkpoint = ckpt;
  h.lr_factor = m_service.lr_factor();
  auto span = m_ctx.trace.span("reply", "comm");
  if (ch.child_shared(i)) {
    MPIGAN_CHECK(payload.data() == ch.child_down(i).data(), "the reply to child {} was not built in its slot", i);
    ch.sync();
    dist::send_header(m_topology.links, h, m_children[i].rank, dist::kTagReply, ch.to_child(i));
    return;
  }
  dist::send_header(m_topology.links, h, m_children[i].rank, dist::kTagReply, ch.to_child(i));
  m_topology.links.send(payload, m_children[i].rank, dist::kTagReplyPayload);
}

void Server::answer(std::size_t i) {
  send_weights(i, flags_for(i), m_checkpoints.pending());
}

void Server::send_stop(std::size_t i, bool not_applied) {
  Header h;
  h.kind = Kind::stop;
  h.version = m_service.version();
  if (not_applied) h.flags |= dist::kFlagNotApplied;
  if (m_final_checkpoint >= 0) {
    h.flags |= dist::kFlagCheckpoint;
    h.checkpoint = m_final_checkpoint;
  }
  dist::send_header(m_topology.links, h, m_children[i].rank, dist::kTagReply, m_ctx.channels.to_child(i));
  m_children[i].stopped = true;
  m_service.child_gone(static_cast<int>(i));
}

std::int32_t Server::flags_for(std::size_t i) {
  Child& c = m_children[i];
  const std::int64_t pending = m_checkpoints.pending();
  if (pending < 0 || c.flagged == pending) return 0;
  c.flagged = pending;
  return dist::kFlagCheckpoint;
}

// ---------------------------------------------------------------- the loop
void Server::post(std::size_t i) {
  Child& c = m_children[i];
  c.req = m_topology.links.irecv_bytes(&c.header, sizeof(Header), c.rank, dist::kTagHeader);
  c.watch.awaiting(MPI_Wtime());
}

double Server::idle_sleep_cap() const {
  if (m_mean_interval <= 0) return 1e-3;
  return std::clamp(m_mean_interval / 100.0, 1e-3, 10e-3);
}

void Server::note_arrivals(double now, std::size_t n) {
  if (n == 0) return;
  if (m_last_arrival > 0) {
    const double dt = (now - m_last_arrival) / static_cast<double>(n);
    m_mean_interval = m_mean_interval <= 0 ? dt : 0.8 * m_mean_interval + 0.2 * dt;
  }
  m_last_arrival = now;
}

std::vector<int> Server::wait_for_requests(std::vector<MPI_Request>& reqs) {
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

void Server::serve() {
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

void Server::handle(std::size_t i) {
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

void Server::serve_pull(std::size_t i) {
  Child& c = m_children[i];
  answer(i);
  // The same child's update follows at once (pull-then-push): serve it before anyone else,
  // so the weights it computed against are exactly the ones the update is applied to.
  const double w0 = MPI_Wtime();  // waiting for the child's update counts as idle time
  c.header = dist::recv_header(m_topology.links, c.rank, dist::kTagHeader, dist::kReplySpinSeconds,
                               m_ctx.channels.from_children(idle_sleep_cap()));
  m_result.idle_s += MPI_Wtime() - w0;
  MPIGAN_CHECK(c.header.kind == Kind::update, "child {} (rank {}) pulled, then sent a '{}' message", i, c.rank,
               dist::to_string(c.header.kind));
  serve_update(i, false);
}

// ---------------------------------------------------------------- bounded staleness (max_lead)
bool Server::too_far_ahead(std::size_t i) const {
  return m_service.beyond_lead(static_cast<int>(i), m_ctx.job.dist.topology.max_lead);
}

void Server::defer(std::size_t i, bool pull) {
  Child& c = m_children[i];
  c.deferred = true;
  c.deferred_pull = pull;
  ++m_deferred;
  spdlog::debug("child {} (rank {}) is {} updates ahead: its reply waits", i, c.rank,
                m_service.lead(static_cast<int>(i)));
}

void Server::release_deferred() {
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

// ---------------------------------------------------------------- serving an update
std::span<const float> Server::receive_payload(std::size_t i) {
  auto span = m_ctx.trace.span("receive", "comm");
  const auto& ch = m_ctx.channels;
  if (ch.child_shared(i)) {
    ch.sync();  // the child wrote its slot before the header; read the update in place
    return ch.child_up(i);
  }
  m_topology.links.recv(std::span<float>(m_update), m_children[i].rank, dist::kTagPayload);
  return m_update;
}

void Server::serve_update(std::size_t i, bool reply) {
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
    d = m_service.submit(
        {static_cast<int>(i), h.version, h.samples, h.sumsq, u, m_ctx.channels.child_shared(i), h.state_decay}, r);
  }
  m_progress.log_decision(row, d, m_service.version());
  if (m_parent && (d.outcome == Outcome::applied || d.outcome == Outcome::held)) m_parent->note_losses(h);
  if (d.outcome == Outcome::rejected_nonfinite || d.outcome == Outcome::diverged)
    spdlog::warn("rejected a non-finite update from child {} (rank {}) at version {}: inf or NaN in its {}", i, c.rank,
                 m_service.version(), dist::nonfinite_blocks(h.sumsq));
  switch (serve_after(d)) {
    case Serve::diverged:
      diverged(i);
      [[fallthrough]];
    case Serve::answer:
      // Nothing changed; the child gets the weights (or the stop, when training ended).
      if (reply) m_stopping ? send_stop(i) : answer(i);
      return;
    case Serve::wait:
      return;
    case Serve::close_round:
      round_closed(d);
      return;
    case Serve::new_version:
      break;
  }
  after_version();
  switch (reply_after_version(reply, m_stopping, too_far_ahead(i))) {
    case Reply::none:
      return;
    case Reply::stop:
      send_stop(i);
      return;
    case Reply::defer:
      defer(i, false);  // the reply is built again on release, with the weights of then
      return;
    case Reply::weights:
      m_service.fill_state(static_cast<int>(i), r);
      send_reply(i, r, flags_for(i), m_checkpoints.pending());
      return;
  }
}

void Server::round_closed(const Decision& d) {
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

}  // namespace detail

dist::MasterResult run_master(dist::RoleContext& ctx) {
  detail::Server s(ctx);
  return s.run();
}

}  // namespace mpigan::master
