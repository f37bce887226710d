// Statistics helpers (see stats.hpp).
#include "mpigan/physics/stats.hpp"

#include "mpigan/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace mpigan::physics {

double mean(std::span<const double> v) {
  if (v.empty()) return 0.0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double variance(std::span<const double> v) {
  if (v.size() < 2) return 0.0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(v.size() - 1);
}

double quantile(std::span<const double> v, double q) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::vector<double> c(v.begin(), v.end());
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(c.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const double frac = pos - static_cast<double>(lo);
  std::nth_element(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(lo), c.end());
  const double a = c[lo];
  if (frac == 0.0 || lo + 1 >= c.size()) return a;
  const double b = *std::min_element(c.begin() + static_cast<std::ptrdiff_t>(lo) + 1, c.end());
  return a + frac * (b - a);
}

double median(std::span<const double> v) {
  return quantile(v, 0.5);
}

std::vector<std::int64_t> sample_without_replacement(std::int64_t n, std::int64_t k, Rng& rng) {
  k = std::clamp<std::int64_t>(k, 0, n);
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) idx[static_cast<std::size_t>(i)] = i;
  for (std::int64_t i = 0; i < k; ++i) {
    const auto j = i + static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(n - i)));
    std::swap(idx[static_cast<std::size_t>(i)], idx[static_cast<std::size_t>(j)]);
  }
  idx.resize(static_cast<std::size_t>(k));
  return idx;
}

std::vector<std::int64_t> every_row(std::int64_t n) {
  std::vector<std::int64_t> r(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) r[static_cast<std::size_t>(i)] = i;
  return r;
}

LineFit fit_line_nonnegative(std::span<const double> x, std::span<const double> y) {
  const std::size_t n = x.size();
  MPIGAN_CHECK(n == y.size() && n >= 3, "fit_line_nonnegative: {} x and {} y values, need >= 3 pairs", n, y.size());
  MPIGAN_CHECK(std::set<double>(x.begin(), x.end()).size() >= 2, "fit_line_nonnegative: all {} x values are equal", n);
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sx += x[i];
    sy += y[i];
    sxx += x[i] * x[i];
    sxy += x[i] * y[i];
  }
  const double dn = static_cast<double>(n);
  const double det = dn * sxx - sx * sx;
  LineFit f;
  f.slope = (dn * sxy - sx * sy) / det;
  f.intercept = (sy - f.slope * sx) / dn;
  if (f.intercept < 0) {  // through the origin
    f.intercept = 0;
    f.slope = sxx > 0 ? std::max(0.0, sxy / sxx) : 0.0;
  }
  if (f.slope < 0) {  // constant
    f.slope = 0;
    f.intercept = std::max(0.0, sy / dn);
  }
  double rss = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double r = y[i] - f.intercept - f.slope * x[i];
    rss += r * r;
  }
  // [(A^T A)^-1]_00 for the design rows (1, x_i) = sxx / det.
  f.intercept_error = std::sqrt(rss / (dn - 2.0) * sxx / det);
  return f;
}

}  // namespace mpigan::physics
