// A sub-master's change against its parent (parent_change.hpp).
#include "mpigan/master/parent_change.hpp"

#include "mpigan/core/error.hpp"

#include <algorithm>

namespace mpigan::master {

using dist::kNets;

ParentChange::ParentChange(const UpdateService& service) {
  for (auto n : kNets) {
    const auto w = service.weights(n);
    m_pulled[dist::index(n)].assign(w.begin(), w.end());
  }
}

std::array<double, 2> ParentChange::build(const UpdateService& service, std::span<float> out) const {
  const auto& layout = service.layout();
  for (auto n : kNets) {
    const auto w = service.weights(n);
    const auto& pulled = m_pulled[dist::index(n)];
    auto block = layout.block(n, out);
    for (std::size_t k = 0; k < w.size(); ++k) block[k] = w[k] - pulled[k];
  }
  return service.report_state(out);
}

std::int64_t ParentChange::push_samples(const UpdateService& service) {
  const std::int64_t s = service.samples() - m_samples_at_push;
  m_samples_at_push = service.samples();
  m_last_push = s;
  return s;
}

void ParentChange::unpush_samples() {
  m_samples_at_push -= m_last_push;
  m_last_push = 0;
}

void ParentChange::note_losses(const dist::Header& child) {
  if (child.n_losses <= 0) return;
  if (m_noted == 0) m_n_losses = child.n_losses;
  for (std::int32_t k = 0; k < std::min(m_n_losses, child.n_losses); ++k)
    m_loss_sum[static_cast<std::size_t>(k)] += child.losses[static_cast<std::size_t>(k)];
  ++m_noted;
}

void ParentChange::put_losses(dist::Header& h) {
  h.n_losses = m_noted > 0 ? m_n_losses : 0;
  for (std::int32_t k = 0; k < h.n_losses; ++k)
    h.losses[static_cast<std::size_t>(k)] = m_loss_sum[static_cast<std::size_t>(k)] / static_cast<double>(m_noted);
  m_loss_sum.fill(0.0);
  m_noted = 0;
}

void ParentChange::adopt(UpdateService& service, std::span<const float> parent, std::int64_t version) {
  const auto& layout = service.layout();
  for (auto n : kNets) {
    const auto b = layout.block(n, parent);
    std::copy(b.begin(), b.end(), service.weights(n).begin());
    m_pulled[dist::index(n)].assign(b.begin(), b.end());
  }
  service.set_state(layout.all_state(parent));
  m_parent_version = version;
}

void ParentChange::rebase(UpdateService& service, std::span<const float> parent, std::int64_t version) {
  const auto& layout = service.layout();
  for (auto n : kNets) {
    const auto p = layout.block(n, parent);
    auto w = service.weights(n);
    auto& pulled = m_pulled[dist::index(n)];
    for (std::size_t k = 0; k < w.size(); ++k) w[k] = p[k] + (w[k] - pulled[k]);
    pulled.assign(p.begin(), p.end());
  }
  m_parent_version = version;
}

void ParentChange::save_exact(train::CheckpointWriter& w, const std::string& prefix) const {
  w.put(prefix + "/pulled_generator", std::span<const float>(m_pulled[0]));
  w.put(prefix + "/pulled_discriminator", std::span<const float>(m_pulled[1]));
  w.put(prefix + "/counts",
        std::vector<double>{static_cast<double>(m_parent_version), static_cast<double>(m_samples_at_push),
                            static_cast<double>(m_last_push), static_cast<double>(m_n_losses),
                            static_cast<double>(m_noted)});
  w.put(prefix + "/loss_sum", std::span<const double>(m_loss_sum));
}

void ParentChange::load_exact(const train::CheckpointReader& r, const std::string& prefix) {
  for (std::size_t k = 0; k < 2; ++k) {
    auto v = r.floats(prefix + (k == 0 ? "/pulled_generator" : "/pulled_discriminator"));
    MPIGAN_CHECK(v.size() == m_pulled[k].size(), "'{}': {} holds {} weights; this model has {}", r.path(), prefix,
                 v.size(), m_pulled[k].size());
    m_pulled[k] = std::move(v);
  }
  const auto c = r.doubles(prefix + "/counts", 5);
  m_parent_version = static_cast<std::int64_t>(c[0]);
  m_samples_at_push = static_cast<std::int64_t>(c[1]);
  m_last_push = static_cast<std::int64_t>(c[2]);
  m_n_losses = static_cast<std::int32_t>(c[3]);
  m_noted = static_cast<std::int64_t>(c[4]);
  const auto sums = r.doubles(prefix + "/loss_sum", m_loss_sum.size());
  std::copy(sums.begin(), sums.end(), m_loss_sum.begin());
}

}  // namespace mpigan::master
