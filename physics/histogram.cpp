// Histograms and the separation power (see histogram.hpp).
#include "mpigan/physics/histogram.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/physics/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mpigan::physics {

Histogram::Histogram(int bins, double lo, double hi) : m_lo(lo), m_hi(hi) {
  MPIGAN_CHECK(bins >= 1, "Histogram: {} bins, expected >= 1", bins);
  MPIGAN_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi, "Histogram: range [{}, {}] is not a finite interval",
               lo, hi);
  if (m_hi == m_lo) {
    m_lo -= 0.5;
    m_hi += 0.5;
  }
  m_inv_width = bins / (m_hi - m_lo);
  m_counts.assign(static_cast<std::size_t>(bins), 0.0);
}

void Histogram::fill(double value, double weight) {
  if (std::isnan(value)) return;
  const double pos = (value - m_lo) * m_inv_width;
  const int last = bins() - 1;
  const int k = pos <= 0 ? 0 : (pos >= last ? last : static_cast<int>(pos));
  m_counts[static_cast<std::size_t>(k)] += weight;
}

void Histogram::fill(std::span<const double> values) {
  for (double v : values) fill(v);
}

double Histogram::total() const {
  double s = 0;
  for (double c : m_counts) s += c;
  return s;
}

std::pair<double, double> common_range(std::span<const double> a, std::span<const double> b, double tail) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (std::span<const double> s : {a, b}) {
    if (s.empty()) continue;
    lo = std::min(lo, quantile(s, tail));
    hi = std::max(hi, quantile(s, 1.0 - tail));
  }
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0.0, 1.0};
  return {lo, hi};
}

double separation_power(std::span<const double> h1, std::span<const double> h2) {
  MPIGAN_CHECK_SHAPE(h1.size() == h2.size(), "separation_power: histograms of {} and {} bins", h1.size(), h2.size());
  double t1 = 0, t2 = 0;
  for (std::size_t i = 0; i < h1.size(); ++i) {
    t1 += h1[i];
    t2 += h2[i];
  }
  if (!(t1 > 0) || !(t2 > 0)) return std::numeric_limits<double>::quiet_NaN();
  double s = 0;
  for (std::size_t i = 0; i < h1.size(); ++i) {
    const double p = h1[i] / t1, q = h2[i] / t2;
    if (p + q > 0) s += (p - q) * (p - q) / (p + q);
  }
  return 0.5 * s;
}

}  // namespace mpigan::physics
