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
#include "mpigan/algos/optimizer_apply.hpp"
#include "mpigan/algos/rule.hpp"
#include "mpigan/kernels/vector_kernels.hpp"

namespace mpigan::algos {
namespace {

class DownpourMaster final : public MasterRule {
 public:
  DownpourMaster(ParameterSet& w, const RuleContext& ctx, bool local, StalenessScale scale, Warmup warmup)
      : MasterRule(w), m_local(local), m_scale(scale) {
    if (!m_local) m_opt = std::make_unique<OptimizerApply>(w, ctx, warmup);
  }
  Verdict submit(const UpdateMeta& meta, std::span<const float> update, std::span<float> reply,
                 RuleStats& stats) override {
    const float s = staleness_factor(m_scale, meta.staleness());
    stats.scale = s;
    // The reply (the new weights) is written in the same pass as the update.
    if (m_local) {
      cpu::add_scaled_range(m_weights.data(), update.data(), s, reply.data(), update.size());
    } else {
      m_opt->apply(update, 1.0f, reply, s);
    }
    return Verdict::applied;
  }
  void save(train::CheckpointWriter& w, const std::string& p) const override {
    if (m_opt) m_opt->save(w, p);
  }
  void load(const train::CheckpointReader& r, const std::string& p) override {
    if (m_opt) m_opt->load(r, p);
  }

 private:
  bool m_local;
  StalenessScale m_scale;
  std::unique_ptr<OptimizerApply> m_opt;
};

class Downpour final : public Algorithm {
 public:
  Downpour(bool local, StalenessScale scale, Warmup warmup) : m_local(local), m_scale(scale), m_warmup(warmup) {}
  std::string name() const override { return "downpour"; }
  WorkerMode worker_mode() const override { return m_local ? WorkerMode::local : WorkerMode::gradients; }
  Payload payload() const override { return m_local ? Payload::delta : Payload::gradient; }
  std::unique_ptr<WorkerRule> make_worker(const RuleContext&) const override { return std::make_unique<WorkerRule>(); }
  std::unique_ptr<MasterRule> make_master(ParameterSet& w, const RuleContext& ctx) const override {
    return std::make_unique<DownpourMaster>(w, ctx, m_local, m_scale, m_warmup);
  }
  std::string describe() const override {
    return fmt::format("downpour: asynchronous, worker {}, {}",
                       m_local ? "trains locally and sends its delta" : "sends gradients to the master optimizer",
                       algos::describe(m_scale)) +
           (m_local ? std::string() : ", " + m_warmup.describe());
  }

 private:
  bool m_local;
  StalenessScale m_scale;
  Warmup m_warmup;
};

}  // namespace

std::unique_ptr<Algorithm> make_downpour(ConfigNode& c) {
  const bool local = c.get_choice("worker", "gradients", {"gradients", "local"}) == "local";
  const StalenessScale scale = parse_staleness_scale(c);
  return std::make_unique<Downpour>(local, scale, Warmup::parse(c));
}

}  // namespace mpigan::algos
