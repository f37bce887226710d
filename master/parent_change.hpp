// A sub-master's bookkeeping against its parent, without the transport: the weights it last took
// from the parent, the parent's version then, the samples it has pushed, and the mean losses of its
// children's updates since (so the top master's updates.csv and progress line show a tree's
// losses). The parent link (parent_link.hpp) sends what it builds over MPI; the research sandbox's
// virtual sub-masters hand it to the top master's update service directly.
#pragma once

#include "mpigan/master/update_service.hpp"

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace mpigan::master {

class ParentChange {
 public:
  explicit ParentChange(const UpdateService& service);

  /// The update for the parent into @p out: per network the change of the weights since the last
  /// take, and the canonical BN state. Returns the state's decays (dist::Header::state_decay).
  std::array<double, 2> build(const UpdateService& service, std::span<float> out) const;
  /// The samples applied since the last push, now counted as pushed.
  std::int64_t push_samples(const UpdateService& service);
  /// The parent stopped without applying the last push: its samples are again the sub-master's own
  /// (a resumed sub-master pushes them with the change they are behind).
  void unpush_samples();
  /// The samples the parent has counted (those applied here up to the last applied push).
  std::int64_t samples_at_push() const { return m_samples_at_push; }
  /// A child's update was applied or held: its losses join the mean of the next push.
  void note_losses(const dist::Header& child);
  /// The mean of the losses noted since the last push into @p h (none noted: none), then afresh.
  void put_losses(dist::Header& h);
  /// Take the parent's weights and BN state of its version @p version (@p parent: a whole payload).
  void adopt(UpdateService& service, std::span<const float> parent, std::int64_t version);
  /// Keep the change since the last take, rebased onto the parent's weights (a resumed sub-master
  /// whose change the parent never applied).
  void rebase(UpdateService& service, std::span<const float> parent, std::int64_t version);

  std::int64_t parent_version() const { return m_parent_version; }
  /// Per network, the weights of the last take (a checkpoint part saves and restores them).
  std::vector<float>& pulled(models::Net n) { return m_pulled[dist::index(n)]; }
  const std::vector<float>& pulled(models::Net n) const { return m_pulled[dist::index(n)]; }
  void restore(std::int64_t parent_version, std::int64_t samples_at_push) {
    m_parent_version = parent_version;
    m_samples_at_push = samples_at_push;
    m_last_push = 0;
  }
  /// Everything, under @p prefix, for an exact continuation (the sandbox's resume of a tree).
  void save_exact(train::CheckpointWriter& w, const std::string& prefix) const;
  void load_exact(const train::CheckpointReader& r, const std::string& prefix);

 private:
  std::array<std::vector<float>, 2> m_pulled;
  std::int64_t m_parent_version = 0;
  std::int64_t m_samples_at_push = 0;
  std::int64_t m_last_push = 0;  ///< the samples of the last push, until the parent answers it
  std::array<double, dist::kMaxLosses> m_loss_sum{};
  std::int32_t m_n_losses = 0;
  std::int64_t m_noted = 0;
};

}  // namespace mpigan::master
