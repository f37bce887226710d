// The Keras losses (loss.hpp): batch-mean value and weighted gradient of each, and their names.
#include "mpigan/nn/loss.hpp"

#include "mpigan/core/error.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

namespace mpigan::nn {
namespace {
constexpr double kEps = 1e-7;  // Keras backend epsilon()
double sign(double x) {
  return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
}
}  // namespace

const char* to_string(LossKind k) {
  switch (k) {
    case LossKind::bce:
      return "bce";
    case LossKind::mape:
      return "mape";
    case LossKind::mae:
      return "mae";
    case LossKind::mse:
      return "mse";
  }
  return "?";
}

LossKind parse_loss(const std::string& name) {
  if (name == "bce" || name == "binary_crossentropy") return LossKind::bce;
  if (name == "mape" || name == "mean_absolute_percentage_error") return LossKind::mape;
  if (name == "mae" || name == "mean_absolute_error") return LossKind::mae;
  if (name == "mse" || name == "mean_squared_error") return LossKind::mse;
  MPIGAN_FATAL("unknown loss '{}': expected one of bce, mape, mae, mse", name);
}

double loss_value_and_grad(LossKind kind, std::span<const float> pred, std::span<const float> target, float weight,
                           std::span<float> diff) {
  MPIGAN_CHECK(pred.size() == target.size() && !pred.empty(), "loss {}: {} predictions for {} targets", to_string(kind),
               pred.size(), target.size());
  MPIGAN_CHECK(diff.empty() || diff.size() == pred.size(), "loss {}: gradient buffer of {} for {} predictions",
               to_string(kind), diff.size(), pred.size());
  const double n = static_cast<double>(pred.size());
  const double w = static_cast<double>(weight);
  double total = 0.0;
  for (std::size_t i = 0; i < pred.size(); ++i) {
    const double p = pred[i], y = target[i];
    double l = 0.0, g = 0.0;
    switch (kind) {
      case LossKind::bce: {
        const double pc = std::clamp(p, kEps, 1.0 - kEps);
        l = -(y * std::log(pc + kEps) + (1.0 - y) * std::log(1.0 - pc + kEps));
        const bool clipped = p < kEps || p > 1.0 - kEps;
        g = clipped ? 0.0 : -(y / (pc + kEps) - (1.0 - y) / (1.0 - pc + kEps));
        break;
      }
      case LossKind::mape: {
        const double c = std::max(std::abs(y), kEps);
        l = 100.0 * std::abs(y - p) / c;
        g = 100.0 * sign(p - y) / c;
        break;
      }
      case LossKind::mae:
        l = std::abs(y - p);
        g = sign(p - y);
        break;
      case LossKind::mse:
        l = (y - p) * (y - p);
        g = 2.0 * (p - y);
        break;
    }
    total += l;
    if (!diff.empty()) diff[i] = static_cast<float>(w * g / n);
  }
  return total / n;
}

double binned_mean_ratio_loss(std::span<const float> pred, std::span<const float> target, std::span<const float> key,
                              int bins, float lo, float hi, float weight, std::span<float> diff) {
  MPIGAN_CHECK(pred.size() == target.size() && pred.size() == key.size() && !pred.empty(),
               "binned mean-ratio loss: {} predictions, {} targets, {} keys", pred.size(), target.size(), key.size());
  MPIGAN_CHECK(diff.empty() || diff.size() == pred.size(), "binned mean-ratio loss: gradient buffer of {} for {}",
               diff.size(), pred.size());
  MPIGAN_CHECK(bins >= 1 && hi > lo, "binned mean-ratio loss: {} bins over [{}, {}]", bins, lo, hi);
  const std::size_t n = pred.size();
  std::vector<int> bin(n);
  std::vector<double> sum(static_cast<std::size_t>(bins), 0.0);
  std::vector<std::size_t> count(static_cast<std::size_t>(bins), 0);
  for (std::size_t i = 0; i < n; ++i) {
    const double t = std::max(std::abs(static_cast<double>(target[i])), 1e-7);
    const int b = std::clamp(static_cast<int>((key[i] - lo) / (hi - lo) * static_cast<float>(bins)), 0, bins - 1);
    bin[i] = b;
    sum[static_cast<std::size_t>(b)] += pred[i] / t;
    ++count[static_cast<std::size_t>(b)];
  }
  double total = 0.0;
  std::vector<double> sign(static_cast<std::size_t>(bins), 0.0);
  for (std::size_t b = 0; b < sum.size(); ++b) {
    if (count[b] == 0) continue;
    const double d = sum[b] / static_cast<double>(count[b]) - 1.0;
    total += 100.0 * static_cast<double>(count[b]) / static_cast<double>(n) * std::abs(d);
    sign[b] = d > 0.0 ? 1.0 : (d < 0.0 ? -1.0 : 0.0);
  }
  if (!diff.empty())
    for (std::size_t i = 0; i < n; ++i) {
      const double t = std::max(std::abs(static_cast<double>(target[i])), 1e-7);
      diff[i] =
          static_cast<float>(weight * 100.0 * sign[static_cast<std::size_t>(bin[i])] / (static_cast<double>(n) * t));
    }
  return total;
}

double binned_spread_loss(std::span<const double> x_fake, std::span<const double> r_fake,
                          std::span<const double> x_real, std::span<const double> r_real, int bins, int fitted,
                          std::span<double> grad_r) {
  const std::size_t nf = x_fake.size(), nr = x_real.size();
  MPIGAN_CHECK(r_fake.size() == nf && r_real.size() == nr && nf >= 2,
               "binned spread loss: {} generated conditions and {} residuals, {} reference conditions and {} "
               "residuals (2 generated or more)",
               nf, r_fake.size(), nr, r_real.size());
  MPIGAN_CHECK(
      bins >= 1 && fitted >= 0 && nr >= 2 * static_cast<std::size_t>(bins) && nr > static_cast<std::size_t>(fitted),
      "binned spread loss: {} bins and a fit of {} parameters need at least {} reference samples (2 a bin, "
      "more than the fit's), got {}",
      bins, fitted, std::max(2 * bins, fitted + 1), nr);
  MPIGAN_CHECK(grad_r.empty() || grad_r.size() == nf, "binned spread loss: gradient buffer of {} for {}", grad_r.size(),
               nf);
  // edges: the reference's quantiles k/bins, k = 1 .. bins-1
  std::vector<double> sorted(x_real.begin(), x_real.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<double> edges;
  for (int k = 1; k < bins; ++k)
    edges.push_back(sorted[static_cast<std::size_t>(k) * nr / static_cast<std::size_t>(bins)]);
  const auto bin_of = [&](double x) {
    return static_cast<std::size_t>(std::upper_bound(edges.begin(), edges.end(), x) - edges.begin());
  };
  const auto B = static_cast<std::size_t>(bins);
  std::vector<double> sf(B, 0.0), sr(B, 0.0);
  std::vector<std::size_t> cf(B, 0), cr(B, 0);
  for (std::size_t i = 0; i < nr; ++i) {
    const std::size_t b = bin_of(x_real[i]);
    sr[b] += r_real[i] * r_real[i];
    ++cr[b];
  }
  std::vector<std::size_t> bin(nf);
  for (std::size_t i = 0; i < nf; ++i) {
    bin[i] = bin_of(x_fake[i]);
    sf[bin[i]] += r_fake[i] * r_fake[i];
    ++cf[bin[i]];
  }
  const double unshrink = static_cast<double>(nr) / static_cast<double>(nr - static_cast<std::size_t>(fitted));
  double total = 0.0;
  std::vector<double> slope(B, 0.0);  // dL/d(sum_b r_fake^2)
  for (std::size_t b = 0; b < B; ++b) {
    if (cf[b] < 2 || cr[b] < 2 || sr[b] <= 0.0) continue;
    const double mf = std::max(sf[b] / static_cast<double>(cf[b]), 1e-300);
    const double mr = sr[b] / static_cast<double>(cr[b]) * unshrink;
    const double half_log = 0.5 * std::log(mf / mr);
    const double share = static_cast<double>(cf[b]) / static_cast<double>(nf);
    total += share * half_log * half_log;
    // d/d(sum) of share (ln(sum / c / mr) / 2)^2 = share * half_log / sum
    slope[b] = share * half_log / std::max(sf[b], 1e-300);
  }
  if (!grad_r.empty())
    for (std::size_t i = 0; i < nf; ++i) grad_r[i] = 2.0 * r_fake[i] * slope[bin[i]];
  return total;
}

namespace {
constexpr std::array<double, 5> kRqAlphas{0.2, 0.5, 1.0, 2.0, 5.0};
/// The rational-quadratic mixture at scaled squared distance s, and dk/ds in @p slope.
double rq_kernel(double s, double& slope) {
  double k = 0.0;
  slope = 0.0;
  for (const double a : kRqAlphas) {
    const double base = 1.0 + s / (2.0 * a);
    const double p = std::pow(base, -a);
    k += p;
    slope += -0.5 * p / base;  // d/ds base^-a = -a base^(-a-1) / (2a)
  }
  return k;
}
}  // namespace

double mmd2_rq(std::span<const double> x, std::span<const double> y, std::size_t d, std::span<const double> scale,
               std::span<double> grad_x) {
  MPIGAN_CHECK(d >= 1 && scale.size() == d && x.size() % d == 0 && y.size() % d == 0,
               "mmd: samples of {} and {} values and {} scales for dimension {}", x.size(), y.size(), scale.size(), d);
  const std::size_t n = x.size() / d, m = y.size() / d;
  MPIGAN_CHECK(n >= 2 && m >= 2, "mmd: needs two samples or more on each side, got {} and {}", n, m);
  MPIGAN_CHECK(grad_x.empty() || grad_x.size() == x.size(), "mmd: gradient buffer of {} for {}", grad_x.size(),
               x.size());
  if (!grad_x.empty()) std::fill(grad_x.begin(), grad_x.end(), 0.0);
  std::vector<double> w2(d), delta(d);
  for (std::size_t k = 0; k < d; ++k) w2[k] = scale[k] * scale[k] / static_cast<double>(d);
  // k(a, b); dk/da = slope * 2 w2 (a - b) is added to @p grad_a times @p coef and to @p grad_b
  // (dk/db = -dk/da) times @p coef, where given.
  auto pair = [&](const double* a, const double* b, double* grad_a, double* grad_b, double coef) {
    double s = 0.0;
    for (std::size_t k = 0; k < d; ++k) {
      delta[k] = a[k] - b[k];
      s += w2[k] * delta[k] * delta[k];
    }
    double slope = 0.0;
    const double kv = rq_kernel(s, slope);
    for (std::size_t k = 0; k < d; ++k) {
      const double da = coef * slope * 2.0 * w2[k] * delta[k];
      if (grad_a != nullptr) grad_a[k] += da;
      if (grad_b != nullptr) grad_b[k] -= da;
    }
    return kv;
  };
  const double cxx = 1.0 / static_cast<double>(n * (n - 1)), cyy = 1.0 / static_cast<double>(m * (m - 1));
  const double cxy = 2.0 / static_cast<double>(n * m);
  auto grad_row = [&](std::size_t i) { return grad_x.empty() ? nullptr : grad_x.data() + i * d; };
  double xx = 0.0, yy = 0.0, xy = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    // each unordered pair once: it enters the sum twice
    for (std::size_t j = i + 1; j < n; ++j)
      xx += 2.0 * pair(x.data() + i * d, x.data() + j * d, grad_row(i), grad_row(j), 2.0 * cxx);
    for (std::size_t j = 0; j < m; ++j) xy += pair(x.data() + i * d, y.data() + j * d, grad_row(i), nullptr, -cxy);
  }
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = i + 1; j < m; ++j) yy += 2.0 * pair(y.data() + i * d, y.data() + j * d, nullptr, nullptr, 0.0);
  return cxx * xx + cyy * yy - cxy * xy;
}

EnergyStandardiser::EnergyStandardiser(std::span<const double> reference, std::size_t d, double floor)
    : m_row(d), m_floor(floor), m_mean(3 * d, 0.0), m_var(2 * d, 0.0) {
  MPIGAN_CHECK(d >= 2 && reference.size() % d == 0 && reference.size() / d >= 3 && floor > 0.0,
               "energy standardiser: {} values for rows of {} (x and a feature at least), 3 rows or more, floor {} > 0",
               reference.size(), d, floor);
  const auto n = static_cast<Eigen::Index>(reference.size() / d);
  Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> f(
      reference.data(), n, static_cast<Eigen::Index>(d));
  m_x0 = f.col(0).mean();
  Eigen::MatrixXd a(n, 3);
  a.col(0).setOnes();
  a.col(1) = f.col(0).array() - m_x0;
  a.col(2) = a.col(1).array().square();
  // least squares through a complete orthogonal decomposition: the minimum-norm fit when the batch
  // holds one energy only (a rank-one design), the ordinary one otherwise
  const Eigen::CompleteOrthogonalDecomposition<Eigen::MatrixXd> quad(a), line(a.leftCols(2));
  for (std::size_t k = 1; k < d; ++k) {
    const Eigen::VectorXd y = f.col(static_cast<Eigen::Index>(k));
    const Eigen::Vector3d mu = quad.solve(y);
    const Eigen::VectorXd r2 = (y - a * mu).array().square();
    const Eigen::Vector2d v = line.solve(r2);
    for (int i = 0; i < 3; ++i) m_mean[3 * k + static_cast<std::size_t>(i)] = mu[i];
    for (int i = 0; i < 2; ++i) m_var[2 * k + static_cast<std::size_t>(i)] = v[i];
  }
}

double EnergyStandardiser::mean(std::size_t k, double x) const {
  const double u = x - m_x0;
  return m_mean[3 * k] + u * (m_mean[3 * k + 1] + u * m_mean[3 * k + 2]);
}

double EnergyStandardiser::sigma(std::size_t k, double x) const {
  const double v = m_var[2 * k] + (x - m_x0) * m_var[2 * k + 1];
  return std::sqrt(std::max(v, m_floor * m_floor));
}

void EnergyStandardiser::apply(std::span<const double> in, std::span<double> out) const {
  MPIGAN_CHECK(in.size() == out.size() && in.size() % m_row == 0,
               "energy standardiser: {} values in, {} out, rows of {}", in.size(), out.size(), m_row);
  for (std::size_t i = 0; i < in.size() / m_row; ++i) {
    const double* a = in.data() + i * m_row;
    double* b = out.data() + i * m_row;
    b[0] = a[0];
    for (std::size_t k = 1; k < m_row; ++k) b[k] = (a[k] - mean(k, a[0])) / sigma(k, a[0]);
  }
}

}  // namespace mpigan::nn
