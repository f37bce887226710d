// The top master's rule in a tree of masters: sub-masters send the change of their weights since
// they last pulled; it is added at once, times a scale (asynchronous rules: by default 1 / the
// sub-masters, so that a tree moves the weights per sample as one master over all the workers
// would), or averaged over all sub-masters in rounds (synchronous rules), summed in sub-master
// order so a round is bitwise reproducible.
// Not a registered rule: the master uses it above sub-masters whatever rule they run.
#include "mpigan/algos/rules.hpp"

#include "mpigan/kernels/vector_kernels.hpp"

#include <map>

namespace mpigan::algos {
namespace {

class TreeMaster final : public MasterRule {
 public:
  TreeMaster(ParameterSet& w, bool sync, float scale) : MasterRule(w), m_sync(sync), m_scale(scale), m_sum(w.size()) {}

  Verdict submit(const UpdateMeta& meta, std::span<const float> delta, std::span<float> reply, RuleStats&) override {
    if (m_sync) {
      Held& h = m_held[meta.worker];
      if (meta.stable) {
        h.view = delta;  // in the sub-master's slot until its reply: no copy
      } else {
        h.copy.assign(delta.begin(), delta.end());
        h.view = h.copy;
      }
      return Verdict::held;
    }
    cpu::add_scaled_range(m_weights.data(), delta.data(), m_scale, reply.data(), delta.size());
    return Verdict::applied;
  }

  bool round_ready(int expected) const override { return static_cast<int>(m_held.size()) >= expected; }

  bool close_round(int, std::span<float>) override {
    m_parts.clear();
    for (const auto& [k, h] : m_held) m_parts.push_back(h.view);  // in sub-master order
    sum_scaled(m_parts, 1.0f / static_cast<float>(m_held.size()), m_sum);
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
  float m_scale;
  std::map<int, Held> m_held;
  std::vector<std::span<const float>> m_parts;
  std::vector<float> m_sum;
};

}  // namespace

std::unique_ptr<MasterRule> make_tree_master(ParameterSet& weights, bool synchronous, float scale) {
  return std::make_unique<TreeMaster>(weights, synchronous, scale);
}

}  // namespace mpigan::algos
