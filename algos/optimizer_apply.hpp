// A master-side optimizer applying gradients to a host ParameterSet: the experiment's optimizer
// (sgd, momentum, rmsprop, adam with Keras formulas, nn/optimizer.hpp) run by the master in
// gradient mode. Shared by the rules that apply gradients (sync, downpour).
#pragma once

#include "mpigan/algos/rule.hpp"

namespace mpigan::algos {

class OptimizerApply {
 public:
  OptimizerApply(ParameterSet& weights, const RuleContext& ctx);
  /// weights <- optimizer(weights, scale * gradient), with the optimizer's learning rate times
  /// @p lr_scale for this step only. A non-empty @p reply also receives the new weights, written in
  /// the optimizer's own pass (no second read of the weights). Scaling the gradient and scaling the
  /// step differ for rmsprop and adam, which divide the gradient by its running magnitude: only
  /// @p lr_scale shortens their step.
  void apply(std::span<const float> gradient, float scale = 1.0f, std::span<float> reply = {}, float lr_scale = 1.0f);
  void save(train::CheckpointWriter& w, const std::string& prefix) const;
  void load(const train::CheckpointReader& r, const std::string& prefix);
  const nn::Optimizer& optimizer() const { return *m_opt; }

 private:
  ParameterSet& m_weights;
  Backend& m_backend;
  ParameterSet m_grad;
  std::unique_ptr<nn::Optimizer> m_opt;
  double m_lr;  // the experiment's learning rate
};

}  // namespace mpigan::algos
