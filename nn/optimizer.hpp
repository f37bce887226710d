// Local optimizers over flat ParameterSets, with Keras (TF 2) update rules:
//   sgd      v = momentum v - lr g;  w += v   (nesterov: w += momentum v - lr g; no momentum: w -= lr g)
//   rmsprop  ms = rho ms + (1 - rho) g^2;  w -= lr g / (sqrt(ms) + epsilon)
//   adam     t += 1; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
//            w -= lr sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + epsilon)
// Defaults are Keras': sgd lr 0.01; rmsprop lr 1e-3, rho 0.9, eps 1e-7; adam lr 1e-3, 0.9, 0.999, 1e-7.
// The math runs on the backend (Eigen on CPU, kernels on GPU). The state (slots and step count)
// is exposed for checkpoints.
#pragma once

#include "mpigan/core/parameter_set.hpp"

#include <memory>
#include <string>
#include <vector>

namespace mpigan::nn {

struct OptimizerConfig {
  std::string name = "rmsprop";  ///< sgd | rmsprop | adam
  double lr = 1e-3;
  double momentum = 0.0;              ///< sgd
  bool nesterov = false;              ///< sgd
  double rho = 0.9;                   ///< rmsprop
  double beta1 = 0.9, beta2 = 0.999;  ///< adam
  double epsilon = 1e-7;
  /// Keras' defaults for @p name (sgd gets lr 0.01).
  static OptimizerConfig defaults(const std::string& name);
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  /// w <- update(w, g). Both must have the layout this optimizer was made for.
  void step(ParameterSet& w, const ParameterSet& g) { update(w, g, nullptr); }
  /// The same, also writing the new weights into @p mirror (same layout and device as w) in the
  /// same pass over memory where the backend can: a master replying with its fresh weights.
  void step(ParameterSet& w, const ParameterSet& g, ParameterSet& mirror);
  /// Slot buffers by name (e.g. "ms", "m", "v"), for checkpoints.
  virtual std::vector<std::pair<std::string, ParameterSet*>> slots() = 0;
  std::int64_t iterations() const { return m_iterations; }
  void set_iterations(std::int64_t t) { m_iterations = t; }
  const OptimizerConfig& config() const { return m_config; }
  /// Change the learning rate (schedules, hyper-parameter search).
  void set_lr(double lr) { m_config.lr = lr; }

 protected:
  Optimizer(const OptimizerConfig& c, Backend& b) : m_config(c), m_backend(b) {}
  /// One step; @p mirror (a flat view, or null) also receives the new weights.
  virtual void update(ParameterSet& w, const ParameterSet& g, Tensor* mirror) = 0;
  OptimizerConfig m_config;
  Backend& m_backend;
  std::int64_t m_iterations = 0;
};

/// An optimizer for parameter sets laid out like @p layout; throws Error for an unknown name or
/// out-of-range hyper-parameters.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, Backend& backend, const ParameterSet& layout);

}  // namespace mpigan::nn
