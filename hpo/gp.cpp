// Gaussian-process regression (gp.hpp): the Matern 5/2 ARD kernel, the log marginal likelihood
// with its analytic gradient, the multi-start hyper-parameter fit, and the posterior.
//
// Notation (Rasmussen & Williams 2006, ch. 2 and 5): K = K_f + (s_n^2 + jitter) I on the training
// inputs, L its Cholesky factor, alpha = K^-1 y for the normalised targets y. Then
//
//   log p(y) = -1/2 y' alpha - sum_i log L_ii - n/2 log(2 pi)
//   d log p / d theta_j = 1/2 tr((alpha alpha' - K^-1) dK/dtheta_j)
//
// and with g(r) = s_f^2 (5/3) (1 + sqrt(5) r) exp(-sqrt(5) r), the Matern 5/2 derivatives are
//   dk/d log l_k = g(r) (x_k - x'_k)^2 / l_k^2,   dk/d log s_f^2 = k,   dK/d log s_n^2 = s_n^2 I,
//   dk(x, x')/dx_k = -g(r) (x_k - x'_k) / l_k^2
// (none is singular at r = 0: the 1/r of dr/dx cancels against dk/dr = -r g(r)).
#include "mpigan/hpo/gp.hpp"
#include "mpigan/core/error.hpp"

#include <fmt/format.h>
#include <nlopt.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <memory>
#include <numbers>

namespace mpigan::hpo {

namespace {

constexpr double kSqrt5 = 2.23606797749978969640917366873128;

/// Matern 5/2 without the signal variance, of the scaled distance r.
double matern52(double r) {
  return (1.0 + kSqrt5 * r + (5.0 / 3.0) * r * r) * std::exp(-kSqrt5 * r);
}

/// g(r) / s_f^2 (see the file comment): -(dk/dr) / (r s_f^2).
double matern52_g(double r) {
  return (5.0 / 3.0) * (1.0 + kSqrt5 * r) * std::exp(-kSqrt5 * r);
}

/// Scaled distance between row a of A and row b of B, with inverse length scales @p inv_l.
double scaled_distance(const Eigen::MatrixXd& A, Eigen::Index a, const Eigen::MatrixXd& B, Eigen::Index b,
                       const Eigen::VectorXd& inv_l) {
  double r2 = 0;
  for (Eigen::Index k = 0; k < A.cols(); ++k) {
    const double t = (A(a, k) - B(b, k)) * inv_l[k];
    r2 += t * t;
  }
  return std::sqrt(r2);
}

Eigen::VectorXd inverse_lengths(const GpHyper& h) {
  return (-h.log_length.array()).exp().matrix();
}

/// Diagonal jitter tried in turn, relative to K's mean diagonal.
constexpr double kJitters[] = {0.0, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2};

struct NloptDeleter {
  void operator()(nlopt_opt o) const { nlopt_destroy(o); }
};

struct BoxContext {
  const BoxObjective* f = nullptr;
  nlopt_opt opt = nullptr;
  Eigen::VectorXd x, grad, best_x;
  double best = -std::numeric_limits<double>::infinity();
  std::exception_ptr error;
};

double box_callback(unsigned n, const double* x, double* grad, void* data) {
  auto& c = *static_cast<BoxContext*>(data);
  try {
    c.x = Eigen::Map<const Eigen::VectorXd>(x, n);
    c.grad.setZero(n);
    double v = (*c.f)(c.x, c.grad);
    if (!std::isfinite(v) || !c.grad.allFinite()) {
      v = -1e300;
      c.grad.setZero();
    }
    if (grad != nullptr) Eigen::Map<Eigen::VectorXd>(grad, n) = c.grad;
    if (v > c.best || c.best_x.size() == 0) {
      c.best = v;
      c.best_x = c.x;
    }
    return v;
  } catch (...) {
    c.error = std::current_exception();
    nlopt_force_stop(c.opt);
    return 0.0;
  }
}

}  // namespace

double maximise_in_box(const BoxObjective& f, Eigen::VectorXd& x, const Eigen::VectorXd& lower,
                       const Eigen::VectorXd& upper, int max_evals) {
  const auto n = static_cast<unsigned>(x.size());
  if (lower.size() != x.size() || upper.size() != x.size() || n == 0)
    MPIGAN_THROW(Error, "maximise_in_box: x has {} values, the bounds {} and {} (need equal, > 0)", x.size(),
                 lower.size(), upper.size());
  std::unique_ptr<nlopt_opt_s, NloptDeleter> opt(nlopt_create(NLOPT_LD_LBFGS, n));
  if (!opt) MPIGAN_THROW(Error, "maximise_in_box: nlopt_create(NLOPT_LD_LBFGS) failed");
  BoxContext c;
  c.f = &f;
  c.opt = opt.get();
  x = x.cwiseMax(lower).cwiseMin(upper);
  nlopt_set_lower_bounds(opt.get(), lower.data());
  nlopt_set_upper_bounds(opt.get(), upper.data());
  nlopt_set_max_objective(opt.get(), box_callback, &c);
  nlopt_set_maxeval(opt.get(), std::max(1, max_evals));
  nlopt_set_ftol_rel(opt.get(), 1e-10);
  nlopt_set_xtol_rel(opt.get(), 1e-7);
  double value = 0;
  // The return code is not checked: L-BFGS often ends with NLOPT_ROUNDOFF_LIMITED near a flat
  // optimum, and whatever it says, the best point evaluated (tracked by the callback) is the answer.
  nlopt_optimize(opt.get(), x.data(), &value);
  if (c.error) std::rethrow_exception(c.error);
  if (c.best_x.size() == 0) {  // no evaluation at all (cannot happen with maxeval >= 1): evaluate x
    Eigen::VectorXd g = Eigen::VectorXd::Zero(x.size());
    return f(x, g);
  }
  x = c.best_x;
  return c.best;
}

GpHyper GpHyper::defaults(Eigen::Index dims) {
  GpHyper h;
  h.log_length = Eigen::VectorXd::Constant(dims, std::log(0.5));
  h.log_signal = 0.0;
  h.log_noise = std::log(1e-3);
  return h;
}

Eigen::VectorXd GpHyper::pack() const {
  Eigen::VectorXd v(log_length.size() + 2);
  v << log_length, log_signal, log_noise;
  return v;
}

GpHyper GpHyper::unpack(const Eigen::VectorXd& v) {
  if (v.size() < 3) MPIGAN_THROW(Error, "GpHyper::unpack: {} values, need >= 3", v.size());
  GpHyper h;
  h.log_length = v.head(v.size() - 2);
  h.log_signal = v[v.size() - 2];
  h.log_noise = v[v.size() - 1];
  return h;
}

GaussianProcess::GaussianProcess(GpOptions options) : m_options(options) {
  // Eigen's default LLT leaves its info flag uninitialised, and copying an unfitted process would
  // read it (UBSan: invalid enum load); factorising the empty matrix sets it.
  m_llt.compute(Eigen::MatrixXd(0, 0));
  const GpOptions& o = m_options;
  if (!(o.length_min > 0 && o.length_min <= o.length_max) || !(o.signal_min > 0 && o.signal_min <= o.signal_max) ||
      !(o.noise_min > 0 && o.noise_min <= o.noise_max) || o.restarts < 0 || o.max_evals < 1)
    MPIGAN_THROW(Error,
                 "GpOptions: need 0 < min <= max for length [{}, {}], signal [{}, {}], noise [{}, {}], restarts >= 0 "
                 "(got {}) and max_evals >= 1 (got {})",
                 o.length_min, o.length_max, o.signal_min, o.signal_max, o.noise_min, o.noise_max, o.restarts,
                 o.max_evals);
}

bool GaussianProcess::factorise(const GpHyper& h, Eigen::LLT<Eigen::MatrixXd>& llt, Eigen::MatrixXd& K_f,
                                double& jitter) const {
  const Eigen::Index n = m_X.rows();
  const Eigen::VectorXd inv_l = inverse_lengths(h);
  const double s2 = std::exp(h.log_signal);
  K_f.resize(n, n);
  for (Eigen::Index a = 0; a < n; ++a) {
    K_f(a, a) = s2;
    for (Eigen::Index b = 0; b < a; ++b) K_f(a, b) = K_f(b, a) = s2 * matern52(scaled_distance(m_X, a, m_X, b, inv_l));
  }
  const double noise = std::exp(h.log_noise);
  for (const double j : kJitters) {
    jitter = j * (s2 + noise);
    Eigen::MatrixXd K = K_f;
    K.diagonal().array() += noise + jitter;
    llt.compute(K);
    // A pivot below 1e-7 of sqrt(diag) means K is singular to rounding (duplicate inputs with no
    // noise): the factor "succeeds" but its solves amplify rounding by 1e14, so jitter is added.
    const double min_pivot = llt.info() == Eigen::Success ? llt.matrixLLT().diagonal().minCoeff() : 0.0;
    if (min_pivot * min_pivot > 1e-14 * (s2 + noise)) return true;
  }
  return false;
}

double GaussianProcess::log_marginal_likelihood(const GpHyper& h, Eigen::VectorXd* gradient) const {
  const Eigen::Index n = m_X.rows(), d = m_X.cols();
  if (n == 0) MPIGAN_THROW(Error, "GaussianProcess::log_marginal_likelihood: no data fitted");
  if (h.log_length.size() != d)
    MPIGAN_THROW(Error, "GaussianProcess: {} length scales for {}-dimensional inputs", h.log_length.size(), d);
  Eigen::LLT<Eigen::MatrixXd> llt;
  Eigen::MatrixXd K_f;
  double jitter = 0;
  if (!factorise(h, llt, K_f, jitter)) {
    if (gradient != nullptr) gradient->setZero(d + 2);
    return -std::numeric_limits<double>::infinity();
  }
  const Eigen::VectorXd alpha = llt.solve(m_y);
  const double lml = -0.5 * m_y.dot(alpha) - llt.matrixLLT().diagonal().array().log().sum() -
                     0.5 * static_cast<double>(n) * std::log(2.0 * std::numbers::pi);
  if (gradient == nullptr) return lml;

  // W = alpha alpha' - K^-1; each gradient entry is 1/2 sum_ab W_ab dK_ab.
  Eigen::MatrixXd W = -llt.solve(Eigen::MatrixXd::Identity(n, n));
  W.noalias() += alpha * alpha.transpose();
  const Eigen::VectorXd inv_l = inverse_lengths(h);
  const double s2 = std::exp(h.log_signal);
  gradient->setZero(d + 2);
  Eigen::VectorXd& g = *gradient;
  for (Eigen::Index a = 0; a < n; ++a) {
    for (Eigen::Index b = 0; b < a; ++b) {  // off-diagonal pairs twice (W and dK symmetric); r = 0 on the diagonal
      const double w = 2.0 * W(a, b) * s2 * matern52_g(scaled_distance(m_X, a, m_X, b, inv_l));
      for (Eigen::Index k = 0; k < d; ++k) {
        const double t = (m_X(a, k) - m_X(b, k)) * inv_l[k];
        g[k] += w * t * t;
      }
    }
  }
  g.head(d) *= 0.5;
  g[d] = 0.5 * (W.array() * K_f.array()).sum();
  g[d + 1] = 0.5 * std::exp(h.log_noise) * W.trace();
  return lml;
}

void GaussianProcess::fit(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, Rng& rng, bool optimise_hyper) {
  if (X.rows() == 0 || X.cols() == 0 || X.rows() != y.size())
    MPIGAN_THROW(Error, "GaussianProcess::fit: X is {} x {} and y has {} values (need n x d and n, with n, d >= 1)",
                 X.rows(), X.cols(), y.size());
  if (!X.allFinite() || !y.allFinite()) MPIGAN_THROW(Error, "GaussianProcess::fit: X or y holds a non-finite value");
  m_X = X;
  m_y_mean = y.mean();
  const double var = (y.array() - m_y_mean).square().mean();
  m_y_scale = var > 1e-24 * std::max(1.0, m_y_mean * m_y_mean) ? std::sqrt(var) : 1.0;
  m_y = (y.array() - m_y_mean) / m_y_scale;
  if (m_hyper.log_length.size() != X.cols()) m_hyper = GpHyper::defaults(X.cols());

  if (optimise_hyper && X.rows() >= 2) {
    const Eigen::Index d = X.cols();
    Eigen::VectorXd lower(d + 2), upper(d + 2);
    lower << Eigen::VectorXd::Constant(d, std::log(m_options.length_min)), std::log(m_options.signal_min),
        std::log(m_options.noise_min);
    upper << Eigen::VectorXd::Constant(d, std::log(m_options.length_max)), std::log(m_options.signal_max),
        std::log(m_options.noise_max);
    const BoxObjective objective = [this](const Eigen::VectorXd& v, Eigen::VectorXd& grad) {
      return log_marginal_likelihood(GpHyper::unpack(v), &grad);
    };
    Eigen::VectorXd best = m_hyper.pack();
    double best_lml = -std::numeric_limits<double>::infinity();
    for (int s = 0; s <= m_options.restarts; ++s) {
      Eigen::VectorXd v = m_hyper.pack();  // start 0: the current (or default) hyper-parameters
      if (s > 0)
        for (Eigen::Index j = 0; j < v.size(); ++j) v[j] = lower[j] + rng.uniform_double() * (upper[j] - lower[j]);
      const double lml = maximise_in_box(objective, v, lower, upper, m_options.max_evals);
      if (lml > best_lml) {
        best_lml = lml;
        best = v;
      }
    }
    m_hyper = GpHyper::unpack(best);
  }
  refactorise();
}

void GaussianProcess::set_hyper(GpHyper hyper) {
  if (fitted() && hyper.log_length.size() != m_X.cols())
    MPIGAN_THROW(Error, "GaussianProcess::set_hyper: {} length scales for {}-dimensional inputs",
                 hyper.log_length.size(), m_X.cols());
  m_hyper = std::move(hyper);
  if (fitted()) refactorise();
}

void GaussianProcess::refactorise() {
  Eigen::MatrixXd K_f;
  if (!factorise(m_hyper, m_llt, K_f, m_jitter))
    MPIGAN_THROW(
        Error,
        "GaussianProcess: the {} x {} kernel matrix is not positive definite even with jitter {} (log noise {}, "
        "log signal {})",
        m_X.rows(), m_X.rows(), m_jitter, m_hyper.log_noise, m_hyper.log_signal);
  m_alpha = m_llt.solve(m_y);
  m_lml = -0.5 * m_y.dot(m_alpha) - m_llt.matrixLLT().diagonal().array().log().sum() -
          0.5 * static_cast<double>(m_X.rows()) * std::log(2.0 * std::numbers::pi);
}

void GaussianProcess::check_input(const Eigen::VectorXd& x) const {
  if (!fitted()) MPIGAN_THROW(Error, "GaussianProcess::predict before fit");
  if (x.size() != m_X.cols())
    MPIGAN_THROW(Error, "GaussianProcess::predict: x has {} values, the inputs have {}", x.size(), m_X.cols());
}

Eigen::VectorXd GaussianProcess::cross_kernel(const Eigen::VectorXd& x) const {
  const Eigen::VectorXd inv_l = inverse_lengths(m_hyper);
  const double s2 = std::exp(m_hyper.log_signal);
  const Eigen::MatrixXd row = x.transpose();
  Eigen::VectorXd k(m_X.rows());
  for (Eigen::Index i = 0; i < m_X.rows(); ++i) k[i] = s2 * matern52(scaled_distance(row, 0, m_X, i, inv_l));
  return k;
}

Prediction GaussianProcess::predict(const Eigen::VectorXd& x) const {
  check_input(x);
  const Eigen::VectorXd k = cross_kernel(x);
  const Eigen::VectorXd v = m_llt.matrixL().solve(k);
  const double var = std::max(0.0, std::exp(m_hyper.log_signal) - v.squaredNorm());
  return {m_y_mean + m_y_scale * k.dot(m_alpha), m_y_scale * m_y_scale * var};
}

void GaussianProcess::predict(const Eigen::MatrixXd& X, Eigen::VectorXd& mean, Eigen::VectorXd& variance) const {
  if (!fitted()) MPIGAN_THROW(Error, "GaussianProcess::predict before fit");
  if (X.cols() != m_X.cols())
    MPIGAN_THROW(Error, "GaussianProcess::predict: X has {} columns, the inputs have {}", X.cols(), m_X.cols());
  const Eigen::VectorXd inv_l = inverse_lengths(m_hyper);
  const double s2 = std::exp(m_hyper.log_signal);
  Eigen::MatrixXd Ks(m_X.rows(), X.rows());  // n x m
  for (Eigen::Index j = 0; j < X.rows(); ++j)
    for (Eigen::Index i = 0; i < m_X.rows(); ++i) Ks(i, j) = s2 * matern52(scaled_distance(X, j, m_X, i, inv_l));
  mean = (Ks.transpose() * m_alpha).array() * m_y_scale + m_y_mean;
  m_llt.matrixL().solveInPlace(Ks);
  variance = ((s2 - Ks.colwise().squaredNorm().array()).max(0.0) * (m_y_scale * m_y_scale)).matrix().transpose();
}

PredictionGrad GaussianProcess::predict_with_gradient(const Eigen::VectorXd& x) const {
  check_input(x);
  const Eigen::Index n = m_X.rows(), d = m_X.cols();
  const Eigen::VectorXd inv_l = inverse_lengths(m_hyper);
  const double s2 = std::exp(m_hyper.log_signal);
  const Eigen::MatrixXd row = x.transpose();
  Eigen::VectorXd k(n);
  Eigen::MatrixXd dk(n, d);  // dk_i / dx_k
  for (Eigen::Index i = 0; i < n; ++i) {
    const double r = scaled_distance(row, 0, m_X, i, inv_l);
    k[i] = s2 * matern52(r);
    const double g = s2 * matern52_g(r);
    for (Eigen::Index j = 0; j < d; ++j) dk(i, j) = -g * (x[j] - m_X(i, j)) * inv_l[j] * inv_l[j];
  }
  PredictionGrad out;
  out.mean = m_y_mean + m_y_scale * k.dot(m_alpha);
  out.d_mean = m_y_scale * (dk.transpose() * m_alpha);
  const Eigen::VectorXd beta = m_llt.solve(k);
  const double var = s2 - k.dot(beta);
  // Below ~1e-12 of the signal variance the difference is rounding noise: std is taken as flat.
  if (var > 1e-12 * s2) {
    const double sd = std::sqrt(var);
    out.std = m_y_scale * sd;
    out.d_std = (-m_y_scale / sd) * (dk.transpose() * beta);  // d sqrt(var) = dvar / (2 sd), dvar = -2 dk' beta
  } else {
    out.std = m_y_scale * std::sqrt(std::max(0.0, var));
    out.d_std = Eigen::VectorXd::Zero(d);
  }
  return out;
}

}  // namespace mpigan::hpo
