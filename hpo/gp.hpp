// Gaussian-process regression for Bayesian optimisation (bayes.hpp), on Eigen.
//
// Model: y_i = f(x_i) + e_i with f ~ GP(0, k) and e_i ~ N(0, s_n^2), on inputs in the unit cube
// (SearchSpace::encode()). The kernel is Matern 5/2 with one length scale per input dimension
// (automatic relevance determination):
//
//   k(x, x') = s_f^2 (1 + sqrt(5) r + 5/3 r^2) exp(-sqrt(5) r),   r^2 = sum_k (x_k - x'_k)^2 / l_k^2
//
// Why Matern 5/2: twice differentiable, so the posterior mean and variance have gradients for the
// acquisition maximisation, without the squared exponential's unrealistic smoothness (Snoek et al.
// 2012, the default of spearmint and scikit-optimize).
//
// Invariants:
//   - Targets are normalised internally to mean 0 and standard deviation 1 (a constant target gets
//     scale 1), so the hyper-parameters s_f^2 and s_n^2 are relative to the targets' variance and
//     their bounds mean the same whatever the objective's units. predict() answers in the
//     original units.
//   - Hyper-parameters live in log space (GpHyper): log l_k, log s_f^2, log s_n^2. The fit maximises
//     the log marginal likelihood (of the normalised targets) with its analytic gradient, by
//     NLopt's L-BFGS inside box bounds (GpOptions), from the current hyper-parameters plus a few
//     random starts drawn from the caller's Rng: the fit is a pure function of (data, start, Rng).
//   - The noise's lower bound (1e-6 of the targets' variance) is the floor that keeps K well
//     conditioned; the Cholesky factorisation additionally retries with growing jitter on the
//     diagonal when K is numerically indefinite (e.g. duplicate inputs with a near-zero noise).
//   - predict()'s variance is that of the latent f (noise excluded): the acquisition functions ask
//     how uncertain the objective is, not how noisy a new measurement of it would be.
#pragma once

#include "mpigan/core/rng.hpp"

#include <Eigen/Cholesky>
#include <Eigen/Core>

#include <functional>

namespace mpigan::hpo {

/// Hyper-parameters of the GP, in log space; variances are relative to the normalised targets.
struct GpHyper {
  Eigen::VectorXd log_length;             ///< log l_k, one per input dimension
  double log_signal = 0.0;                ///< log s_f^2
  double log_noise = -6.907755278982137;  ///< log s_n^2 (default 1e-3)

  /// The defaults for @p dims input dimensions: l_k = 0.5 (half the unit cube), s_f^2 = 1, s_n^2 = 1e-3.
  static GpHyper defaults(Eigen::Index dims);
  /// [log_length..., log_signal, log_noise]: the order of log_marginal_likelihood()'s gradient.
  Eigen::VectorXd pack() const;
  static GpHyper unpack(const Eigen::VectorXd& v);
};

/// Bounds of the hyper-parameter fit (not logs) and its effort.
struct GpOptions {
  double length_min = 1e-2, length_max = 1e1;  ///< on unit-cube inputs
  double signal_min = 1e-2, signal_max = 1e2;  ///< relative to the targets' variance
  double noise_min = 1e-6, noise_max = 1.0;    ///< relative to the targets' variance; min = the floor
  int restarts = 3;                            ///< random starts besides the current hyper-parameters
  int max_evals = 200;                         ///< likelihood evaluations per start
};

/// Posterior of f at one point, in the targets' original units.
struct Prediction {
  double mean = 0;
  double variance = 0;  ///< of the latent f, >= 0
};

/// Posterior mean and standard deviation at one point with their gradients w.r.t. the input.
struct PredictionGrad {
  double mean = 0;
  double std = 0;
  Eigen::VectorXd d_mean;  ///< d mean / dx
  Eigen::VectorXd d_std;   ///< d std / dx (0 where the variance vanishes: std is not differentiable there)
};

class GaussianProcess {
 public:
  explicit GaussianProcess(GpOptions options = {});

  /// Conditions on @p X (n x d, rows are points of [0,1]^d) and @p y (n values). With
  /// @p optimise_hyper the hyper-parameters are fitted first (starts: the current ones, or the
  /// defaults when their dimension differs, plus options().restarts random ones from @p rng);
  /// otherwise the current ones are kept (the defaults if none of the right dimension were set).
  /// Throws Error on mismatched sizes, no rows, or non-finite values, and when K cannot be
  /// factorised even with jitter.
  void fit(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, Rng& rng, bool optimise_hyper = true);

  /// Sets the hyper-parameters; refactorises when data are already fitted (log_length must then
  /// have one entry per input dimension).
  void set_hyper(GpHyper hyper);
  const GpHyper& hyper() const { return m_hyper; }
  const GpOptions& options() const { return m_options; }

  /// The log marginal likelihood of the normalised targets under the current hyper-parameters.
  double log_marginal_likelihood() const { return m_lml; }
  /// The same for @p hyper on the fitted data, with its gradient w.r.t. GpHyper::pack() written
  /// to @p gradient when not null. Returns -infinity when K cannot be factorised.
  double log_marginal_likelihood(const GpHyper& hyper, Eigen::VectorXd* gradient) const;

  Prediction predict(const Eigen::VectorXd& x) const;
  /// predict() for every row of @p X (m x d), into @p mean and @p variance (m values each).
  void predict(const Eigen::MatrixXd& X, Eigen::VectorXd& mean, Eigen::VectorXd& variance) const;
  PredictionGrad predict_with_gradient(const Eigen::VectorXd& x) const;

  bool fitted() const { return m_X.rows() > 0; }
  Eigen::Index size() const { return m_X.rows(); }
  Eigen::Index dims() const { return m_X.cols(); }
  /// The normalisation of the targets: y_normalised = (y - y_mean()) / y_scale().
  double y_mean() const { return m_y_mean; }
  double y_scale() const { return m_y_scale; }
  /// The diagonal jitter the last factorisation needed (0 when none).
  double jitter() const { return m_jitter; }

 private:
  /// K (with noise and jitter) factorised for @p hyper; false when even the largest jitter fails.
  bool factorise(const GpHyper& hyper, Eigen::LLT<Eigen::MatrixXd>& llt, Eigen::MatrixXd& K_f, double& jitter) const;
  void refactorise();
  /// k(x, X_i) for every training row i.
  Eigen::VectorXd cross_kernel(const Eigen::VectorXd& x) const;
  void check_input(const Eigen::VectorXd& x) const;

  GpOptions m_options;
  GpHyper m_hyper;
  Eigen::MatrixXd m_X;  ///< n x d training inputs
  Eigen::VectorXd m_y;  ///< n normalised targets
  double m_y_mean = 0, m_y_scale = 1;
  Eigen::LLT<Eigen::MatrixXd> m_llt;  ///< of K_f + (s_n^2 + jitter) I
  Eigen::VectorXd m_alpha;            ///< K^-1 y
  double m_lml = 0;
  double m_jitter = 0;
};

/// f(x, gradient): the value at @p x, writing d f / dx into gradient (already sized like x).
using BoxObjective = std::function<double(const Eigen::VectorXd& x, Eigen::VectorXd& gradient)>;

/// Maximises @p f over the box [@p lower, @p upper] from @p x (clamped into the box first) with
/// NLopt's L-BFGS and at most @p max_evals evaluations; @p x receives the best point evaluated and
/// the best value is returned. Non-finite values count as -1e300 (the line search backs off).
/// Exceptions thrown by @p f stop the search and propagate. Shared by the GP fit and bayes.cpp's
/// acquisition maximisation, so that NLopt stays a private dependency of the hpo library.
double maximise_in_box(const BoxObjective& f, Eigen::VectorXd& x, const Eigen::VectorXd& lower,
                       const Eigen::VectorXd& upper, int max_evals);

}  // namespace mpigan::hpo
