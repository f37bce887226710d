// gem: Gradient Energy Matching (Hermans & Louppe 2018, Algorithm 1 with the reference code's
// kappa, clamp and epsilon). Each exchange is pull-then-push: the worker, holding its gradient g
// computed at the weights s it pulled last, fetches the current central weights theta and sends
//   Delta = proposal(g) (below);  m <- mu m + Delta;  cvm = theta - s;  s <- theta;
//   pi = clamp((kappa |m| - |cvm|) / (|Delta| + eps), lo, hi)   (element-wise)
//   update = pi * Delta
// The master adds it (theta <- theta + update); the worker continues from theta + update. All the
// work is on the worker; the master only adds. The per-update log gets the median of pi.
// Under sub-masters each sub-master is the central variable of its workers.
// clip_norm c > 0 (an addition to the paper, off by default) first rescales a network's gradient
// to norm c when it is longer: Delta = -lr g min(1, c / |g|). Plain SGD on the 3DGAN's losses can
// run away (the generator's gradient norm grows by orders of magnitude within tens of updates);
// the clip bounds each proposal while GEM's pi still matches the energy.
// proposal: how Delta is made from the gradient.
//  - rmsprop (the default): Delta = -lr g / (sqrt(v) + eps), v <- rho v + (1 - rho) g^2 kept by each
//    worker, rho 0.9, eps 1e-7 (Keras's RMSprop, the 3DGAN's own optimizer): proposals bounded by
//    ~lr per weight whatever the gradient's scale. Default lr `auto` = 1e-3 / (N + 4) for N
//    workers at this master (2e-4 for one): pi saturates at the clamp's upper end 5 when one
//    worker runs alone, so one worker moves the weights like the single-process RMSprop at its
//    1e-3; the proxy kappa |m| ~ 20 lr bounds each worker's share of the central variable's
//    movement, so with a fixed lr N workers moved it ~N times as far per cycle, and at N = 16 the
//    3DGAN's generator lost its energy scale (sampling fraction 98 % off; 41 % with 1e-3 / 20,
//    docs/sandbox.md). On the quickstart with 3 virtual workers, 40 updates, at 2e-4: validation
//    D 12, fpd_hlf 3.7e4 (downpour: D 55, fpd_hlf 5.0e4; these proposals at lr 1e-3: D 657,
//    fpd_hlf 1.3e5; sgd proposals: D 2.3e5, fpd_hlf 1.6e5), all measured before the fix of the
//    first update's stale copy below; N = 1..64 after it in docs/sandbox.md.
//  - sgd: Delta = -lr g, the paper's; default lr (auto) 5e-4 / (N + 4), 1e-4 for one worker, rather
//    than the paper's 0.01 (the 3DGAN's weighted losses, MAPE terms scaled by 100, give gradient
//    norms of ~10^3). On 3dgan-25 the
//    generator's gradient norm grows by orders of magnitude within tens of updates and the
//    proposals follow it: the generator is wrecked (docs/algorithms.md).
#include "mpigan/algos/optimizer_apply.hpp"
#include "mpigan/algos/rule.hpp"
#include "mpigan/kernels/vector_kernels.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/train/checkpoint.hpp"

#include <algorithm>
#include <cmath>

namespace mpigan::algos {
namespace {

struct GemParams {
  float lr = 0.0f;  ///< 0: auto (lr_for)
  float momentum = 0.9f, kappa = 2.0f, lo = 0.0f, hi = 5.0f, epsilon = 1e-12f;
  double clip_norm = 0.0;  ///< > 0: gradients longer than this are rescaled to it
  bool rmsprop = true;     ///< proposal: rmsprop (else sgd)
  float rho = 0.9f, rms_epsilon = 1e-7f;
  Warmup warmup;  ///< the master's applied updates ramp over the first W (optimizer_apply.hpp)
  /// The proposal learning rate for @p workers at this master: lr, or when auto the single
  /// worker's default divided by (N + 4) / 5.
  float lr_for(int workers) const {
    if (lr > 0) return lr;
    // In double, then rounded once: one worker gets exactly the former default's float.
    return static_cast<float>((rmsprop ? 1e-3 : 5e-4) / (std::max(1, workers) + 4));
  }
};

class GemWorker final : public WorkerRule {
 public:
  GemWorker(const GemParams& p, std::size_t n, const double* schedule)
      : m_params(p), m_schedule(schedule), m_m(n, 0.0f), m_stale(n, 0.0f), m_pi(n), m_v(p.rmsprop ? n : 0, 0.0f) {}

  RuleStats before_send(std::span<float> update, std::span<const float> theta,
                        std::span<const float> computed_at) override {
    MPIGAN_CHECK(theta.size() == update.size(), "gem: pulled {} weights for an update of {}", theta.size(),
                 update.size());
    if (!m_initialised) {
      // s starts at the weights the first gradient used: the central variable's move since then
      // (the other workers' first updates) counts in the first pi, as in every later one. Taking
      // theta here made cvm = 0 for every worker's first update, so N workers' first updates all
      // got pi = kappa: 64 of them at once wrecked 3dgan-25 (validation D 1.6e5).
      const auto s = computed_at.empty() ? theta : computed_at;
      std::copy(s.begin(), s.end(), m_stale.begin());
      m_initialised = true;
    }
    // The proposal learning rate with the schedule's factor (optimizer.schedule) of the last reply.
    const float lr0 = m_params.lr * static_cast<float>(m_schedule != nullptr ? *m_schedule : 1.0);
    float lr = lr0;
    if (m_params.clip_norm > 0) {
      double ss = 0;
      for (float g : update) ss += static_cast<double>(g) * g;
      const double norm = std::sqrt(ss);
      if (norm > m_params.clip_norm) lr = static_cast<float>(lr0 * (m_params.clip_norm / norm));
    }
    std::size_t n = 0;
    for (std::size_t i = 0; i < update.size(); ++i) {
      float delta = -lr * update[i];
      if (m_params.rmsprop) {
        const float g = update[i] * (lr / lr0);  // the clipped gradient
        m_v[i] = m_params.rho * m_v[i] + (1.0f - m_params.rho) * g * g;
        delta = -lr0 * g / (std::sqrt(m_v[i]) + m_params.rms_epsilon);
      }
      m_m[i] = m_params.momentum * m_m[i] + delta;
      const float cvm = theta[i] - m_stale[i];
      m_stale[i] = theta[i];
      const float pi =
          std::clamp((m_params.kappa * std::abs(m_m[i]) - std::abs(cvm)) / (std::abs(delta) + m_params.epsilon),
                     m_params.lo, m_params.hi);
      update[i] = pi * delta;
      // The median is over parameters that had a gradient (padding and unused weights have none).
      if (delta != 0.0f) m_pi[n++] = pi;
    }
    RuleStats s;
    auto mid = m_pi.begin() + static_cast<std::ptrdiff_t>(n / 2);
    std::nth_element(m_pi.begin(), mid, m_pi.begin() + static_cast<std::ptrdiff_t>(n));
    s.scale = n == 0 ? 0.0 : *mid;
    return s;
  }
  void after_reply(std::span<float> local, std::span<const float> theta, std::span<const float> sent) override {
    for (std::size_t i = 0; i < local.size(); ++i) local[i] = theta[i] + sent[i];
  }
  void save(train::CheckpointWriter& w, const std::string& p) const override {
    w.put(p + "/momentum", m_m);
    w.put(p + "/stale", m_stale);
    w.put_int(p + "/initialised", m_initialised);
    if (m_params.rmsprop) w.put(p + "/second_moment", m_v);
  }
  void load(const train::CheckpointReader& r, const std::string& p) override {
    m_m = r.floats(p + "/momentum");
    m_stale = r.floats(p + "/stale");
    m_initialised = r.get_int(p + "/initialised") != 0;
    if (m_params.rmsprop) {
      MPIGAN_CHECK(r.has(p + "/second_moment"),
                   "checkpoint '{}': no gem second moment ({}/second_moment): it was written with proposal: sgd; "
                   "resume with algorithm.proposal=sgd",
                   r.path(), p);
      m_v = r.floats(p + "/second_moment");
    }
    MPIGAN_CHECK(m_m.size() == m_pi.size() && m_stale.size() == m_pi.size(),
                 "checkpoint '{}': gem state of {} values, model has {}", r.path(), m_m.size(), m_pi.size());
  }

 private:
  GemParams m_params;
  const double* m_schedule;  ///< RuleContext::lr_factor
  std::vector<float> m_m, m_stale, m_pi, m_v;
  bool m_initialised = false;
};

class GemMaster final : public MasterRule {
 public:
  GemMaster(ParameterSet& w, std::int64_t warmup) : MasterRule(w), m_warmup(warmup) {}
  Verdict submit(const UpdateMeta& meta, std::span<const float> update, std::span<float> reply,
                 RuleStats& stats) override {
    (void)meta;
    // theta += w_k update, w_k = min(1, (k + 1) / W) for the k-th applied update (warm-up: the
    // first proposals all come from the initial weights). Pull-then-push: no reply follows.
    const auto w = static_cast<float>(Warmup::factor(m_applied, m_warmup));
    stats.scale = w;
    cpu::add_scaled_range(m_weights.data(), update.data(), w, reply.empty() ? nullptr : reply.data(), update.size());
    ++m_applied;
    return Verdict::applied;
  }
  void save(train::CheckpointWriter& wr, const std::string& p) const override { wr.put_int(p + "/applied", m_applied); }
  void load(const train::CheckpointReader& r, const std::string& p) override {
    // Checkpoints written before the warm-up existed hold no count: they are past it.
    m_applied = r.has(p + "/applied") ? r.get_int(p + "/applied") : m_warmup;
  }

 private:
  std::int64_t m_warmup;
  std::int64_t m_applied = 0;
};

class Gem final : public Algorithm {
 public:
  explicit Gem(const GemParams& p) : m_params(p) {}
  std::string name() const override { return "gem"; }
  WorkerMode worker_mode() const override { return WorkerMode::gradients; }
  Payload payload() const override { return Payload::gradient; }
  Exchange exchange() const override { return Exchange::pull_push; }
  std::unique_ptr<WorkerRule> make_worker(const RuleContext& ctx) const override {
    GemParams p = m_params;
    p.lr = m_params.lr_for(ctx.workers);
    return std::make_unique<GemWorker>(p, ctx.layout.size(), ctx.lr_factor);
  }
  std::unique_ptr<MasterRule> make_master(ParameterSet& w, const RuleContext& ctx) const override {
    return std::make_unique<GemMaster>(w, m_params.warmup.resolve(ctx.workers));
  }
  std::string describe() const override {
    return fmt::format(
        "gem: {} proposals{}, lr {}, momentum {}, kappa {}, clamp [{}, {}], epsilon {}{}, {}",
        m_params.rmsprop ? "rmsprop" : "sgd",
        m_params.rmsprop ? fmt::format(" (rho {}, eps {})", m_params.rho, m_params.rms_epsilon) : std::string(),
        m_params.lr > 0 ? fmt::format("{}", m_params.lr)
                        : fmt::format("auto ({} / (N + 4) for N workers)", m_params.rmsprop ? "1e-3" : "5e-4"),
        m_params.momentum, m_params.kappa, m_params.lo, m_params.hi, m_params.epsilon,
        m_params.clip_norm > 0 ? fmt::format(", clip_norm {}", m_params.clip_norm) : std::string(),
        m_params.warmup.describe());
  }

 private:
  GemParams m_params;
};

}  // namespace

std::unique_ptr<Algorithm> make_gem(ConfigNode& c) {
  GemParams p;
  p.rmsprop = c.get_choice("proposal", "rmsprop", {"rmsprop", "sgd"}) == "rmsprop";
  if (const auto lr = c.get_real_or("lr", "auto", "a learning rate", 0.0, 100.0, true,
                                    "1e-3 / (N + 4) for N workers with rmsprop proposals, 5e-4 / (N + 4) with sgd"))
    p.lr = static_cast<float>(*lr);
  p.rho = static_cast<float>(c.get_real("rho", 0.9, 0.0, 0.999999));
  p.rms_epsilon = static_cast<float>(c.get_real("rms_epsilon", 1e-7, 0.0, 1.0, true));
  if (!p.rmsprop && (c.has("rho") || c.has("rms_epsilon")))
    c.problem("proposal", "rho and rms_epsilon belong to proposal: rmsprop");
  p.momentum = static_cast<float>(c.get_real("momentum", 0.9, 0.0, 0.999999));
  p.kappa = static_cast<float>(c.get_real("kappa", 2.0, 0.0, 100.0, true));
  const auto clamp = c.get_reals("clamp", {0.0, 5.0}, 2);
  if (!(clamp[0] >= 0 && clamp[0] < clamp[1]))
    c.problem("clamp", fmt::format("expected [lo, hi] with 0 <= lo < hi, got [{}, {}]", clamp[0], clamp[1]));
  p.lo = static_cast<float>(clamp[0]);
  p.hi = static_cast<float>(clamp[1]);
  p.epsilon = static_cast<float>(c.get_real("epsilon", 1e-12, 0.0, 1.0, true));
  p.clip_norm = c.get_real("clip_norm", 0.0, 0.0);
  p.warmup = Warmup::parse(c);
  return std::make_unique<Gem>(p);
}

}  // namespace mpigan::algos
