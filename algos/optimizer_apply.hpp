// A master-side optimizer applying gradients to a host ParameterSet: the experiment's optimizer
// (sgd, momentum, rmsprop, adam with Keras formulas, nn/optimizer.hpp) run by the master in
// gradient mode. Shared by the rules that apply gradients (sync, downpour).
#pragma once

#include "mpigan/algos/rule.hpp"
#include "mpigan/core/config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace mpigan::algos {

/// The master optimizer's learning-rate warm-up (gradual warm-up, Goyal et al. 2017): step k
/// (0-based) of the first W uses lr (k + 1) / W. The first updates of a distributed run are
/// gradients computed on the initial weights (every asynchronous worker's first, or a large
/// synchronous batch); their signs agree, and RMSprop's first steps, on an empty mean square, are
/// each sqrt(10) lr in every coordinate: coherent steps of that size killed or blew up the
/// 3DGAN's generator (docs/sandbox.md). `algorithm.warmup`: a number of versions, or `workers`
/// (the default: the number of workers this master serves, so one worker is never warmed up).
struct Warmup {
  std::int64_t versions = -1;  ///< -1: the number of workers
  /// Reads `warmup` from a rule's section; problems go to the document.
  static Warmup parse(ConfigNode& c);
  std::int64_t resolve(int workers) const { return versions < 0 ? workers : versions; }
  std::string describe() const;
  /// The factor of step @p k (0-based) of a warm-up over @p steps (resolved): min(1, (k + 1) / steps);
  /// 1 when @p steps <= 1.
  static double factor(std::int64_t k, std::int64_t steps) {
    return steps > 1 && k < steps ? static_cast<double>(k + 1) / static_cast<double>(steps) : 1.0;
  }
};

/// s(tau), the factor of a stale update's learning rate (`staleness_scale`): `inverse`,
/// 1 / max(1, tau), the staleness-aware learning rate of Zhang et al. 2016 (the default);
/// `inverse_sqrt`, 1 / sqrt(max(1, tau)), a milder one for study in the sandbox
/// (docs/sandbox.md); `none`, 1.
enum class StalenessScale { none, inverse, inverse_sqrt };

/// Reads `staleness_scale` from a rule's section (default `inverse`); problems go to the document.
StalenessScale parse_staleness_scale(ConfigNode& c);
const char* describe(StalenessScale s);

inline float staleness_factor(StalenessScale s, std::int64_t tau) {
  const auto t = static_cast<float>(std::max<std::int64_t>(1, tau));
  switch (s) {
    case StalenessScale::inverse:
      return 1.0f / t;
    case StalenessScale::inverse_sqrt:
      return 1.0f / std::sqrt(t);
    case StalenessScale::none:
      break;
  }
  return 1.0f;
}

class OptimizerApply {
 public:
  OptimizerApply(ParameterSet& weights, const RuleContext& ctx, Warmup warmup = {});
  /// weights <- optimizer(weights, scale * gradient), with the optimizer's learning rate times
  /// @p lr_scale (and the warm-up's and the schedule's factors) for this step only. A non-empty @p reply also
  /// receives the new weights, written in the optimizer's own pass (no second read of the
  /// weights). Scaling the gradient and scaling the step differ for rmsprop and adam, which divide
  /// the gradient by its running magnitude: only @p lr_scale shortens their step.
  void apply(std::span<const float> gradient, float scale = 1.0f, std::span<float> reply = {}, float lr_scale = 1.0f);
  void save(train::CheckpointWriter& w, const std::string& prefix) const;
  void load(const train::CheckpointReader& r, const std::string& prefix);
  const nn::Optimizer& optimizer() const { return *m_opt; }

 private:
  ParameterSet& m_weights;
  Backend& m_backend;
  ParameterSet m_grad;
  std::unique_ptr<nn::Optimizer> m_opt;
  double m_lr;                ///< the experiment's learning rate
  std::int64_t m_warmup = 0;  ///< warm-up steps (resolved; 0 or 1: none)
  const double* m_schedule;   ///< the schedule's factor (RuleContext::lr_factor)
};

}  // namespace mpigan::algos
