// The search space's encoding and sampling (space.hpp).
#include "mpigan/hpo/space.hpp"
#include "mpigan/core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace mpigan::hpo {

const char* dim_kind_name(DimKind k) {
  switch (k) {
    case DimKind::real:
      return "real";
    case DimKind::log_real:
      return "log-real";
    case DimKind::integer:
      return "integer";
    case DimKind::log_integer:
      return "log-integer";
    case DimKind::categorical:
      return "categorical";
  }
  return "?";
}

namespace {

/// The dimension's value range in the space the optimisers see (log for log kinds). Integers get
/// half a step beyond each bound, so that rounding gives every integer the same share of [0, 1].
std::pair<double, double> warped_range(const Dimension& d) {
  double lo = d.low, hi = d.high;
  if (d.integral()) {
    lo -= 0.5 - 1e-9;
    hi += 0.5 - 1e-9;
    if (d.log_scale()) lo = std::max(lo, d.low * 0.5);  // stays > 0
  }
  if (d.log_scale()) return {std::log(lo), std::log(hi)};
  return {lo, hi};
}

double to_unit(const Dimension& d, double v) {
  const auto [lo, hi] = warped_range(d);
  const double w = d.log_scale() ? std::log(v) : v;
  return hi > lo ? std::clamp((w - lo) / (hi - lo), 0.0, 1.0) : 0.5;
}

double from_unit(const Dimension& d, double u) {
  const auto [lo, hi] = warped_range(d);
  const double w = lo + std::clamp(u, 0.0, 1.0) * (hi - lo);
  double v = d.log_scale() ? std::exp(w) : w;
  if (d.integral()) v = std::round(v);
  return std::clamp(v, d.low, d.high);
}

}  // namespace

SearchSpace::SearchSpace(std::vector<Dimension> dims) : m_dims(std::move(dims)) {
  std::set<std::string> keys;
  for (const Dimension& d : m_dims) {
    const std::string name = fmt::format("search dimension '{}' ({})", d.key, dim_kind_name(d.kind));
    if (d.key.empty()) MPIGAN_THROW(ConfigError, "search dimension without a key");
    if (!keys.insert(d.key).second) MPIGAN_THROW(ConfigError, "{}: the key appears twice", name);
    if (d.numeric()) {
      if (!std::isfinite(d.low) || !std::isfinite(d.high) || !(d.low <= d.high))
        MPIGAN_THROW(ConfigError, "{}: bounds [{}, {}] must be finite with low <= high", name, d.low, d.high);
      if (d.log_scale() && d.low <= 0) MPIGAN_THROW(ConfigError, "{}: a log scale needs low > 0, got {}", name, d.low);
      if (d.integral() && (d.low != std::round(d.low) || d.high != std::round(d.high)))
        MPIGAN_THROW(ConfigError, "{}: integer bounds must be whole, got [{}, {}]", name, d.low, d.high);
      m_encoded += 1;
    } else {
      if (d.choices.size() < 2)
        MPIGAN_THROW(ConfigError, "{}: needs at least 2 choices, got {}", name, d.choices.size());
      m_encoded += d.choices.size();
    }
  }
}

Eigen::VectorXd SearchSpace::encode(const Point& p) const {
  Eigen::VectorXd u = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(m_encoded));
  Eigen::Index j = 0;
  for (std::size_t i = 0; i < m_dims.size(); ++i) {
    const Dimension& d = m_dims[i];
    if (d.numeric()) {
      u[j++] = to_unit(d, p[i]);
    } else {
      u[j + static_cast<Eigen::Index>(p[i])] = 1.0;
      j += static_cast<Eigen::Index>(d.choices.size());
    }
  }
  return u;
}

Point SearchSpace::decode(const Eigen::VectorXd& u) const {
  Point p(m_dims.size());
  Eigen::Index j = 0;
  for (std::size_t i = 0; i < m_dims.size(); ++i) {
    const Dimension& d = m_dims[i];
    if (d.numeric()) {
      p[i] = from_unit(d, u[j++]);
    } else {
      const auto n = static_cast<Eigen::Index>(d.choices.size());
      Eigen::Index best = 0;
      u.segment(j, n).maxCoeff(&best);
      p[i] = static_cast<double>(best);
      j += n;
    }
  }
  return p;
}

Point SearchSpace::sample(Rng& rng) const {
  Point p(m_dims.size());
  for (std::size_t i = 0; i < m_dims.size(); ++i) {
    const Dimension& d = m_dims[i];
    p[i] = d.numeric() ? from_unit(d, rng.uniform_double()) : static_cast<double>(rng.below(d.choices.size()));
  }
  return p;
}

bool SearchSpace::contains(const Point& p) const {
  if (p.size() != m_dims.size()) return false;
  for (std::size_t i = 0; i < m_dims.size(); ++i) {
    const Dimension& d = m_dims[i];
    const double v = p[i];
    if (!std::isfinite(v)) return false;
    if (d.numeric()) {
      if (v < d.low || v > d.high) return false;
      if (d.integral() && v != std::round(v)) return false;
    } else if (v < 0 || v != std::round(v) || v >= static_cast<double>(d.choices.size())) {
      return false;
    }
  }
  return true;
}

std::string SearchSpace::value_text(const Point& p, std::size_t i) const {
  const Dimension& d = m_dims[i];
  if (!d.numeric()) return d.choices[static_cast<std::size_t>(p[i])];
  if (d.integral()) return fmt::format("{}", static_cast<long long>(p[i]));
  return fmt::format("{:.6g}", p[i]);
}

std::vector<std::string> SearchSpace::overrides(const Point& p) const {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < m_dims.size(); ++i) out.push_back(m_dims[i].key + "=" + value_text(p, i));
  return out;
}

}  // namespace mpigan::hpo
