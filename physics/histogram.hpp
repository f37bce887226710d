// Histograms with a common binning and the separation power between two of them
// (CaloChallenge's "chi2", eq. 15 of arXiv:2009.03796).
//
// Conventions: a histogram has B equal bins on [lo, hi]; values below lo or above hi are folded
// into the first or last bin (so a generated sample that runs off the reference's range is
// counted, not dropped as np.histogram would), NaN values are skipped. The common range of two
// samples is [min(q_a, q_b), max(Q_a, Q_b)] with q, Q their 0.5 % and 99.5 % quantiles: it covers
// both samples but one wild event cannot squash every other event into one bin.
#pragma once

#include <span>
#include <utility>
#include <vector>

namespace mpigan::physics {

class Histogram {
 public:
  /// @p bins >= 1 equal bins on [lo, hi]; lo == hi is widened to [lo - 0.5, lo + 0.5].
  Histogram(int bins, double lo, double hi);
  void fill(double value, double weight = 1.0);
  void fill(std::span<const double> values);
  int bins() const { return static_cast<int>(m_counts.size()); }
  double lo() const { return m_lo; }
  double hi() const { return m_hi; }
  const std::vector<double>& counts() const { return m_counts; }
  double total() const;

 private:
  double m_lo, m_hi, m_inv_width;
  std::vector<double> m_counts;
};

/// [lo, hi] covering the central 1 - 2 @p tail of each of the two samples (see the header comment).
/// Empty samples are ignored; both empty gives [0, 1].
std::pair<double, double> common_range(std::span<const double> a, std::span<const double> b, double tail = 0.005);

/// Separation power of two histograms of the same binning, each normalised to unit sum:
/// @f$ S = \tfrac12 \sum_i \frac{(h_{1,i} - h_{2,i})^2}{h_{1,i} + h_{2,i}} @f$, bins with
/// @f$ h_{1,i} + h_{2,i} = 0 @f$ skipped. 0 for identical shapes, 1 for disjoint ones. NaN when
/// either histogram is empty (sums to 0). Throws ShapeError on different bin counts.
double separation_power(std::span<const double> h1, std::span<const double> h2);

}  // namespace mpigan::physics
