// The guarded 3DGAN validation metric (see gan3d_metric.hpp).
#include "mpigan/physics/gan3d_metric.hpp"

#include "mpigan/core/error.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace mpigan::physics {
namespace {

double mean_over(const std::vector<double>& v, std::span<const std::int64_t> events) {
  if (events.empty()) return 0.0;  // the mean over no events: see the header (empty generated bin)
  double s = 0;
  for (std::int64_t e : events) s += v[static_cast<std::size_t>(e)];
  return s / static_cast<double>(events.size());
}

std::vector<double> mean_profile(const Observables& o, int axis, std::span<const std::int64_t> events) {
  std::vector<double> m(static_cast<std::size_t>(o.dims[axis]), 0.0);
  for (std::int64_t e : events) {
    const auto p = o.profile_of(axis, e);
    for (std::size_t i = 0; i < m.size(); ++i) m[i] += p[i];
  }
  if (!events.empty()) {
    for (double& x : m) x /= static_cast<double>(events.size());
  }
  return m;
}

}  // namespace

Gan3dMetric gan3d_metric(const Observables& ref, const Observables& gen, std::span<const EventBin> bins,
                         const Gan3dOptions& options) {
  MPIGAN_CHECK_SHAPE(ref.dims == gen.dims, "gan3d_metric: reference extents {} but generated {}", ref.dims, gen.dims);
  const bool use_angle = options.angle && !ref.measured_angle.empty() && !gen.measured_angle.empty();
  Gan3dMetric m;
  double sum_pos = 0, sum_prof = 0, sum_ang = 0;
  for (const EventBin& bin : bins) {
    const std::vector<std::int64_t> er = select_bin(ref, bin), eg = select_bin(gen, bin);
    Gan3dBin b;
    b.bin = bin.label;
    b.n_ref = static_cast<std::int64_t>(er.size());
    b.n_gen = static_cast<std::int64_t>(eg.size());
    if (er.empty()) {
      ++m.bins_without_reference;
      m.bins.push_back(b);
      continue;
    }
    // Moments: k = 1, 2 along x, y, z.
    double pos = 0;
    int terms = 0;
    const std::array<const std::array<std::vector<double>, 3>*, 2> rk = {&ref.m1, &ref.m2}, gk = {&gen.m1, &gen.m2};
    for (std::size_t k = 0; k < 2; ++k) {
      for (std::size_t a = 0; a < 3; ++a) {
        const double r = mean_over((*rk[k])[a], er), g = mean_over((*gk[k])[a], eg);
        if (r == 0.0) {
          ++b.moment_terms_skipped;
          continue;
        }
        pos += std::fabs(r - g) / std::fabs(r);
        ++terms;
      }
    }
    b.moments = terms > 0 ? pos / terms : 0.0;
    // Profiles.
    double prof = 0;
    for (int a = 0; a < 3; ++a) {
      const std::vector<double> pr = mean_profile(ref, a, er), pg = mean_profile(gen, a, eg);
      double peak = 0;
      for (double v : pr) peak = std::max(peak, v);
      const double cut = options.profile_min_fraction * peak;
      double s = 0;
      int cells = 0;
      for (std::size_t i = 0; i < pr.size(); ++i) {
        if (!(pr[i] > cut)) {
          ++b.profile_cells_skipped;
          continue;
        }
        s += std::fabs(pr[i] - pg[i]) / pr[i];
        ++cells;
      }
      prof += cells > 0 ? s / cells : 0.0;
    }
    b.profiles = prof / 3.0;
    if (use_angle) {
      const double r = mean_over(ref.measured_angle, er), g = mean_over(gen.measured_angle, eg);
      b.angle = r != 0.0 ? std::fabs(r - g) / std::fabs(r) : 0.0;
      sum_ang += b.angle;
    }
    sum_pos += b.moments;
    sum_prof += b.profiles;
    ++m.bins_used;
    m.bins.push_back(b);
  }
  if (m.bins_used > 0) {
    m.moments = sum_pos / m.bins_used;
    m.profiles = sum_prof / m.bins_used;
    m.total = m.moments + m.profiles;
    if (use_angle) {
      m.angle = sum_ang / m.bins_used;
      m.total += m.angle;
    }
  }
  return m;
}

}  // namespace mpigan::physics
