// High-level features and their scaling (see features.hpp).
#include "mpigan/physics/features.hpp"

#include "mpigan/core/error.hpp"

#include <algorithm>
#include <cmath>

namespace mpigan::physics {

FeatureMatrix high_level_features(const Observables& o, const FeatureOptions& options) {
  const std::int64_t Z = o.dims.w;
  FeatureMatrix m;
  if (options.primary_energy) m.names.push_back("log10_primary_energy");
  m.names.push_back("log10_sampling_fraction");
  for (std::int64_t z = 0; z < Z; ++z) {
    const std::string l = "[" + std::to_string(z) + "]";
    for (const char* f : {"log10_layer_energy_over_ep", "centre_x", "centre_y", "width_x", "width_y"}) {
      m.names.push_back(f + l);
    }
    if (options.sparsity) m.names.push_back("sparsity" + l);
  }
  m.rows = o.events;
  m.cols = static_cast<std::int64_t>(m.names.size());
  m.values.resize(static_cast<std::size_t>(m.rows * m.cols));
  const double eps = options.log_epsilon_gev;
  // log10 of a non-positive sum (possible with negative cells) would be nan: clamp at eps.
  auto log_rel = [eps](double e, double ep) { return std::log10((std::max(e, 0.0) + eps) / ep); };
  for (std::int64_t e = 0; e < o.events; ++e) {
    double* row = m.values.data() + e * m.cols;
    const auto E = static_cast<std::size_t>(e);
    const double ep = o.energy[E];
    if (options.primary_energy) *row++ = std::log10(ep);
    *row++ = log_rel(o.ecal_sum[E], ep);
    for (std::int64_t z = 0; z < Z; ++z) {
      const auto k = static_cast<std::size_t>(e * Z + z);
      *row++ = log_rel(o.profile[2][k], ep);
      *row++ = o.centre_x[k];
      *row++ = o.centre_y[k];
      *row++ = o.width_x[k];
      *row++ = o.width_y[k];
      if (options.sparsity) *row++ = o.layer_sparsity[k];
    }
  }
  return m;
}

const char* to_string(FeatureScaling s) {
  switch (s) {
    case FeatureScaling::standardise:
      return "standardise";
    case FeatureScaling::max_abs:
      return "max_abs";
    case FeatureScaling::none:
      return "none";
  }
  return "?";
}

FeatureScaler FeatureScaler::fit(const FeatureMatrix& ref, FeatureScaling how) {
  const auto d = static_cast<std::size_t>(ref.cols);
  FeatureScaler s;
  s.offset.assign(d, 0.0);
  s.scale.assign(d, 1.0);
  if (how == FeatureScaling::none || ref.rows == 0) return s;
  for (std::size_t c = 0; c < d; ++c) {
    if (how == FeatureScaling::max_abs) {
      double mx = 0;
      for (std::int64_t r = 0; r < ref.rows; ++r) mx = std::max(mx, std::fabs(ref.at(r, static_cast<std::int64_t>(c))));
      if (mx > 0) s.scale[c] = mx;
      continue;
    }
    double mean = 0;
    for (std::int64_t r = 0; r < ref.rows; ++r) mean += ref.at(r, static_cast<std::int64_t>(c));
    mean /= static_cast<double>(ref.rows);
    double var = 0;
    for (std::int64_t r = 0; r < ref.rows; ++r) {
      const double x = ref.at(r, static_cast<std::int64_t>(c)) - mean;
      var += x * x;
    }
    var = ref.rows > 1 ? var / static_cast<double>(ref.rows - 1) : 0.0;
    s.offset[c] = mean;
    if (var > 0) s.scale[c] = std::sqrt(var);
  }
  return s;
}

void FeatureScaler::apply(FeatureMatrix& m) const {
  MPIGAN_CHECK_SHAPE(static_cast<std::size_t>(m.cols) == scale.size(),
                     "FeatureScaler: fitted on {} features, applied to {}", scale.size(), m.cols);
  for (std::int64_t r = 0; r < m.rows; ++r) {
    double* row = m.values.data() + r * m.cols;
    for (std::size_t c = 0; c < scale.size(); ++c) row[c] = (row[c] - offset[c]) / scale[c];
  }
}

}  // namespace mpigan::physics
