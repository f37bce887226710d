// KPD: unbiased polynomial-kernel MMD^2 (see kernel_distance.hpp).
#include "mpigan/physics/kernel_distance.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/rng.hpp"
#include "mpigan/physics/stats.hpp"

#include <omp.h>
#include <Eigen/Dense>

#include <algorithm>

namespace mpigan::physics {
namespace {

// Gram blocks in float: a dot product of d <= a few hundred standardised features is exact to
// ~1e-6 relative, the kernel sums over 10^7 pairs are accumulated in double, and the rounding
// errors, of either sign, average out far below the statistical error of MMD^2 (1e-4..1e-3 here).
// Float halves the GEMM's cost, which is most of KPD's.
using RowMatrixF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixF = Eigen::MatrixXf;
constexpr Eigen::Index kBlock = 256;  // rows of a Gram block: 256 x 5000 floats = 5 MB, reused

// sum over the column range of k(g) = (g / d + 1)^p of one Gram column.
inline double kernel_sum(const float* g, Eigen::Index n, float inv_d, int degree) {
  double total = 0;
  switch (degree) {
    case 1:
      for (Eigen::Index i = 0; i < n; ++i) total += g[i] * inv_d + 1.0f;
      break;
    case 2:
      for (Eigen::Index i = 0; i < n; ++i) {
        const float b = g[i] * inv_d + 1.0f;
        total += b * b;
      }
      break;
    case 3:
      for (Eigen::Index i = 0; i < n; ++i) {
        const float b = g[i] * inv_d + 1.0f;
        total += b * b * b;
      }
      break;
    case 4:
      for (Eigen::Index i = 0; i < n; ++i) {
        const float b = g[i] * inv_d + 1.0f, b2 = b * b;
        total += b2 * b2;
      }
      break;
    default:
      for (Eigen::Index i = 0; i < n; ++i) {
        const double b = static_cast<double>(g[i]) * inv_d + 1.0;
        double r = b;
        for (int k = 1; k < degree; ++k) r *= b;
        total += r;
      }
  }
  return total;
}

// sum_{i != j} k(x_i, x_j), from the strict upper triangle of the Gram matrix; @p buf holds one
// Gram block (kBlock x rows floats).
double sum_off_diagonal(const RowMatrixF& x, float inv_d, int degree, std::vector<float>& buf) {
  const Eigen::Index n = x.rows();
  double total = 0;
  for (Eigen::Index r0 = 0; r0 < n; r0 += kBlock) {
    const Eigen::Index rb = std::min(kBlock, n - r0);
    Eigen::Map<MatrixF> g(buf.data(), rb, n - r0);
    g.noalias() = x.middleRows(r0, rb) * x.middleRows(r0, n - r0).transpose();  // rb x (n - r0)
    for (Eigen::Index j = 1; j < g.cols(); ++j) total += kernel_sum(g.col(j).data(), std::min(rb, j), inv_d, degree);
  }
  return 2.0 * total;
}

double sum_cross(const RowMatrixF& x, const RowMatrixF& y, float inv_d, int degree, std::vector<float>& buf) {
  double total = 0;
  for (Eigen::Index r0 = 0; r0 < x.rows(); r0 += kBlock) {
    const Eigen::Index rb = std::min(kBlock, x.rows() - r0);
    Eigen::Map<MatrixF> g(buf.data(), rb, y.rows());
    g.noalias() = x.middleRows(r0, rb) * y.transpose();
    for (Eigen::Index j = 0; j < g.cols(); ++j) total += kernel_sum(g.col(j).data(), rb, inv_d, degree);
  }
  return total;
}

RowMatrixF rows_of(const FeatureMatrix& m, std::span<const std::int64_t> rows) {
  RowMatrixF x(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(m.cols));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const double* src = m.values.data() + rows[i] * m.cols;
    for (std::int64_t c = 0; c < m.cols; ++c)
      x(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(c)) = static_cast<float>(src[c]);
  }
  return x;
}

double mmd2(const RowMatrixF& x, const RowMatrixF& y, int degree) {
  const double m = static_cast<double>(x.rows()), n = static_cast<double>(y.rows());
  const float inv_d = 1.0f / static_cast<float>(x.cols());
  std::vector<float> buf(
      static_cast<std::size_t>(std::min(kBlock, std::max(x.rows(), y.rows())) * std::max(x.rows(), y.rows())));
  return sum_off_diagonal(x, inv_d, degree, buf) / (m * (m - 1)) +
         sum_off_diagonal(y, inv_d, degree, buf) / (n * (n - 1)) - 2.0 * sum_cross(x, y, inv_d, degree, buf) / (m * n);
}

}  // namespace

double mmd2_unbiased_polynomial(const FeatureMatrix& x, const FeatureMatrix& y, int degree) {
  MPIGAN_CHECK_SHAPE(x.cols == y.cols && x.cols > 0, "mmd2_unbiased_polynomial: {} and {} features", x.cols, y.cols);
  MPIGAN_CHECK(x.rows >= 2 && y.rows >= 2 && degree >= 1,
               "mmd2_unbiased_polynomial: {} and {} rows (>= 2), degree {} (>= 1)", x.rows, y.rows, degree);
  return mmd2(rows_of(x, every_row(x.rows)), rows_of(y, every_row(y.rows)), degree);
}

Kpd kpd(const FeatureMatrix& ref_in, const FeatureMatrix& gen_in, const KpdOptions& options) {
  MPIGAN_CHECK_SHAPE(ref_in.cols == gen_in.cols, "kpd: reference has {} features, generated {}", ref_in.cols,
                     gen_in.cols);
  MPIGAN_CHECK(ref_in.rows >= 2 && gen_in.rows >= 2, "kpd: {} reference and {} generated events, need >= 2 each",
               ref_in.rows, gen_in.rows);
  MPIGAN_CHECK(options.batches >= 1 && options.degree >= 1 && options.batch_size >= 2,
               "kpd: batches {} (>= 1), degree {} (>= 1), batch_size {} (>= 2)", options.batches, options.degree,
               options.batch_size);
  const FeatureScaler scaler = FeatureScaler::fit(ref_in, options.scaling);
  FeatureMatrix ref = ref_in, gen = gen_in;
  scaler.apply(ref);
  scaler.apply(gen);
  Kpd r;
  // At most half the smaller sample: batches drawn without replacement must differ for their
  // spread to measure the error (a batch of the whole sample is the same every time).
  r.batch_size = std::max<std::int64_t>(2, std::min(options.batch_size, std::min(ref.rows, gen.rows) / 2));
  r.values.resize(static_cast<std::size_t>(options.batches));
  const int threads = options.threads > 0 ? options.threads : omp_get_max_threads();
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int b = 0; b < options.batches; ++b) {
    Rng ra(options.seed, 2 * static_cast<std::uint64_t>(b)), rg(options.seed, 2 * static_cast<std::uint64_t>(b) + 1);
    const RowMatrixF x = rows_of(ref, sample_without_replacement(ref.rows, r.batch_size, ra));
    const RowMatrixF y = rows_of(gen, sample_without_replacement(gen.rows, r.batch_size, rg));
    r.values[static_cast<std::size_t>(b)] = mmd2(x, y, options.degree);
  }
  r.value = median(r.values);
  r.error = (quantile(r.values, 0.83725) - quantile(r.values, 0.16275)) / 2.0;
  return r;
}

}  // namespace mpigan::physics
