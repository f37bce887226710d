// A worker's update without transport (update_builder.hpp).
#include "mpigan/worker/update_builder.hpp"

#include "mpigan/core/error.hpp"

#include <algorithm>

namespace mpigan::worker {

using dist::kNets;
using models::Net;

void put_losses(dist::Header& h, const models::StepLosses& l) {
  std::size_t n = 0;
  for (double x : {l.d_real, l.d_fake, l.g}) h.losses[n++] = x;
  for (const auto* hv : {&l.d_real_heads, &l.d_fake_heads, &l.g_heads})
    for (double x : *hv)
      if (n < dist::kMaxLosses) h.losses[n++] = x;
  h.n_losses = static_cast<std::int32_t>(n);
}

UpdateBuilder::UpdateBuilder(const algos::Algorithm& algorithm, train::Session& session,
                             const train::ExperimentConfig& e, const dist::PayloadLayout& layout, int siblings)
    : m_session(session),
      m_layout(layout),
      m_mode(algorithm.worker_mode()),
      m_payload_kind(algorithm.payload()),
      m_host(make_backend("cpu")) {
  m_payload.resize(layout.total());
  m_reply.resize(layout.total());
  m_local.resize(layout.g + layout.d);
  m_pulled.resize(layout.g + layout.d);
  const nn::Network* nets[2] = {&session.model->generator, &session.model->discriminator};
  const nn::OptimizerConfig* opts[2] = {&e.opt_generator, &e.opt_discriminator};
  const char* names[2] = {"generator", "discriminator"};
  for (Net n : kNets) {
    const std::size_t k = dist::index(n);
    m_rules[k] = algorithm.make_worker({*m_host, nets[k]->weights(), *opts[k], siblings, names[k], m_lr_factor.get()});
    m_lr[k] = opts[k]->lr;
    if (m_mode == algos::WorkerMode::gradients) m_acc[k] = ParameterSet::like(nets[k]->weights(), *session.backend);
  }
}

UpdateBuilder::~UpdateBuilder() = default;

void UpdateBuilder::follow_schedule(double factor, const std::array<nn::Optimizer*, 2>& local) {
  *m_lr_factor = factor;
  for (Net n : kNets)
    if (nn::Optimizer* o = local[dist::index(n)]) o->set_lr(m_lr[dist::index(n)] * factor);
}

void UpdateBuilder::begin_phase() {
  if (m_mode != algos::WorkerMode::gradients) return;
  for (auto& acc : m_acc) {
    Tensor a = acc.flat();
    m_session.backend->fill(a, 0.0f);
  }
}

void UpdateBuilder::accumulate(Net n) {
  auto& m = *m_session.model;
  nn::Network& net = n == Net::generator ? m.generator : m.discriminator;
  Tensor a = m_acc[dist::index(n)].flat();
  m_session.backend->axpby(1.0f, net.grads().flat(), 1.0f, a);
}

std::span<float> UpdateBuilder::build() {
  auto& m = *m_session.model;
  auto& be = *m_session.backend;
  std::span<float> p(m_payload);
  const nn::Network* nets[2] = {&m.generator, &m.discriminator};
  for (Net n : kNets) {
    const std::size_t k = dist::index(n);
    const ParameterSet& src = m_payload_kind == algos::Payload::gradient ? m_acc[k] : nets[k]->weights();
    train::copy_to_host(be, src, m_layout.block(n, p));
    train::copy_to_host(be, nets[k]->state(), m_layout.state_block(n, p));
    m_state_decay[k] = nets[k]->state_decay();
    // The local weights on the host for the merge.
    train::copy_to_host(be, nets[k]->weights(), m_layout.block(n, std::span<float>(m_local)));
  }
  if (m_payload_kind == algos::Payload::delta)
    for (std::size_t i = 0; i < m_layout.g + m_layout.d; ++i) p[i] -= m_pulled[i];
  return p;
}

std::array<algos::RuleStats, 2> UpdateBuilder::before_send(std::span<const float> master_now) {
  std::array<algos::RuleStats, 2> stats;
  std::span<float> p(m_payload);
  for (Net n : kNets)
    stats[dist::index(n)] = rule(n).before_send(
        m_layout.block(n, p), master_now.empty() ? std::span<const float>() : m_layout.block(n, master_now),
        m_layout.block(n, std::span<const float>(m_pulled)));
  return stats;
}

void UpdateBuilder::merge(std::span<const float> reply) {
  std::span<float> local(m_local);
  for (Net n : kNets)
    rule(n).after_reply(m_layout.block(n, local), m_layout.block(n, reply),
                        m_layout.block(n, std::span<const float>(m_payload)));
  // The new weights, and the reply's canonical BN state, in the reply buffer.
  if (reply.data() != m_reply.data()) std::copy(reply.begin(), reply.end(), m_reply.begin());
  std::copy(m_local.begin(), m_local.end(), m_reply.begin());
}

void UpdateBuilder::load() {
  auto& m = *m_session.model;
  auto& be = *m_session.backend;
  std::span<const float> rep(m_reply);
  nn::Network* nets[2] = {&m.generator, &m.discriminator};
  for (Net n : kNets) {
    train::copy_from_host(be, m_layout.block(n, rep), nets[dist::index(n)]->weights());
    train::copy_from_host(be, m_layout.state_block(n, rep), nets[dist::index(n)]->state());
    nets[dist::index(n)]->reset_state_decay();
  }
  std::copy(rep.begin(), rep.begin() + static_cast<std::ptrdiff_t>(m_pulled.size()), m_pulled.begin());
}

void UpdateBuilder::set_local_from_reply() {
  std::copy(m_reply.begin(), m_reply.begin() + static_cast<std::ptrdiff_t>(m_local.size()), m_local.begin());
}

namespace {

void read_into(const train::CheckpointReader& r, const std::string& name, std::vector<float>& out) {
  std::vector<float> v = r.floats(name);
  MPIGAN_CHECK(v.size() == out.size(), "'{}': '{}' holds {} values; this model needs {}", r.path(), name, v.size(),
               out.size());
  out = std::move(v);
}

const char* state_rule_key(Net n) {
  return n == Net::generator ? "/rule/generator" : "/rule/discriminator";
}

}  // namespace

void UpdateBuilder::save_state(train::CheckpointWriter& w, const std::string& prefix) const {
  w.put(prefix + "/payload", std::span<const float>(m_payload));
  w.put(prefix + "/local", std::span<const float>(m_local));
  w.put(prefix + "/pulled", std::span<const float>(m_pulled));
  w.put(prefix + "/state_decay", std::span<const double>(m_state_decay));
  for (Net n : kNets) m_rules[dist::index(n)]->save(w, prefix + state_rule_key(n));
}

void UpdateBuilder::load_state(const train::CheckpointReader& r, const std::string& prefix) {
  read_into(r, prefix + "/payload", m_payload);
  read_into(r, prefix + "/local", m_local);
  read_into(r, prefix + "/pulled", m_pulled);
  const auto decay = r.doubles(prefix + "/state_decay", 2);
  m_state_decay = {decay[0], decay[1]};
  for (Net n : kNets) m_rules[dist::index(n)]->load(r, prefix + state_rule_key(n));
}

}  // namespace mpigan::worker
