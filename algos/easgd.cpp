// easgd: asynchronous elastic averaging SGD (Zhang, Choromanska, LeCun 2015, Algorithm 1).
// Workers train locally with the experiment's optimizer; every training.sync_every steps worker i
// sends its weights x_i and gets the centre x~ as it was before the update:
//   master:  x~ <- x~ + alpha (x_i - x~)
//   worker:  x_i <- x_i - alpha (x_i - x~_old)
// alpha defaults to 0.9 / workers (beta = 0.9 in the paper, as mpi-learn sets it).
#include "mpigan/algos/rule.hpp"
#include "mpigan/kernels/vector_kernels.hpp"

#include <algorithm>

namespace mpigan::algos {
namespace {

class EasgdWorker final : public WorkerRule {
 public:
  explicit EasgdWorker(float alpha) : m_alpha(alpha) {}
  void after_reply(std::span<float> local, std::span<const float> centre_old, std::span<const float>) override {
    for (std::size_t i = 0; i < local.size(); ++i) local[i] -= m_alpha * (local[i] - centre_old[i]);
  }

 private:
  float m_alpha;
};

class EasgdMaster final : public MasterRule {
 public:
  EasgdMaster(ParameterSet& w, float alpha) : MasterRule(w), m_alpha(alpha) {}
  Verdict submit(const UpdateMeta& meta, std::span<const float> x, std::span<float> reply, RuleStats& stats) override {
    (void)meta;
    // The reply is the centre before the elastic move, written in the same pass as the move.
    cpu::elastic_range(m_weights.data(), x.data(), m_alpha, reply.data(), x.size());
    stats.scale = m_alpha;
    return Verdict::applied;
  }

 private:
  float m_alpha;
};

class Easgd final : public Algorithm {
 public:
  explicit Easgd(double alpha) : m_alpha(alpha) {}
  std::string name() const override { return "easgd"; }
  WorkerMode worker_mode() const override { return WorkerMode::local; }
  Payload payload() const override { return Payload::weights; }
  float alpha(int workers) const { return static_cast<float>(m_alpha > 0 ? m_alpha : 0.9 / std::max(1, workers)); }
  std::unique_ptr<WorkerRule> make_worker(const RuleContext& ctx) const override {
    return std::make_unique<EasgdWorker>(alpha(ctx.workers));
  }
  std::unique_ptr<MasterRule> make_master(ParameterSet& w, const RuleContext& ctx) const override {
    return std::make_unique<EasgdMaster>(w, alpha(ctx.workers));
  }
  std::string describe() const override {
    return m_alpha > 0 ? fmt::format("easgd: elastic averaging, alpha {}", m_alpha)
                       : "easgd: elastic averaging, alpha 0.9/workers";
  }

 private:
  double m_alpha;
};

}  // namespace

std::unique_ptr<Algorithm> make_easgd(ConfigNode& c) {
  const double alpha = c.get_real("alpha", 0.0, 0.0, 1.0);  // 0 = 0.9 / workers
  return std::make_unique<Easgd>(alpha);
}

}  // namespace mpigan::algos
