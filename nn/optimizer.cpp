// Local optimizers (optimizer.hpp): Keras defaults, the update rules on the backend, layout checks.
#include "mpigan/nn/optimizer.hpp"

#include "mpigan/core/error.hpp"

#include <cmath>

namespace mpigan::nn {

OptimizerConfig OptimizerConfig::defaults(const std::string& name) {
  OptimizerConfig c;
  c.name = name;
  if (name == "sgd") c.lr = 0.01;
  return c;
}

void Optimizer::step(ParameterSet& w, const ParameterSet& g, ParameterSet& mirror) {
  MPIGAN_CHECK(mirror.same_layout(w) && mirror.device() == w.device(),
               "optimizer {}: the mirror of the weights differs in layout or device ({} vs {} floats)", name(),
               mirror.size(), w.size());
  Tensor m = mirror.flat();
  update(w, g, &m);
}

namespace {

void check_layout(const std::string& who, const ParameterSet& a, const ParameterSet& b) {
  MPIGAN_CHECK(a.same_layout(b), "optimizer {}: parameter layout differs ({} vs {} floats)", who, a.size(), b.size());
}

class Sgd final : public Optimizer {
 public:
  Sgd(const OptimizerConfig& c, Backend& b, const ParameterSet& layout)
      : Optimizer(c, b), m_velocity(ParameterSet::like(layout, b)) {}
  std::string name() const override { return "sgd"; }
  void update(ParameterSet& w, const ParameterSet& g, Tensor* mirror) override {
    check_layout(name(), w, m_velocity);
    check_layout(name(), g, m_velocity);
    Tensor wt = w.flat(), vt = m_velocity.flat();
    m_backend.sgd_update(
        wt, g.flat(), vt,
        {static_cast<float>(m_config.lr), static_cast<float>(m_config.momentum), m_config.nesterov, mirror});
    ++m_iterations;
  }
  std::vector<std::pair<std::string, ParameterSet*>> slots() override { return {{"velocity", &m_velocity}}; }

 private:
  ParameterSet m_velocity;
};

class Rmsprop final : public Optimizer {
 public:
  Rmsprop(const OptimizerConfig& c, Backend& b, const ParameterSet& layout)
      : Optimizer(c, b), m_ms(ParameterSet::like(layout, b)) {}
  std::string name() const override { return "rmsprop"; }
  void update(ParameterSet& w, const ParameterSet& g, Tensor* mirror) override {
    check_layout(name(), w, m_ms);
    check_layout(name(), g, m_ms);
    Tensor wt = w.flat(), mt = m_ms.flat();
    m_backend.rmsprop_update(wt, g.flat(), mt,
                             {static_cast<float>(m_config.lr), static_cast<float>(m_config.rho),
                              static_cast<float>(m_config.epsilon), mirror});
    ++m_iterations;
  }
  std::vector<std::pair<std::string, ParameterSet*>> slots() override { return {{"ms", &m_ms}}; }

 private:
  ParameterSet m_ms;
};

class Adam final : public Optimizer {
 public:
  Adam(const OptimizerConfig& c, Backend& b, const ParameterSet& layout)
      : Optimizer(c, b), m_m(ParameterSet::like(layout, b)), m_v(ParameterSet::like(layout, b)) {}
  std::string name() const override { return "adam"; }
  void update(ParameterSet& w, const ParameterSet& g, Tensor* mirror) override {
    check_layout(name(), w, m_m);
    check_layout(name(), g, m_m);
    const double t = static_cast<double>(m_iterations + 1);
    const double lr_t =
        m_config.lr * std::sqrt(1.0 - std::pow(m_config.beta2, t)) / (1.0 - std::pow(m_config.beta1, t));
    Tensor wt = w.flat(), mt = m_m.flat(), vt = m_v.flat();
    m_backend.adam_update(wt, g.flat(), mt, vt,
                          {static_cast<float>(lr_t), static_cast<float>(m_config.beta1),
                           static_cast<float>(m_config.beta2), static_cast<float>(m_config.epsilon), mirror});
    ++m_iterations;
  }
  std::vector<std::pair<std::string, ParameterSet*>> slots() override { return {{"m", &m_m}, {"v", &m_v}}; }

 private:
  ParameterSet m_m, m_v;
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c, Backend& backend, const ParameterSet& layout) {
  MPIGAN_CHECK(c.lr > 0.0 && std::isfinite(c.lr), "optimizer '{}': lr must be > 0, got {}", c.name, c.lr);
  MPIGAN_CHECK(c.epsilon > 0.0, "optimizer '{}': epsilon must be > 0, got {}", c.name, c.epsilon);
  if (c.name == "sgd") {
    MPIGAN_CHECK(c.momentum >= 0.0 && c.momentum < 1.0, "optimizer 'sgd': momentum must be in [0, 1), got {}",
                 c.momentum);
    return std::make_unique<Sgd>(c, backend, layout);
  }
  if (c.name == "rmsprop") {
    MPIGAN_CHECK(c.rho >= 0.0 && c.rho < 1.0, "optimizer 'rmsprop': rho must be in [0, 1), got {}", c.rho);
    return std::make_unique<Rmsprop>(c, backend, layout);
  }
  if (c.name == "adam") {
    MPIGAN_CHECK(c.beta1 >= 0.0 && c.beta1 < 1.0 && c.beta2 >= 0.0 && c.beta2 < 1.0,
                 "optimizer 'adam': beta1/beta2 must be in [0, 1), got {} / {}", c.beta1, c.beta2);
    return std::make_unique<Adam>(c, backend, layout);
  }
  MPIGAN_FATAL("unknown optimizer '{}': expected sgd, rmsprop or adam", c.name);
}

}  // namespace mpigan::nn
