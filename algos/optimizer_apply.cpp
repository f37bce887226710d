// The master-side optimizer of the gradient rules (optimizer_apply.hpp).
#include "mpigan/algos/optimizer_apply.hpp"

#include "mpigan/core/error.hpp"

#include <algorithm>

namespace mpigan::algos {

Warmup Warmup::parse(ConfigNode& c) {
  Warmup w;
  if (const auto n = c.get_int_or("warmup", "workers", "a number of versions", 0, std::int64_t{1} << 40,
                                  "as many versions as workers; 0: none"))
    w.versions = *n;
  return w;
}

std::string Warmup::describe() const {
  if (versions < 0) return "learning rate warmed up over as many versions as workers";
  return versions > 1 ? fmt::format("learning rate warmed up over {} versions", versions) : "no warm-up";
}

StalenessScale parse_staleness_scale(ConfigNode& c) {
  const std::string s = c.get_choice("staleness_scale", "inverse", {"none", "inverse", "inverse_sqrt"});
  return s == "none" ? StalenessScale::none : s == "inverse" ? StalenessScale::inverse : StalenessScale::inverse_sqrt;
}

const char* describe(StalenessScale s) {
  switch (s) {
    case StalenessScale::inverse:
      return "steps scaled by 1/staleness";
    case StalenessScale::inverse_sqrt:
      return "steps scaled by 1/sqrt(staleness)";
    case StalenessScale::none:
      break;
  }
  return "no staleness scaling";
}

OptimizerApply::OptimizerApply(ParameterSet& weights, const RuleContext& ctx, Warmup warmup)
    : m_weights(weights),
      m_backend(ctx.backend),
      m_grad(ParameterSet::like(ctx.layout, ctx.backend)),
      m_opt(nn::make_optimizer(ctx.optimizer, ctx.backend, ctx.layout)),
      m_lr(ctx.optimizer.lr),
      m_warmup(warmup.resolve(ctx.workers)),
      m_schedule(ctx.lr_factor) {}

void OptimizerApply::apply(std::span<const float> gradient, float scale, std::span<float> reply, float lr_scale) {
  MPIGAN_CHECK(gradient.size() == m_grad.size(), "master optimizer: gradient of {} values for {} parameters",
               gradient.size(), m_grad.size());
  MPIGAN_CHECK(reply.empty() || reply.size() == m_grad.size(), "master optimizer: reply of {} values for {} parameters",
               reply.size(), m_grad.size());
  const bool in_place = scale == 1.0f && m_grad.device() == Device::cpu;
  // The optimizer only reads its gradient: with no scale, it reads the received buffer in place.
  const ParameterSet g = in_place ? ParameterSet::over(m_grad, const_cast<float*>(gradient.data())) : ParameterSet{};
  if (!in_place) {
    float* s = m_grad.data();
    for (std::size_t i = 0; i < gradient.size(); ++i) s[i] = scale * gradient[i];
  }
  const ParameterSet& grad = in_place ? g : m_grad;
  const double schedule = m_schedule != nullptr ? *m_schedule : 1.0;
  m_opt->set_lr(m_lr * lr_scale * schedule * Warmup::factor(m_opt->iterations(), m_warmup));
  if (reply.empty()) {
    m_opt->step(m_weights, grad);
  } else {
    ParameterSet mirror = ParameterSet::over(m_grad, reply.data());
    m_opt->step(m_weights, grad, mirror);
  }
  m_opt->set_lr(m_lr);
}

void OptimizerApply::save(train::CheckpointWriter& w, const std::string& prefix) const {
  train::save_optimizer(w, prefix, *m_opt, m_backend);
}

void OptimizerApply::load(const train::CheckpointReader& r, const std::string& prefix) {
  train::load_optimizer(r, prefix, *m_opt, m_backend, "master");
}

}  // namespace mpigan::algos
