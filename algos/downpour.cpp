// downpour: asynchronous SGD with a parameter server (Dean et al. 2012; mpi-learn's default).
// Every arriving update is applied at once, whatever its staleness, and the worker gets the
// current weights back.
//   worker: gradients (default)  theta <- Opt_{s(tau) lr}(theta, g)   (the experiment's optimizer,
//                                                                     its step scaled by s(tau))
//   worker: local                theta <- theta + s(tau) (w_i - w_pulled)   (worker trains locally)
// s(tau) = 1/max(1, tau) by default (staleness_scale: inverse, the staleness-aware learning rate of
// Zhang et al. 2016), 1/sqrt(max(1, tau)) with inverse_sqrt, or 1 with none. The learning rate is
// scaled, not the gradient: rmsprop and adam divide the gradient by its running magnitude and
// would undo a scaled gradient (the unscaled rule wrecks 3dgan-25 from 4 workers on,
// docs/algorithms.md). In gradient mode the master's learning rate is also warmed up over the
// first versions (`warmup`, optimizer_apply.hpp): the workers' first gradients all come from the
// initial weights.
// Look-ahead (gradient mode, `lookahead`, off by default): a worker's gradient is applied about tau
// versions after the weights it was computed on, while the weights kept moving. With look-ahead the
// master sends not its weights but where they are heading, extrapolated from its own recent steps:
//   v <- beta v + (1 - beta) (theta_new - theta_old)      (an average of the master's steps)
//   reply = theta + k v,   k = the updates' running mean staleness (`lookahead: staleness`) or a
//                              number of versions (`lookahead: K`; 0: off)
// so the gradient is taken near the point it will be applied at (the look-ahead of DANA, Hakimi et
// al. 2019, here on the master's own steps, whatever its optimizer). The canonical weights stay
// theta; only what the workers compute on moves. beta: `lookahead_beta` (0.9).
#include "mpigan/algos/optimizer_apply.hpp"
#include "mpigan/algos/rule.hpp"
#include "mpigan/kernels/vector_kernels.hpp"

#include "mpigan/core/error.hpp"

#include <vector>

namespace mpigan::algos {
namespace {

/// The look-ahead's setting: off (versions 0, not automatic), a fixed number of versions, or the
/// running mean staleness.
struct Lookahead {
  double versions = 0.0;
  bool automatic = false;
  float beta = 0.9f;
  bool on() const { return automatic || versions > 0.0; }
  std::string describe() const {
    if (!on()) return {};
    return fmt::format(", replies look ahead by {} along the master's mean step (beta {})",
                       automatic ? std::string("the mean staleness") : fmt::format("{} versions", versions), beta);
  }
};

class DownpourMaster final : public MasterRule {
 public:
  DownpourMaster(ParameterSet& w, const RuleContext& ctx, bool local, StalenessScale scale, Warmup warmup,
                 Lookahead ahead)
      : MasterRule(w), m_local(local), m_scale(scale), m_ahead(ahead) {
    if (!m_local) m_opt = std::make_unique<OptimizerApply>(w, ctx, warmup);
    if (m_ahead.on()) {
      m_velocity.assign(w.size(), 0.0f);
      m_before.resize(w.size());
    }
  }
  Verdict submit(const UpdateMeta& meta, std::span<const float> update, std::span<float> reply,
                 RuleStats& stats) override {
    const float s = staleness_factor(m_scale, meta.staleness());
    stats.scale = s;
    if (m_ahead.on()) {
      // The running mean staleness: the first update's, then an average over ~20 updates.
      const auto tau = static_cast<double>(meta.staleness());
      m_mean_staleness = m_served == 0 ? tau : 0.95 * m_mean_staleness + 0.05 * tau;
      ++m_served;
      cpu::stream_copy_range(m_weights.data(), m_before.data(), m_before.size());
      m_opt->apply(update, 1.0f, {}, s);
      step_velocity(reply);
      return Verdict::applied;
    }
    // The reply (the new weights) is written in the same pass as the update.
    if (m_local) {
      cpu::add_scaled_range(m_weights.data(), update.data(), s, reply.data(), update.size());
    } else {
      m_opt->apply(update, 1.0f, reply, s);
    }
    return Verdict::applied;
  }
  void pull(int worker, std::span<float> out) override {
    if (!m_ahead.on()) return MasterRule::pull(worker, out);
    look_ahead(out);
  }
  void save(train::CheckpointWriter& w, const std::string& p) const override {
    if (m_opt) m_opt->save(w, p);
    if (m_ahead.on()) {
      w.put(p + "/lookahead/velocity", m_velocity);
      w.put(p + "/lookahead/state",
            std::vector<float>{static_cast<float>(m_mean_staleness), static_cast<float>(m_served)});
    }
  }
  void load(const train::CheckpointReader& r, const std::string& p) override {
    if (m_opt) m_opt->load(r, p);
    if (m_ahead.on() && r.has(p + "/lookahead/velocity")) {
      auto v = r.floats(p + "/lookahead/velocity");
      MPIGAN_CHECK(v.size() == m_velocity.size(), "downpour: {}/lookahead/velocity holds {} values, expected {}", p,
                   v.size(), m_velocity.size());
      m_velocity = std::move(v);
      const auto st = r.floats(p + "/lookahead/state");
      MPIGAN_CHECK(st.size() == 2, "downpour: {}/lookahead/state holds {} values, expected 2", p, st.size());
      m_mean_staleness = st[0];
      m_served = static_cast<std::int64_t>(st[1]);
    }
  }

 private:
  float lookahead_versions() const {
    return static_cast<float>(m_ahead.automatic ? m_mean_staleness : m_ahead.versions);
  }
  /// v <- beta v + (1 - beta) (theta - theta_before), and the reply theta + k v in the same pass.
  void step_velocity(std::span<float> reply) {
    const float b = m_ahead.beta, k = lookahead_versions();
    const float* w = m_weights.data();
    const float* before = m_before.data();
    float* v = m_velocity.data();
    float* o = reply.data();
    const std::size_t n = m_velocity.size();
#pragma GCC ivdep
    for (std::size_t i = 0; i < n; ++i) {
      v[i] = b * v[i] + (1.0f - b) * (w[i] - before[i]);
      o[i] = w[i] + k * v[i];
    }
  }
  /// out = theta + k v.
  void look_ahead(std::span<float> out) const {
    const float k = lookahead_versions();
    const float* w = m_weights.data();
    const float* v = m_velocity.data();
    float* o = out.data();
    const std::size_t n = out.size();
#pragma GCC ivdep
    for (std::size_t i = 0; i < n; ++i) o[i] = w[i] + k * v[i];
  }

  bool m_local;
  StalenessScale m_scale;
  Lookahead m_ahead;
  std::unique_ptr<OptimizerApply> m_opt;
  std::vector<float> m_velocity, m_before;
  double m_mean_staleness = 0.0;
  std::int64_t m_served = 0;
};

class Downpour final : public Algorithm {
 public:
  Downpour(bool local, StalenessScale scale, Warmup warmup, Lookahead ahead)
      : m_local(local), m_scale(scale), m_warmup(warmup), m_ahead(ahead) {}
  std::string name() const override { return "downpour"; }
  WorkerMode worker_mode() const override { return m_local ? WorkerMode::local : WorkerMode::gradients; }
  Payload payload() const override { return m_local ? Payload::delta : Payload::gradient; }
  std::unique_ptr<WorkerRule> make_worker(const RuleContext&) const override { return std::make_unique<WorkerRule>(); }
  std::unique_ptr<MasterRule> make_master(ParameterSet& w, const RuleContext& ctx) const override {
    return std::make_unique<DownpourMaster>(w, ctx, m_local, m_scale, m_warmup, m_ahead);
  }
  std::string describe() const override {
    return fmt::format("downpour: asynchronous, worker {}, {}",
                       m_local ? "trains locally and sends its delta" : "sends gradients to the master optimizer",
                       algos::describe(m_scale)) +
           (m_local ? std::string() : ", " + m_warmup.describe()) + m_ahead.describe();
  }

 private:
  bool m_local;
  StalenessScale m_scale;
  Warmup m_warmup;
  Lookahead m_ahead;
};

}  // namespace

std::unique_ptr<Algorithm> make_downpour(ConfigNode& c) {
  const bool local = c.get_choice("worker", "gradients", {"gradients", "local"}) == "local";
  const StalenessScale scale = parse_staleness_scale(c);
  Lookahead ahead;
  if (c.has("lookahead")) {
    const auto k = c.get_real_or("lookahead", "staleness", "a number of versions", 0.0, 1e6, false,
                                 "the updates' running mean staleness; 0: off");
    ahead.automatic = !k.has_value();
    ahead.versions = k.value_or(0.0);
    if (local && ahead.on())
      c.problem("lookahead", "look-ahead needs the master's own steps: expected worker: gradients (found local)");
  }
  ahead.beta = static_cast<float>(c.get_real("lookahead_beta", 0.9, 0.0, 0.999999));
  return std::make_unique<Downpour>(local, scale, Warmup::parse(c), ahead);
}

}  // namespace mpigan::algos
