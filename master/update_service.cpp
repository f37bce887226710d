// The master's update service: verdicts, rounds, divergence, the canonical model (update_service.hpp).
#include "mpigan/master/update_service.hpp"

#include "mpigan/algos/rules.hpp"
#include "mpigan/core/error.hpp"
#include "mpigan/train/session.hpp"

#include <algorithm>
#include <cmath>

namespace mpigan::master {

using dist::kNets;
using models::Net;

const char* to_string(Outcome o) {
  switch (o) {
    case Outcome::applied:
      return "applied";
    case Outcome::held:
      return "held";
    case Outcome::rejected_nonfinite:
      return "rejected_nonfinite";
    case Outcome::rejected_by_rule:
      return "rejected_by_rule";
    case Outcome::diverged:
      return "diverged";
  }
  return "?";
}

UpdateService::Networks UpdateService::Networks::of(const models::GanModel& m, Backend& backend,
                                                    const train::ExperimentConfig& e) {
  Networks n;
  n.weights = {&m.generator.weights(), &m.discriminator.weights()};
  n.state[0].resize(m.generator.state().size());
  n.state[1].resize(m.discriminator.state().size());
  train::copy_to_host(backend, m.generator.state(), n.state[0]);
  train::copy_to_host(backend, m.discriminator.state(), n.state[1]);
  n.backend = &backend;
  n.optimizers = {e.opt_generator, e.opt_discriminator};
  return n;
}

UpdateService::UpdateService(const algos::Algorithm& algorithm, const Networks& networks, const Options& options,
                             ReplySlot reply_slot)
    : m_host(make_backend("cpu")),
      m_layout{networks.weights[0]->size(), networks.weights[1]->size(), networks.state[0].size(),
               networks.state[1].size()},
      m_children(static_cast<std::size_t>(options.children)),
      m_reply_slot(std::move(reply_slot)),
      m_synchronous(algorithm.synchronous()),
      m_fuse_first(options.fuse_first_reply),
      m_pull_push(!options.tree_top && algorithm.exchange() == algos::Exchange::pull_push),
      m_max_nonfinite(options.max_nonfinite) {
  m_schedule = options.schedule;
  MPIGAN_CHECK(options.children >= 1, "an update service needs at least one child, got {}", options.children);
  const char* names[2] = {"generator", "discriminator"};
  const double tree_scale = options.tree_scale > 0 ? options.tree_scale : 1.0 / options.children;
  for (Net n : kNets) {
    const std::size_t k = dist::index(n);
    NetSlot& slot = m_nets[k];
    slot.theta = ParameterSet::like(*networks.weights[k], *m_host);
    train::copy_to_host(*networks.backend, *networks.weights[k], weights(n));
    slot.rule = options.tree_top ? algos::make_tree_master(slot.theta, m_synchronous, static_cast<float>(tree_scale))
                                 : algorithm.make_master(slot.theta, {*m_host, slot.theta, networks.optimizers[k],
                                                                      options.children, names[k], m_lr_factor.get()});
  }
  m_state.resize(m_layout.g_state + m_layout.d_state);
  for (Net n : kNets) {
    const auto& st = networks.state[dist::index(n)];
    std::copy(st.begin(), st.end(), m_layout.in_state(n, state()).begin());
  }
  for (auto& c : m_children) c.sent = c.computed_from = m_state;
}

std::int64_t UpdateService::nonfinite_limit() const {
  return m_max_nonfinite > 0 ? m_max_nonfinite
                             : std::max<std::int64_t>(10, 2 * static_cast<std::int64_t>(m_children.size()));
}

void UpdateService::pull(int child, std::span<float> out) {
  for (Net n : kNets) m_nets[dist::index(n)].rule->pull(child, m_layout.block(n, out));
  if (m_pull_push) {
    // The update that follows this pull was computed from the state of the previous one; the
    // child continues from this one after it.
    ChildState& c = m_children[static_cast<std::size_t>(child)];
    std::swap(c.computed_from, c.sent);
  }
  fill_state(child, out);
}

void UpdateService::fill_state(int child, std::span<float> reply) {
  std::copy(m_state.begin(), m_state.end(), m_layout.all_state(reply).begin());
  ChildState& c = m_children[static_cast<std::size_t>(child)];
  c.sent.assign(m_state.begin(), m_state.end());
}

std::array<double, 2> UpdateService::report_state(std::span<float> out) const {
  std::copy(m_state.begin(), m_state.end(), m_layout.all_state(out).begin());
  return m_state_decay;
}

void UpdateService::set_state(std::span<const float> state) {
  MPIGAN_CHECK(state.size() == m_state.size(), "BatchNorm state of {} values; the model has {}", state.size(),
               m_state.size());
  std::copy(state.begin(), state.end(), m_state.begin());
  m_state_decay = {1.0, 1.0};
}

void UpdateService::merge_state(ChildState& c, std::span<const float> reported, const std::array<double, 2>& decay) {
  // The state the child's statistics started from: the one last sent, or for a pull-then-push
  // exchange the one sent before its latest pull.
  // When nothing was merged since, s - s_p is exactly 0 and the child's report is taken bit for bit.
  const std::vector<float>& from = m_pull_push ? c.computed_from : c.sent;
  for (Net n : kNets) {
    const std::size_t k = dist::index(n);
    const auto s = m_layout.in_state(n, state());
    const auto w = m_layout.in_state(n, reported);
    const auto p = m_layout.in_state(n, std::span<const float>(from));
    for (std::size_t i = 0; i < s.size(); ++i)
      s[i] = static_cast<float>(w[i] + decay[k] * (static_cast<double>(s[i]) - p[i]));
    m_state_decay[k] *= decay[k];
  }
}

void UpdateService::round_reply(int child, std::span<float> reply, bool weights_written) {
  if (!weights_written)
    for (Net n : kNets) m_nets[dist::index(n)].rule->reply_after_round(child, m_layout.block(n, reply));
  fill_state(child, reply);
}

Decision UpdateService::submit(const Incoming& u, std::span<float> reply) {
  MPIGAN_CHECK(u.child >= 0 && u.child < children(), "update from child {}; this master has {} children", u.child,
               children());
  MPIGAN_CHECK(u.payload.size() == m_layout.total(), "update of {} values; the payload has {}", u.payload.size(),
               m_layout.total());
  Decision d;
  follow_schedule();
  d.lr_factor = lr_factor();
  // The sender computed the blocks' sums of squares as it copied the update out: a NaN or an
  // infinity anywhere makes its block's sum non-finite.
  if (!std::all_of(u.sumsq.begin(), u.sumsq.end(), [](double s) { return std::isfinite(s); })) {
    ++m_rejected;
    d.outcome = ++m_nonfinite_run >= nonfinite_limit() ? Outcome::diverged : Outcome::rejected_nonfinite;
    return d;
  }
  m_nonfinite_run = 0;
  ChildState& c = m_children[static_cast<std::size_t>(u.child)];
  const auto st = m_layout.all_state(u.payload);
  const algos::UpdateMeta meta{u.child, u.pulled, m_version, u.samples, u.stable};
  std::array<algos::Verdict, 2> verdict{};
  for (Net n : kNets) {
    const std::size_t k = dist::index(n);
    algos::RuleStats stats;
    verdict[k] = m_nets[k].rule->submit(meta, m_layout.block(n, u.payload),
                                        reply.empty() ? reply : m_layout.block(n, reply), stats);
    d.scale[k] = stats.scale;
  }
  MPIGAN_CHECK(verdict[0] == verdict[1], "the update rule gave different verdicts for G and D");
  if (verdict[0] == algos::Verdict::rejected) {
    // The rule declined it (e.g. too stale): nothing changed; the child gets the weights.
    ++m_rejected;
    d.outcome = Outcome::rejected_by_rule;
    return d;
  }
  m_samples += u.samples;
  if (verdict[0] == algos::Verdict::held) {
    d.outcome = Outcome::held;
    c.report.assign(st.begin(), st.end());
    c.report_decay = u.state_decay;
    m_held.push_back(u.child);
    if (round_ready()) {
      const Decision r = close_round();
      d.round = r.round;
      d.first_reply_written = r.first_reply_written;
    }
    return d;
  }
  ++m_applied;
  ++c.applied;
  merge_state(c, st, u.state_decay);
  ++m_version;
  return d;
}

Decision UpdateService::child_done(int child) {
  m_children[static_cast<std::size_t>(child)].done = true;
  if (m_synchronous && round_ready()) return close_round();
  return {};
}

Serve serve_after(const Decision& d) {
  switch (d.outcome) {
    case Outcome::rejected_nonfinite:
    case Outcome::rejected_by_rule:
      return Serve::answer;
    case Outcome::diverged:
      return Serve::diverged;
    case Outcome::held:
      return d.round.empty() ? Serve::wait : Serve::close_round;
    case Outcome::applied:
      break;
  }
  return Serve::new_version;
}

Reply reply_after_version(bool wants_reply, bool stopping, bool beyond_lead) {
  if (!wants_reply) return Reply::none;
  if (stopping) return Reply::stop;
  return beyond_lead ? Reply::defer : Reply::weights;
}

std::int64_t UpdateService::lead(int child) const {
  const std::int64_t mine = m_children[static_cast<std::size_t>(child)].applied;
  std::int64_t least = mine;
  for (const auto& c : m_children)
    if (!c.done && !c.gone) least = std::min(least, c.applied);
  return mine - least;
}

bool UpdateService::round_ready() const {
  int active = 0;
  for (const auto& c : m_children) active += !c.done;
  return !m_held.empty() && m_nets[0].rule->round_ready(active);
}

void UpdateService::follow_schedule() {
  if (m_schedule) *m_lr_factor = m_schedule(m_version, m_samples);
}

Decision UpdateService::close_round() {
  follow_schedule();
  Decision d;
  d.lr_factor = lr_factor();
  const int first = m_held.front();
  const std::span<float> first_reply = m_fuse_first ? m_reply_slot(first) : std::span<float>();
  std::array<bool, 2> wrote{};
  for (Net n : kNets) {
    const std::size_t k = dist::index(n);
    wrote[k] = m_nets[k].rule->close_round(first, first_reply.empty() ? first_reply : m_layout.block(n, first_reply));
  }
  d.first_reply_written = wrote[0] && wrote[1] && !first_reply.empty();
  MPIGAN_CHECK(d.first_reply_written || first_reply.empty() || !(wrote[0] || wrote[1]),
               "the update rule wrote the first reply for one network only");
  m_applied += static_cast<std::int64_t>(m_held.size());
  // The round's statistics in child order (not arrival order): reproducible.
  std::vector<int> order = m_held;
  std::sort(order.begin(), order.end());
  for (int i : order) {
    ChildState& c = m_children[static_cast<std::size_t>(i)];
    merge_state(c, c.report, c.report_decay);
  }
  ++m_version;
  d.round = std::move(m_held);
  m_held.clear();
  return d;
}

void UpdateService::save(train::CheckpointWriter& w, const std::string& prefix) const {
  const char* names[2] = {"generator", "discriminator"};
  for (Net n : kNets) {
    const std::size_t k = dist::index(n);
    train::save_parameters(w, fmt::format("{}model/{}/weights", prefix, names[k]), m_nets[k].theta, *m_host);
    m_nets[k].rule->save(w, fmt::format("{}rule/{}", prefix, names[k]));
  }
  w.put(prefix + "model/state", m_state);
  w.put_int(prefix + "progress/version", m_version);
}

void UpdateService::load(const train::CheckpointReader& r, const std::string& path, const std::string& prefix) {
  const char* names[2] = {"generator", "discriminator"};
  for (Net n : kNets) {
    const std::size_t k = dist::index(n);
    train::load_parameters(r, fmt::format("{}model/{}/weights", prefix, names[k]), m_nets[k].theta, *m_host);
  }
  const auto st = r.floats(prefix + "model/state");
  MPIGAN_CHECK(st.size() == m_state.size(), "checkpoint '{}': BatchNorm state of {} values, model has {}", path,
               st.size(), m_state.size());
  set_state(st);
  for (Net n : kNets) m_nets[dist::index(n)].rule->load(r, fmt::format("{}rule/{}", prefix, names[dist::index(n)]));
  m_version = r.get_int(prefix + "progress/version");
  follow_schedule();
}

void UpdateService::save_exact(train::CheckpointWriter& w, const std::string& prefix) const {
  MPIGAN_CHECK(m_held.empty(), "the update service's exact state is taken between rounds; {} updates are held",
               m_held.size());
  w.put(prefix + "/counts", std::vector<double>{static_cast<double>(m_samples), static_cast<double>(m_applied),
                                                static_cast<double>(m_rejected), static_cast<double>(m_nonfinite_run)});
  w.put(prefix + "/state_decay", std::span<const double>(m_state_decay));
  w.put(prefix + "/lr_factor", std::vector<double>{*m_lr_factor});
  for (std::size_t i = 0; i < m_children.size(); ++i) {
    const ChildState& c = m_children[i];
    const std::string at = fmt::format("{}/child{}", prefix, i);
    w.put(at + "/flags", std::vector<double>{c.done ? 1.0 : 0.0, c.gone ? 1.0 : 0.0, static_cast<double>(c.applied)});
    w.put(at + "/sent", std::span<const float>(c.sent));
    w.put(at + "/computed_from", std::span<const float>(c.computed_from));
  }
}

void UpdateService::load_exact(const train::CheckpointReader& r, const std::string& prefix) {
  const auto counts = r.doubles(prefix + "/counts", 4);
  m_samples = static_cast<std::int64_t>(counts[0]);
  m_applied = static_cast<std::int64_t>(counts[1]);
  m_rejected = static_cast<std::int64_t>(counts[2]);
  m_nonfinite_run = static_cast<std::int64_t>(counts[3]);
  const auto decay = r.doubles(prefix + "/state_decay", 2);
  m_state_decay = {decay[0], decay[1]};
  for (std::size_t i = 0; i < m_children.size(); ++i) {
    ChildState& c = m_children[i];
    const std::string at = fmt::format("{}/child{}", prefix, i);
    const auto flags = r.doubles(at + "/flags", 3);
    c.done = flags[0] != 0;
    c.gone = flags[1] != 0;
    c.applied = static_cast<std::int64_t>(flags[2]);
    c.sent = r.floats(at + "/sent");
    c.computed_from = r.floats(at + "/computed_from");
    MPIGAN_CHECK(c.sent.size() == m_state.size() && c.computed_from.size() == m_state.size(),
                 "'{}': {} holds a BatchNorm state of {} values; the model has {}", r.path(), at, c.sent.size(),
                 m_state.size());
  }
  // Set from outside (a sub-master's parent) the factor is part of the state; states written
  // before it was kept hold none (a factor of 1).
  if (!m_schedule) *m_lr_factor = r.has(prefix + "/lr_factor") ? r.doubles(prefix + "/lr_factor", 1)[0] : 1.0;
  follow_schedule();
}

}  // namespace mpigan::master
