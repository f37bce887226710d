// The research sandbox's masters (sandbox_loop.hpp): serving updates and pulls, synchronous
// rounds, bounded staleness, a tree's exchanges with the top master, and the end of training —
// decided by the real update service, in the order master/server.cpp and master/parent_link.cpp
// take them.
#include "mpigan/core/log.hpp"
#include "mpigan/core/stop_signal.hpp"
#include "mpigan/sandbox/sandbox_loop.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

namespace mpigan::sandbox::detail {

using master::Decision;
using master::Outcome;

/// An update arrives (push then pull): the service decides; the reply follows its service time.
void Sandbox::serve_update(VirtualWorker& w, double arrived, bool reply) {
  VirtualMaster& m = master_of(w);
  if (reply) w.update->before_send({});
  const master::Incoming in = incoming(w);
  master::LogRow row = row_for(w, arrived);
  const std::int64_t base = w.top_base;  // of the weights this update was computed on
  ++w.served;
  const std::span<float> r = reply ? w.update->reply_buffer() : std::span<float>();
  const Decision d = m.service->submit(in, r);
  if (reply) note_base(w);  // the reply's weights are written: before any exchange with the top
  m.free = m_now + m_options.master_s;
  m.progress->log_decision(row, d, m.service->version());
  if (m.change && (d.outcome == Outcome::applied || d.outcome == Outcome::held)) {
    m.change->note_losses(w.header);
    m.bases.push_back(base);
  }
  switch (master::serve_after(d)) {
    case master::Serve::diverged:
      return diverged(m, w.child);
    case master::Serve::answer:
      if (reply) send_weights(w);
      return;
    case master::Serve::wait:
      return;
    case master::Serve::close_round:
      return round_closed(m, d);
    case master::Serve::new_version:
      break;
  }
  after_version(m, [this, &w, &m, reply] {
    switch (master::reply_after_version(reply, m_stopping, too_far_ahead(w))) {
      case master::Reply::none:
      case master::Reply::stop:  // the stop reaches every worker at the end of the run
        return;
      case master::Reply::defer:
        w.deferred = true;  // answered on release with the weights of then, as the real master does
        return;
      case master::Reply::weights:
        m.service->fill_state(w.child, w.update->reply_buffer());
        reply_to(w);
        return;
    }
  });
}

/// topology.max_lead, decided as the real master does (UpdateService::lead), at the worker's master.
bool Sandbox::too_far_ahead(const VirtualWorker& w) {
  return master_of(w).service->beyond_lead(w.child, m_job.dist.topology.max_lead);
}

void Sandbox::release_deferred() {
  for (bool again = true; again && !m_stopping && m_pause.empty();) {
    again = false;
    for (auto& w : m_workers) {
      VirtualMaster& m = master_of(w);
      if (!w.deferred || m.blocked || too_far_ahead(w)) continue;
      w.deferred = false;
      ++m_deferred;
      again = true;
      m.free = std::max(m.free, m_now);
      if (std::exchange(w.deferred_pull, false)) {
        serve_pull(w, w.deferred_at);
      } else {
        send_weights(w);
      }
      if (m_stopping || !m_pause.empty()) return;
    }
  }
}

/// Answer the worker with its master's current weights (Server::send_weights).
void Sandbox::send_weights(VirtualWorker& w) {
  master_of(w).service->pull(w.child, w.update->reply_buffer());
  note_base(w);
  reply_to(w);
}

/// Send the reply in the worker's buffer: its master's link is busy for the transfer.
void Sandbox::reply_to(VirtualWorker& w) {
  VirtualMaster& m = master_of(w);
  w.lr_factor = m.service->lr_factor();  // what the reply's header carries
  m.free += m_options.network.transfer(m_bytes);
  deliver(w, m.free);
}

/// Pull then push (GEM): the master sends its current weights, then waits for this worker's
/// update, which the worker transforms against them, and applies it; no reply follows.
void Sandbox::serve_pull(VirtualWorker& w, double arrived) {
  VirtualMaster& m = master_of(w);
  m.service->pull(w.child, w.update->reply_buffer());
  w.lr_factor = m.service->lr_factor();  // the pull's reply header
  note_base(w);
  const double pulled_at = m_now + m_options.network.transfer(m_bytes);
  const std::int64_t pulled_version = m.service->version();
  w.update->before_send(w.update->reply_buffer());
  const double pushed_at = pulled_at + m_options.network.transfer(m_bytes);
  set_now(pushed_at);  // the master waits for this worker's update, as the real one does
  w.header.wait_s = pulled_at - w.sent_at;
  serve_update(w, arrived, false);
  if (m_stopping) return;
  // The worker goes on at once; its master may still be exchanging with the top.
  w.update->merge(w.update->reply_buffer());
  w.version = pulled_version;
  follow_schedule(w);
  start_phase(w, pushed_at);
}

void Sandbox::worker_done(VirtualWorker& w) {
  VirtualMaster& m = master_of(w);
  spdlog::debug("virtual worker {} finished its data at step {}", w.id, w.steps);
  w.done = true;
  ++m.workers_done;
  ++m_workers_done;
  const Decision d = m.service->child_done(w.child);
  if (!d.round.empty()) round_closed(m, d);
  if (m_stopping) return;
  if (!tree()) {
    if (m_workers_done == m_options.workers) {
      spdlog::info("every virtual worker has finished its data (version {})", m.service->version());
      begin_stop("data exhausted");
    }
    return;
  }
  if (!m.blocked && m.workers_done == static_cast<int>(m.workers.size())) submaster_done(m);
}

void Sandbox::round_closed(VirtualMaster& m, const Decision& d) {
  m.progress->log_round(m.service->version());
  after_version(m, [this, &m, d] {
    if (m_stopping) return;
    for (int k : d.round) {
      VirtualWorker& w = m_workers[static_cast<std::size_t>(m.workers[static_cast<std::size_t>(k)])];
      m.service->round_reply(k, w.update->reply_buffer(), d.first_reply_written && k == d.round.front());
      note_base(w);
      reply_to(w);
    }
  });
}

void Sandbox::after_version(VirtualMaster& m, std::function<void()> next) {
  if (m.rank > 0) {
    if (m.service->version() % m_job.dist.topology.submaster_every == 0) return exchange_with_top(m, std::move(next));
    return next();
  }
  after_top_version();
  next();
}

void Sandbox::after_top_version() {
  VirtualMaster& t = top();
  const auto v = t.service->version();
  t.progress->after_version(v, t.service->samples());
  // The run finishes the event in hand and saves its state before it stops (Sandbox::run).
  const auto stop = [this](const std::string& why) { m_pause = why; };
  if (stop_signal() != 0) {
    m_result.master.stopped_by_signal = stop_signal();
    return stop(signal_name(stop_signal()) + " received");
  }
  if (const char* spent = m_experiment.budget_spent(v, t.service->samples())) return stop(spent);
  // checkpoint.every: a checkpoint and the state to resume from, once the event is over.
  if (m_experiment.checkpoint_every > 0 && v % m_experiment.checkpoint_every == 0) m_save_due = true;
  bool early = false;
  if (m_experiment.physics.enabled && m_experiment.physics.every > 0 && v % m_experiment.physics.every == 0)
    early = t.progress->physics_now(*t.service, m_result.master);
  if (m_experiment.validate_every > 0 && v % m_experiment.validate_every == 0)
    early = t.progress->validate(*t.service, m_result.master) || early;
  if (early) {
    m_result.master.stopped_early = true;
    begin_stop("early stopping");
  }
}

/// A sub-master sends the top its change since its last exchange (master/parent_link.cpp's
/// exchange()) and waits: the top adds it (asynchronous) or holds it for a round of every
/// sub-master (synchronous), then answers with its weights, which the sub-master continues from.
void Sandbox::exchange_with_top(VirtualMaster& sub, std::function<void()> next) {
  VirtualMaster& t = top();
  sub.blocked = true;
  sub.resume = std::move(next);
  dist::Header h;
  h.kind = dist::Kind::update;
  h.child = sub.rank - 1;
  h.version = sub.change->parent_version();
  h.state_decay = sub.change->build(*sub.service, sub.up);
  h.samples = sub.change->push_samples(*sub.service);
  sub.change->put_losses(h);
  h.sumsq = dist::block_sums_of_squares(sub.up, m_layout);
  const double arrived = sub.free + m_options.network.transfer(m_bytes);
  set_now(std::max(arrived, t.free));
  const master::LogRow row{
      h, h.child, sub.rank, t.service->version(), std::sqrt(h.sumsq[0]), std::sqrt(h.sumsq[1]), m_now - arrived};
  const Decision d = t.service->submit({h.child, h.version, h.samples, h.sumsq, sub.up, true, h.state_decay}, sub.down);
  t.free = m_now + m_options.master_s;
  t.progress->log_decision(row, d, t.service->version());
  const std::vector<std::int64_t> bases = std::exchange(sub.bases, {});
  if (d.outcome == Outcome::applied || d.outcome == Outcome::held)  // a rejected change carries none
    for (const std::int64_t base : bases) {
      const auto s = static_cast<std::size_t>(std::max<std::int64_t>(0, row.version - base));
      if (m_canonical.size() <= s) m_canonical.resize(s + 1, 0);
      ++m_canonical[s];
    }
  switch (master::serve_after(d)) {
    case master::Serve::diverged:
      return diverged(t, h.child);
    case master::Serve::answer:
      t.service->pull(h.child, sub.down);
      return answer_submaster(sub);
    case master::Serve::wait:
      return;
    case master::Serve::close_round:
      return top_round_closed(d);
    case master::Serve::new_version:
      break;
  }
  after_top_version();
  // A sub-master is never deferred (max_lead bounds workers) and its stop comes with the end.
  if (master::reply_after_version(true, m_stopping, false) != master::Reply::weights) return;
  t.service->fill_state(h.child, sub.down);
  answer_submaster(sub);
}

void Sandbox::top_round_closed(const Decision& d) {
  VirtualMaster& t = top();
  t.progress->log_round(t.service->version());
  after_top_version();
  if (m_stopping) return;
  for (int k : d.round) {
    VirtualMaster& sub = *m_masters[static_cast<std::size_t>(k) + 1];
    t.service->round_reply(k, sub.down, d.first_reply_written && k == d.round.front());
    answer_submaster(sub);
  }
}

/// The top's reply (in sub.down) reaches the sub-master: it takes the top's weights and state, its
/// workers' waiting arrivals are served from then on, and it does what waited for the reply.
void Sandbox::answer_submaster(VirtualMaster& sub) {
  VirtualMaster& t = top();
  t.free += m_options.network.transfer(m_bytes);
  sub.change->adopt(*sub.service, sub.down, t.service->version());
  sub.service->set_lr_factor(t.service->lr_factor());  // the factor the top's reply carries
  sub.free = t.free;
  sub.blocked = false;
  for (const Event& e : sub.waiting) m_events.push(e);  // their creation order still breaks ties
  sub.waiting.clear();
  set_now(sub.free);
  if (auto next = std::exchange(sub.resume, nullptr)) next();
  if (!m_stopping && !sub.done && !sub.blocked && sub.workers_done == static_cast<int>(sub.workers.size()))
    submaster_done(sub);
}

/// Every worker of @p sub finished its data: it tells the top (its change since the last exchange
/// never reaches it, as in a real job) and waits for the stop.
void Sandbox::submaster_done(VirtualMaster& sub) {
  sub.done = sub.blocked = true;
  ++m_submasters_done;
  const Decision d = top().service->child_done(sub.rank - 1);
  if (!d.round.empty()) top_round_closed(d);
  if (!m_stopping && m_submasters_done == static_cast<int>(m_masters.size()) - 1) {
    spdlog::info("every virtual worker has finished its data (version {})", top().service->version());
    begin_stop("data exhausted");
  }
}

void Sandbox::diverged(const VirtualMaster& m, int child) {
  const auto v = top().service->version();
  const std::string from =
      m.rank > 0 ? fmt::format("virtual worker {} of sub-master {}", m.workers[static_cast<std::size_t>(child)], m.rank)
      : tree()   ? fmt::format("sub-master {}", child + 1)
                 : fmt::format("virtual worker {}", child);
  m_result.master.failure = fmt::format(
      "training diverged: {} non-finite updates in a row (the last from {}) at version {}; the weights of version {} "
      "are finite. Lower the learning rate (optimizer.lr, or algorithm.lr for gem)",
      m.service->nonfinite_run(), from, v, v);
  spdlog::error("{}", m_result.master.failure);
  begin_stop("diverged");
}

void Sandbox::begin_stop(const std::string& why) {
  if (m_stopping) return;
  m_stopping = true;
  VirtualMaster& t = top();
  const auto v = t.service->version();
  spdlog::info("sandbox: stopping at version {} (simulated {:.1f} s): {}", v, m_latest, why);
  if (t.progress->validated_at() != v && stop_signal() == 0) t.progress->validate(*t.service, m_result.master);
  if (m_options.final_checkpoint) write_checkpoint(v);
}

}  // namespace mpigan::sandbox::detail
