// sync: synchronous rounds. Every worker computes a gradient at the same weights; the master
// waits for all of them, averages them in worker-id order (so a run is bitwise reproducible for a
// seed and a rank count), applies the experiment's optimizer once, and sends every worker the new
// weights. theta <- Opt(theta, (1/N) sum_i g_i). Staleness is 0 by construction.
//
// The round's gradient is a batch N times a worker's. `lr_scaling` sets the master optimizer's
// learning rate for it: `linear` (the default) multiplies the experiment's rate by N (Goyal et al.
// 2017); `sqrt` by sqrt(N), the square-root rule for adaptive optimizers (the noise of the step
// kept as the batch grows; Malladi et al. 2022); `none` keeps it. `lr_scaling_max` caps the factor
// (16 by default: the largest factor measured on the rung, docs/sandbox.md). The warm-up (over N
// rounds by default) ramps the scaled rate in. On the rung at 4 workers `linear` ended inside one
// worker's seed range where `none` and `sqrt` did not.
#include "mpigan/algos/optimizer_apply.hpp"
#include "mpigan/algos/rule.hpp"

#include "mpigan/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace mpigan::algos {
namespace {

/// The master's learning rate against the N gradients of a round (`lr_scaling`).
enum class LrScaling { none, sqrt, linear };

/// The factor for a round of @p n gradients, at most @p max (0: no cap).
float round_lr_factor(LrScaling s, int n, double max) {
  const auto k = static_cast<float>(std::max(1, n));
  float f = 1.0f;
  switch (s) {
    case LrScaling::sqrt:
      f = std::sqrt(k);
      break;
    case LrScaling::linear:
      f = k;
      break;
    case LrScaling::none:
      break;
  }
  return max > 0.0 ? std::min(f, static_cast<float>(max)) : f;
}

std::string describe_scaling(LrScaling s, double max) {
  const std::string cap = max > 0.0 ? fmt::format(" (at most x{:g})", max) : std::string{};
  switch (s) {
    case LrScaling::sqrt:
      return "times sqrt(N)" + cap;
    case LrScaling::linear:
      return "times N" + cap;
    case LrScaling::none:
      break;
  }
  return "as set";
}

class SyncMaster final : public MasterRule {
 public:
  SyncMaster(ParameterSet& w, const RuleContext& ctx, bool average, Warmup warmup, LrScaling scaling, double max)
      : MasterRule(w), m_opt(w, ctx, warmup), m_average(average), m_scaling(scaling), m_max(max), m_sum(w.size()) {}

  Verdict submit(const UpdateMeta& meta, std::span<const float> update, std::span<float>, RuleStats&) override {
    Held& h = m_held[meta.worker];  // buffers are kept from round to round
    MPIGAN_CHECK(!h.in_round, "sync: worker {} sent two updates in one round", meta.worker);
    if (meta.stable) {
      h.view = update;  // in the worker's slot until its reply: no copy
    } else {
      h.copy.assign(update.begin(), update.end());
      h.view = h.copy;
    }
    h.in_round = true;
    ++m_in_round;
    return Verdict::held;
  }
  bool round_ready(int expected) const override { return m_in_round >= expected; }
  bool close_round(int first, std::span<float> first_reply) override {
    // std::map iterates in worker-id order: the same sum whatever the arrival order.
    m_parts.clear();
    for (auto& [w, h] : m_held) {
      if (!h.in_round) continue;
      m_parts.push_back(h.view);
      h.in_round = false;
    }
    const float scale = m_average ? 1.0f / static_cast<float>(m_in_round) : 1.0f;
    // One gradient at scale 1 (one worker, or a sum) goes to the optimizer as it is.
    std::span<const float> g = m_parts.front();
    if (m_parts.size() > 1 || scale != 1.0f) {
      sum_scaled(m_parts, scale, m_sum);
      g = m_sum;
    }
    // the first worker's reply is written in the same pass
    m_opt.apply(g, 1.0f, first_reply, round_lr_factor(m_scaling, m_in_round, m_max));
    m_in_round = 0;
    (void)first;
    return !first_reply.empty();
  }
  void save(train::CheckpointWriter& w, const std::string& p) const override { m_opt.save(w, p); }
  void load(const train::CheckpointReader& r, const std::string& p) override { m_opt.load(r, p); }

 private:
  OptimizerApply m_opt;
  struct Held {
    std::vector<float> copy;      ///< the update, when it is not stable where it came
    std::span<const float> view;  ///< the update (its slot, or the copy)
    bool in_round = false;
  };
  bool m_average;
  LrScaling m_scaling;
  double m_max;  ///< the factor's cap (0: none)
  std::map<int, Held> m_held;
  std::vector<std::span<const float>> m_parts;
  int m_in_round = 0;
  std::vector<float> m_sum;
};

class Sync final : public Algorithm {
 public:
  Sync(bool average, Warmup warmup, LrScaling scaling, double max)
      : m_average(average), m_warmup(warmup), m_scaling(scaling), m_max(max) {}
  std::string name() const override { return "sync"; }
  WorkerMode worker_mode() const override { return WorkerMode::gradients; }
  Payload payload() const override { return Payload::gradient; }
  bool synchronous() const override { return true; }
  std::unique_ptr<WorkerRule> make_worker(const RuleContext&) const override { return std::make_unique<WorkerRule>(); }
  std::unique_ptr<MasterRule> make_master(ParameterSet& w, const RuleContext& ctx) const override {
    return std::make_unique<SyncMaster>(w, ctx, m_average, m_warmup, m_scaling, m_max);
  }
  std::string describe() const override {
    return fmt::format(
        "sync: all workers each round, gradients {} in worker order, master optimizer, learning rate "
        "{}, {}",
        m_average ? "averaged" : "summed", describe_scaling(m_scaling, m_max), m_warmup.describe());
  }

 private:
  bool m_average;
  Warmup m_warmup;
  LrScaling m_scaling;
  double m_max;
};

}  // namespace

std::unique_ptr<Algorithm> make_sync(ConfigNode& c) {
  const bool average = c.get_choice("reduce", "mean", {"mean", "sum"}) == "mean";
  const std::string scaling = c.get_choice("lr_scaling", "linear", {"none", "sqrt", "linear"});
  const LrScaling s = scaling == "sqrt" ? LrScaling::sqrt : scaling == "linear" ? LrScaling::linear : LrScaling::none;
  const double max = c.get_real("lr_scaling_max", 16.0, 0.0, 1e6);
  return std::make_unique<Sync>(average, Warmup::parse(c), s, max);
}

}  // namespace mpigan::algos
