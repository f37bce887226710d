// A master rank's request loop (server.hpp): hung children, and the end of training (data
// exhausted, the parent's stop, divergence, max_updates, signals, early stopping, pruning).
#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/core/stop_signal.hpp"
#include "mpigan/dist/run_files.hpp"
#include "mpigan/master/server_loop.hpp"

#include <algorithm>
#include <fstream>
#include <optional>
#include <string>

namespace mpigan::master::detail {

// ---------------------------------------------------------------- hung children
std::optional<std::size_t> Server::hung_child(double now) const {
  for (std::size_t i = 0; i < m_children.size(); ++i) {
    const Child& c = m_children[i];
    // A held child waits for its round's reply, a deferred one for the others to catch up: it is
    // silent because of the others.
    if (c.req != MPI_REQUEST_NULL && !c.stopped && !c.deferred && !m_service.held(static_cast<int>(i)) &&
        c.watch.too_long(now, m_ctx.job.dist.topology.rank_timeout_s))
      return i;
  }
  return std::nullopt;
}

namespace {

// "rank 2" or "ranks 1 and 2".
std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() > 1 ? "ranks " : "rank ";
  for (std::size_t k = 0; k < ranks.size(); ++k)
    s += fmt::format("{}{}", k == 0 ? "" : k + 1 == ranks.size() ? " and " : ", ", ranks[k]);
  return s;
}

}  // namespace

void Server::fail_hung(std::int64_t taken_at_hang) {
  const auto latest = dist::latest_checkpoint_id_or_none(m_ctx.run_dir);
  std::string why = hung_report(m_hung, m_ctx.job.dist.topology.rank_timeout_s, latest, m_ctx.run_dir);
  if (taken_at_hang >= 0 && latest == taken_at_hang) {
    std::vector<int> own;
    for (const SilentChild& h : m_hung)
      if (std::find(m_parts_by_master.begin(), m_parts_by_master.end(), h.rank) == m_parts_by_master.end())
        own.push_back(h.rank);
    why += " (taken at the hang";
    if (!m_parts_by_master.empty())
      why += fmt::format(": {}'s part{} the data position, the rule state starts afresh", rank_list(m_parts_by_master),
                         m_parts_by_master.size() > 1 ? "s hold" : " holds");
    if (!own.empty())
      why += fmt::format("{} with {}'s own part{}, written before it stopped", m_parts_by_master.empty() ? "," : ";",
                         rank_list(own), own.size() > 1 ? "s" : "");
    why += ")";
  }
  std::ofstream(m_ctx.run_dir + "/FAILED") << why << '\n';
  MPIGAN_THROW(Error, "{}", why);
}

void Server::stop_for_hung(std::size_t i, double now) {
  Child& c = m_children[i];
  m_hung.push_back({c.rank, i, c.watch.silent_for(now), c.watch.limit(m_ctx.job.dist.topology.rank_timeout_s)});
  if (!m_top || m_topology.masters > 1) fail_hung();
  c.stopped = true;  // never answered again; its receive is cancelled after serving
  m_service.child_gone(static_cast<int>(i));
  const auto v = m_service.version();
  const int group = (c.rank - m_topology.masters) / m_topology.group_size;
  if (m_stopping) {
    // The job is ending already (another child hung, or the final checkpoint waits for parts): the
    // commit must not wait for a rank that will never write.
    spdlog::error("rank {} (child {}) has sent nothing for {:.0f} s while the job ends", c.rank, i,
                  c.watch.silent_for(now));
    if (m_checkpoints.pending() >= 0 && m_checkpoints.write_part_for(group, c.last))
      m_parts_by_master.push_back(c.rank);
    return;
  }
  spdlog::error("rank {} (child {}) has sent nothing for {:.0f} s: ending the job with a checkpoint of version {}",
                c.rank, i, c.watch.silent_for(now), v);
  m_checkpoints.write(v, m_result);
  if (m_checkpoints.pending() == v) {
    // Unless the hung rank's own part of v is there (it wrote its part of the periodic checkpoint
    // v, then stopped before the others had written theirs).
    if (m_checkpoints.write_part_for(group, c.last)) m_parts_by_master.push_back(c.rank);
    m_hung_checkpoint = v;
  } else if (dist::latest_checkpoint_id_or_none(m_ctx.run_dir) == v) {
    // Committed at once: every part of version v was there, the hung rank's own included.
    m_hung_checkpoint = v;
  }
  enter_stopping(m_checkpoints.pending() == v ? v : -1);
  for (std::size_t k = 0; k < m_children.size(); ++k)
    if (m_service.held(static_cast<int>(k)) && !m_children[k].stopped) send_stop(k, true);
}

void Server::end_hung() {
  // The commit may have happened while serving already (the last part arrived): then nothing
  // is pending, and 'latest' says whether the checkpoint taken at the hang made it.
  if (m_checkpoints.pending() >= 0) m_checkpoints.wait_commit(std::max(30.0, m_ctx.job.dist.topology.rank_timeout_s));
  const bool committed =
      m_hung_checkpoint >= 0 && dist::latest_checkpoint_id_or_none(m_ctx.run_dir) == m_hung_checkpoint;
  fail_hung(committed ? m_hung_checkpoint : -1);
}

// ---------------------------------------------------------------- the end of training
void Server::maybe_all_done() {
  if (m_stopping || !std::all_of(m_children.begin(), m_children.end(), [](const Child& c) { return c.done; })) return;
  spdlog::info("every child has finished its data (version {})", m_service.version());
  if (m_top) {
    begin_stop("data exhausted");
    return;
  }
  // A sub-master tells the top master and waits for the end of training.
  if (!m_parent_stopped) parent_said(m_parent->done());
}

void Server::parent_said(const ParentLink::Reply& r) {
  if (!r.stop) {
    if (r.checkpoint >= 0) m_checkpoints.set_pending(r.checkpoint);
    return;
  }
  m_parent_stopped = true;
  enter_stopping(r.checkpoint);
}

void Server::enter_stopping(std::int64_t final_checkpoint) {
  m_stopping = true;
  m_final_checkpoint = final_checkpoint;
  // Deferred children too: their updates were applied (or they pulled), and they wait.
  for (std::size_t i = 0; i < m_children.size(); ++i) {
    Child& c = m_children[i];
    if ((c.done || c.deferred) && !c.stopped) send_stop(i);
    c.deferred = c.deferred_pull = false;
  }
}

void Server::diverged(std::size_t last_child) {
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

void Server::begin_stop(const std::string& why) {
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

void Server::after_version() {
  const auto v = m_service.version();
  if (!m_top) {
    if (v % m_ctx.job.dist.topology.submaster_every == 0) parent_said(m_parent->exchange());
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
  if (const char* spent = m_experiment.budget_spent(v, m_service.samples())) {
    begin_stop(spent);
    return;
  }
  if (m_experiment.physics.enabled && m_experiment.physics.every > 0 && v % m_experiment.physics.every == 0)
    m_progress.request_physics(m_service);
  const bool stop_validation = m_experiment.validate_every > 0 && v % m_experiment.validate_every == 0 &&
                               m_progress.validate(m_service, m_result);
  if (stop_validation || m_progress.poll_physics(m_result)) {
    m_result.stopped_early = true;
    begin_stop("early stopping");
    return;
  }
  if (m_ctx.prune && m_experiment.validate_every > 0 && v % m_experiment.validate_every == 0 && m_ctx.prune()) {
    m_result.stopped_early = true;
    begin_stop("pruned by the hyper-parameter search");
    return;
  }
  if (m_experiment.checkpoint_every > 0 && v % m_experiment.checkpoint_every == 0) m_checkpoints.write(v, m_result);
}

}  // namespace mpigan::master::detail
