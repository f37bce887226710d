// Frechet distance and FPD with extrapolation (see frechet.hpp).
#include "mpigan/physics/frechet.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/rng.hpp"
#include "mpigan/physics/stats.hpp"

#include <omp.h>
#include <Eigen/Dense>

#include <algorithm>
#include <cmath>

namespace mpigan::physics {
namespace {

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct Gaussian {
  Eigen::VectorXd mean;
  Eigen::MatrixXd cov;
};

// Mean and covariance (divided by n - 1, as np.cov) of the rows @p rows of @p m.
Gaussian fit_gaussian(const FeatureMatrix& m, std::span<const std::int64_t> rows) {
  const auto n = static_cast<Eigen::Index>(rows.size()), d = static_cast<Eigen::Index>(m.cols);
  RowMatrix x(n, d);
  for (Eigen::Index i = 0; i < n; ++i) {
    x.row(i) = Eigen::Map<const Eigen::RowVectorXd>(m.values.data() + rows[static_cast<std::size_t>(i)] * m.cols, d);
  }
  Gaussian g;
  g.mean = x.colwise().mean().transpose();
  x.rowwise() -= g.mean.transpose();
  Eigen::MatrixXd lower = Eigen::MatrixXd::Zero(d, d);
  lower.selfadjointView<Eigen::Lower>().rankUpdate(x.transpose(),
                                                   1.0 / static_cast<double>(std::max<Eigen::Index>(n - 1, 1)));
  g.cov = lower.selfadjointView<Eigen::Lower>();
  return g;
}

// tr (C_a C_b)^(1/2) from the symmetric form: C_a = B B^T with B = P^T L D^(1/2) from Eigen's
// pivoted LDL^T (robust for semi-definite C_a: D's entries are clamped at 0), and the eigenvalues
// of C_a C_b are those of the symmetric PSD matrix M = B^T C_b B (SelfAdjointEigenSolver, values
// only). Same eigenvalues as C_a^(1/2) C_b C_a^(1/2), at a third of the cost of forming C_a^(1/2)
// with eigenvectors: FPD computes 2 x 200 of these.
double frechet(const Gaussian& a, const Gaussian& b) {
  const Eigen::LDLT<Eigen::MatrixXd> ldlt(a.cov);
  const Eigen::VectorXd root_d = ldlt.vectorD().cwiseMax(0.0).cwiseSqrt();
  Eigen::MatrixXd factor = ldlt.matrixL();
  factor = factor * root_d.asDiagonal();
  factor = ldlt.transpositionsP().transpose() * factor;  // B = P^T L D^(1/2)
  const Eigen::MatrixXd m = factor.transpose() * b.cov * factor;
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> em(m, Eigen::EigenvaluesOnly);
  const double tr_sqrt = em.eigenvalues().cwiseMax(0.0).cwiseSqrt().sum();
  return (a.mean - b.mean).squaredNorm() + a.cov.trace() + b.cov.trace() - 2.0 * tr_sqrt;
}

}  // namespace

double frechet_distance(std::span<const double> mu1, std::span<const double> cov1, std::span<const double> mu2,
                        std::span<const double> cov2) {
  const auto d = static_cast<Eigen::Index>(mu1.size());
  MPIGAN_CHECK_SHAPE(mu2.size() == mu1.size() && cov1.size() == mu1.size() * mu1.size() && cov2.size() == cov1.size(),
                     "frechet_distance: means of {} and {}, covariances of {} and {} values", mu1.size(), mu2.size(),
                     cov1.size(), cov2.size());
  Gaussian a{Eigen::Map<const Eigen::VectorXd>(mu1.data(), d), Eigen::Map<const Eigen::MatrixXd>(cov1.data(), d, d)};
  Gaussian b{Eigen::Map<const Eigen::VectorXd>(mu2.data(), d), Eigen::Map<const Eigen::MatrixXd>(cov2.data(), d, d)};
  return frechet(a, b);
}

double frechet_distance(const FeatureMatrix& a, const FeatureMatrix& b) {
  MPIGAN_CHECK_SHAPE(a.cols == b.cols, "frechet_distance: {} and {} features", a.cols, b.cols);
  return frechet(fit_gaussian(a, every_row(a.rows)), fit_gaussian(b, every_row(b.rows)));
}

namespace {

// The Gaussian of features scaled x -> (x - offset) / scale, from the Gaussian of the raw ones.
Gaussian scaled(const Gaussian& g, const FeatureScaler& s) {
  const auto d = static_cast<Eigen::Index>(s.scale.size());
  const Eigen::VectorXd inv = Eigen::Map<const Eigen::VectorXd>(s.scale.data(), d).cwiseInverse();
  Gaussian r;
  r.mean = (g.mean - Eigen::Map<const Eigen::VectorXd>(s.offset.data(), d)).cwiseProduct(inv);
  r.cov = inv.asDiagonal() * g.cov * inv.asDiagonal();
  return r;
}

}  // namespace

std::vector<Fpd> fpd(const FeatureMatrix& ref, const FeatureMatrix& gen, const FpdOptions& options,
                     std::span<const FeatureScaling> scalings) {
  MPIGAN_CHECK_SHAPE(ref.cols == gen.cols, "fpd: reference has {} features, generated {}", ref.cols, gen.cols);
  MPIGAN_CHECK(ref.rows >= 10 && gen.rows >= 10, "fpd: {} reference and {} generated events, need >= 10 each", ref.rows,
               gen.rows);
  MPIGAN_CHECK(options.points >= 3 && options.batches >= 1, "fpd: points {} (>= 3) and batches {} (>= 1)",
               options.points, options.batches);
  MPIGAN_CHECK(!scalings.empty(), "fpd: no scaling asked for");
  std::vector<FeatureScaler> scalers;
  for (FeatureScaling how : scalings) scalers.push_back(FeatureScaler::fit(ref, how));

  const std::int64_t n_max = std::min(ref.rows, gen.rows);
  const std::int64_t hi = options.max_samples > 0 ? std::min(options.max_samples, n_max) : n_max;
  const std::int64_t lo = std::clamp<std::int64_t>(options.min_samples > 0 ? options.min_samples : hi / 3, 2, hi);
  MPIGAN_CHECK(lo < hi, "fpd: min_samples {} must be below max_samples {}", lo, hi);
  // Sizes evenly spaced in 1/N (JetNet: 1 / linspace(1/min, 1/max, points)).
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(options.points));
  for (int k = 0; k < options.points; ++k) {
    const double t = static_cast<double>(k) / (options.points - 1);
    const double inv = (1.0 - t) / static_cast<double>(lo) + t / static_cast<double>(hi);
    sizes[static_cast<std::size_t>(k)] =
        std::clamp<std::int64_t>(static_cast<std::int64_t>(std::llround(1.0 / inv)), lo, hi);
  }

  // One Gaussian fit of the raw features per subsample, scaled for each scaling (a diagonal affine
  // map of its mean and covariance): the fit, N d^2, is most of the cost, so a second scaling
  // costs only its Frechet distances.
  const int tasks = options.points * options.batches;
  const std::size_t ns = scalers.size();
  std::vector<double> fd(static_cast<std::size_t>(tasks) * ns);
  const int threads = options.threads > 0 ? options.threads : omp_get_max_threads();
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int t = 0; t < tasks; ++t) {
    const std::int64_t n = sizes[static_cast<std::size_t>(t / options.batches)];
    Rng ra(options.seed, 2 * static_cast<std::uint64_t>(t)), rg(options.seed, 2 * static_cast<std::uint64_t>(t) + 1);
    const auto ia = sample_without_replacement(ref.rows, n, ra), ig = sample_without_replacement(gen.rows, n, rg);
    const Gaussian a = fit_gaussian(ref, ia), g = fit_gaussian(gen, ig);
    for (std::size_t s = 0; s < ns; ++s)
      fd[static_cast<std::size_t>(t) * ns + s] = frechet(scaled(a, scalers[s]), scaled(g, scalers[s]));
  }

  std::vector<Fpd> out(ns);
  for (std::size_t s = 0; s < ns; ++s) {
    Fpd& r = out[s];
    std::vector<double> x, y;
    for (int k = 0; k < options.points; ++k) {
      double sum = 0;
      for (int b = 0; b < options.batches; ++b) sum += fd[static_cast<std::size_t>(k * options.batches + b) * ns + s];
      const FpdPoint p{sizes[static_cast<std::size_t>(k)], sum / options.batches};
      r.points.push_back(p);
      x.push_back(1.0 / static_cast<double>(p.n));
      y.push_back(p.mean);
    }
    const LineFit f = fit_line_nonnegative(x, y);
    r.value = f.intercept;
    r.error = f.intercept_error;
    r.slope = f.slope;
  }
  return out;
}

Fpd fpd(const FeatureMatrix& ref, const FeatureMatrix& gen, const FpdOptions& options) {
  const FeatureScaling how[] = {options.scaling};
  return fpd(ref, gen, options, how).front();
}

}  // namespace mpigan::physics
