// dc_asgd: delay-compensated asynchronous SGD (Zheng et al. 2017), adaptive variant (DC-ASGD-a).
// The master keeps, per worker, the weights it last sent that worker (w_bak); a gradient computed
// on those stale weights is corrected by a first-order Taylor term with the diagonal outer-product
// approximation of the Hessian, then applied with the experiment's optimizer:
//   MS <- rho MS + (1 - rho) g^2;   lambda = lambda0 / sqrt(MS + eps)         (element-wise)
//   g~ = g + lambda g * g * (theta - w_bak(i));   theta <- Opt(theta, g~);   w_bak(i) <- theta
// lambda0 defaults to 2 (the paper's for DC-ASGD-a), rho to 0.95 (the paper's). adaptive: false uses
// a constant lambda = lambda0 (DC-ASGD-c), whose default is 0.04 (the paper's and MXNet's for it).
// 0.04 under the adaptive scale (until stop 25) made the correction ~1e-5 of the gradient on
// 3dgan-25 at N = 64: downpour to three digits (docs/algorithms.md). As in downpour, the step's
// learning rate is scaled by 1 / max(1, tau) (staleness_scale: inverse, the default; inverse_sqrt:
// 1 / sqrt(max(1, tau)); none turns it off) and warmed up over the first versions (warmup): the
// compensation alone left 3dgan-25's generator wrecked at N = 16.
#include "mpigan/algos/optimizer_apply.hpp"
#include "mpigan/algos/rule.hpp"
#include "mpigan/kernels/vector_kernels.hpp"

#include "mpigan/core/error.hpp"

#include <cmath>
#include <map>

namespace mpigan::algos {
namespace {

struct DcParams {
  float lambda = 0.04f, rho = 0.95f, epsilon = 1e-7f;
  bool adaptive = true;
  StalenessScale scale = StalenessScale::inverse;  ///< of the step's learning rate
  Warmup warmup;                                   ///< of the master optimizer's learning rate
};

class DcAsgdMaster final : public MasterRule {
 public:
  DcAsgdMaster(ParameterSet& w, const RuleContext& ctx, const DcParams& p)
      : MasterRule(w), m_params(p), m_opt(w, ctx, p.warmup), m_ms(w.size(), 0.0f), m_corrected(w.size()) {}

  Verdict submit(const UpdateMeta& meta, std::span<const float> g, std::span<float> reply, RuleStats& stats) override {
    float* w = m_weights.data();
    auto it = m_backup.find(meta.worker);
    MPIGAN_CHECK(it != m_backup.end(), "dc_asgd: worker {} sent an update before it was given weights", meta.worker);
    const std::vector<float>& bak = it->second;
    // Locals and lanes of 16 elements with one partial sum of lambda each, so the loop vectorises;
    // the mean lambda (a logged statistic) is summed in a fixed order.
    constexpr std::size_t kLanes = 16;
    float lane_sum[kLanes] = {};
    const std::size_t n = g.size();
    const float rho = m_params.rho, lambda0 = m_params.lambda, eps = m_params.epsilon;
    const bool adaptive = m_params.adaptive;
    float* ms = m_ms.data();
    float* corrected = m_corrected.data();
    const float* gv = g.data();
    const float* bv = bak.data();
    auto element = [&](std::size_t i, std::size_t l) {
      const float m = rho * ms[i] + (1.0f - rho) * gv[i] * gv[i];
      ms[i] = m;
      const float lambda = adaptive ? lambda0 / std::sqrt(m + eps) : lambda0;
      lane_sum[l] += lambda;
      corrected[i] = gv[i] + lambda * gv[i] * gv[i] * (w[i] - bv[i]);
    };
    std::size_t b = 0;
    for (; b + kLanes <= n; b += kLanes)
#pragma GCC ivdep
      for (std::size_t l = 0; l < kLanes; ++l) element(b + l, l);
    for (std::size_t l = 0; b + l < n; ++l) element(b + l, l);
    double lambda_sum = 0.0;
    for (float v : lane_sum) lambda_sum += v;
    m_opt.apply(m_corrected, 1.0f, reply,
                staleness_factor(m_params.scale, meta.staleness()));  // the reply (new weights) in the optimizer's pass
    // The new backup, read again only at this worker's next update: streaming stores.
    it->second.resize(m_weights.size());
    cpu::stream_copy_range(m_weights.data(), it->second.data(), m_weights.size());
    stats.scale = n == 0 ? 0.0 : lambda_sum / static_cast<double>(n);  // mean lambda
    return Verdict::applied;
  }
  /// w_bak(i) <- theta whenever worker i is given the weights.
  void pull(int worker, std::span<float> out) override {
    MasterRule::pull(worker, out);
    m_backup[worker].assign(m_weights.data(), m_weights.data() + m_weights.size());
  }
  void save(train::CheckpointWriter& wr, const std::string& p) const override {
    m_opt.save(wr, p + "/optimizer");
    wr.put(p + "/ms", m_ms);
    for (const auto& [worker, bak] : m_backup) wr.put(fmt::format("{}/backup/{}", p, worker), bak);
  }
  void load(const train::CheckpointReader& r, const std::string& p) override {
    m_opt.load(r, p + "/optimizer");
    m_ms = r.floats(p + "/ms");
    m_backup.clear();
    for (int worker = 0; r.has(fmt::format("{}/backup/{}", p, worker)); ++worker)
      m_backup.emplace(worker, r.floats(fmt::format("{}/backup/{}", p, worker)));
  }

 private:
  DcParams m_params;
  OptimizerApply m_opt;
  std::vector<float> m_ms, m_corrected;
  std::map<int, std::vector<float>> m_backup;
};

class DcAsgd final : public Algorithm {
 public:
  explicit DcAsgd(const DcParams& p) : m_params(p) {}
  std::string name() const override { return "dc_asgd"; }
  WorkerMode worker_mode() const override { return WorkerMode::gradients; }
  Payload payload() const override { return Payload::gradient; }
  std::unique_ptr<WorkerRule> make_worker(const RuleContext&) const override { return std::make_unique<WorkerRule>(); }
  std::unique_ptr<MasterRule> make_master(ParameterSet& w, const RuleContext& ctx) const override {
    return std::make_unique<DcAsgdMaster>(w, ctx, m_params);
  }
  std::string describe() const override {
    return fmt::format(
               "dc_asgd: delay compensation, lambda {}{}, master optimizer{}", m_params.lambda,
               m_params.adaptive ? fmt::format(" / sqrt(MS), rho {}", m_params.rho) : std::string(),
               m_params.scale != StalenessScale::none ? std::string(", ") + algos::describe(m_params.scale) : "") +
           ", " + m_params.warmup.describe();
  }

 private:
  DcParams m_params;
};

}  // namespace

std::unique_ptr<Algorithm> make_dc_asgd(ConfigNode& c) {
  DcParams p;
  p.adaptive = c.get_bool("adaptive", true);
  p.lambda = static_cast<float>(c.get_real("lambda", p.adaptive ? 2.0 : 0.04, 0.0, 100.0));
  p.rho = static_cast<float>(c.get_real("rho", 0.95, 0.0, 0.999999));
  p.scale = parse_staleness_scale(c);
  p.warmup = Warmup::parse(c);
  return std::make_unique<DcAsgd>(p);
}

}  // namespace mpigan::algos
