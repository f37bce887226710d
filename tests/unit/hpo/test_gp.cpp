// The Gaussian process (hpo/gp.hpp): its posterior against hand numbers and against a closed-form
// solve written out here, its input gradients and the log marginal likelihood's gradient against
// central differences, and what the hyper-parameter fit recovers (short length scales for wiggly
// functions, long ones for smooth or irrelevant inputs).
#include "mpigan/core/error.hpp"
#include "mpigan/hpo/gp.hpp"

#include <doctest/doctest.h>

#include <Eigen/LU>

#include <cmath>

using namespace mpigan;
using namespace mpigan::hpo;

namespace {

/// Matern 5/2 written out independently of gp.cpp: s2 (1 + sqrt5 r + 5/3 r^2) exp(-sqrt5 r).
double matern(double x, double x2, double length, double s2) {
  const double r = std::abs(x - x2) / length;
  return s2 * (1.0 + std::sqrt(5.0) * r + 5.0 / 3.0 * r * r) * std::exp(-std::sqrt(5.0) * r);
}

GpHyper hyper_1d(double length, double signal, double noise) {
  GpHyper h;
  h.log_length = Eigen::VectorXd::Constant(1, std::log(length));
  h.log_signal = std::log(signal);
  h.log_noise = std::log(noise);
  return h;
}

Eigen::MatrixXd column(std::initializer_list<double> v) {
  Eigen::MatrixXd X(static_cast<Eigen::Index>(v.size()), 1);
  Eigen::Index i = 0;
  for (double x : v) X(i++, 0) = x;
  return X;
}

Eigen::VectorXd vec(std::initializer_list<double> v) {
  Eigen::VectorXd y(static_cast<Eigen::Index>(v.size()));
  Eigen::Index i = 0;
  for (double x : v) y[i++] = x;
  return y;
}

GaussianProcess fixed_gp(const Eigen::MatrixXd& X, const Eigen::VectorXd& y, const GpHyper& h) {
  GaussianProcess gp;
  gp.set_hyper(h);
  Rng rng(1);
  gp.fit(X, y, rng, /*optimise_hyper=*/false);
  return gp;
}

}  // namespace

TEST_CASE("gp: one and two training points against hand numbers") {
  // One point: the normalised target is 0 (scale 1), so the mean is the target everywhere and
  // var(x) = s2 - k(x)^2 / (s2 + noise). At distance 0.3 = one length scale, k/s2 = (1 + sqrt5 +
  // 5/3) exp(-sqrt5) = 0.5239941088318203; with s2 = 2, noise = 0.01: 2 - (2 k)^2 / 2.01.
  {
    const GaussianProcess gp = fixed_gp(column({0.0}), vec({4.0}), hyper_1d(0.3, 2.0, 0.01));
    const Prediction p = gp.predict(Eigen::VectorXd::Constant(1, 0.3));
    CHECK(p.mean == doctest::Approx(4.0).epsilon(1e-12));
    CHECK(p.variance == doctest::Approx(1.4535923858896447).epsilon(1e-12));
  }
  // Two points 0 and 0.3 with targets 1 and 3: mean 2, scale 1, normalised (-1, 1); l = 0.3,
  // s2 = 1, no noise. K = [[1, k], [k, 1]] with k = m(1); at x = 0.6, k* = (m(2), m(1)) with
  // m(2) = 0.13866021913850426, so mean = 2 + (m(1) - m(2)) / (1 - k) = 2.8095149594633315 and
  // var = 1 - (m(2)^2 + m(1)^2 - 2 k m(1) m(2)) / (1 - k^2) = 0.6999674596109591.
  {
    const GaussianProcess gp = fixed_gp(column({0.0, 0.3}), vec({1.0, 3.0}), hyper_1d(0.3, 1.0, 1e-14));
    const Prediction p = gp.predict(Eigen::VectorXd::Constant(1, 0.6));
    CHECK(gp.y_mean() == doctest::Approx(2.0));
    CHECK(gp.y_scale() == doctest::Approx(1.0));
    CHECK(p.mean == doctest::Approx(2.8095149594633315).epsilon(1e-10));
    CHECK(p.variance == doctest::Approx(0.6999674596109591).epsilon(1e-10));
  }
}

TEST_CASE("gp: posterior against a closed-form solve with normalised targets") {
  const Eigen::MatrixXd X = column({0.1, 0.35, 0.5, 0.85});
  const Eigen::VectorXd y = vec({3.0, -1.0, 0.5, 7.0});
  const double length = 0.25, s2 = 1.7, noise = 0.03;
  const GaussianProcess gp = fixed_gp(X, y, hyper_1d(length, s2, noise));

  // By hand: normalise y by its mean and population std; K = K_f + noise I (4 x 4), solved by LU
  // (not the Cholesky of gp.cpp); mean = m + s k*' K^-1 yn, var = s^2 (s2 - k*' K^-1 k*).
  const double m = y.mean();
  const double s = std::sqrt((y.array() - m).square().mean());
  const Eigen::VectorXd yn = (y.array() - m) / s;
  Eigen::Matrix4d K;
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) K(a, b) = matern(X(a, 0), X(b, 0), length, s2) + (a == b ? noise : 0.0);
  const Eigen::Matrix4d K_inv = K.partialPivLu().inverse();
  for (const double x : {0.0, 0.2, 0.42, 0.7, 1.0}) {
    CAPTURE(x);
    Eigen::Vector4d k;
    for (int a = 0; a < 4; ++a) k[a] = matern(x, X(a, 0), length, s2);
    const double want_mean = m + s * k.dot(K_inv * yn);
    const double want_var = s * s * (s2 - k.dot(K_inv * k));
    const Prediction p = gp.predict(Eigen::VectorXd::Constant(1, x));
    // Both are the same 4 x 4 algebra by different factorisations: they agree to rounding
    // (cond(K) < 1e3 here, so ~1e-13 relative); 1e-9 leaves room and still catches any formula slip.
    CHECK(p.mean == doctest::Approx(want_mean).epsilon(1e-9));
    CHECK(p.variance == doctest::Approx(want_var).epsilon(1e-9));
  }
  // The batch form answers the same.
  Eigen::MatrixXd Q = column({0.0, 0.42, 1.0});
  Eigen::VectorXd mean, var;
  gp.predict(Q, mean, var);
  for (Eigen::Index i = 0; i < Q.rows(); ++i) {
    const Prediction p = gp.predict(Q.row(i).transpose());
    CHECK(mean[i] == doctest::Approx(p.mean).epsilon(1e-12));
    CHECK(var[i] == doctest::Approx(p.variance).epsilon(1e-12));
  }
}

TEST_CASE("gp: interpolates with tiny noise; the variance grows away from the data") {
  const Eigen::MatrixXd X = column({0.1, 0.2, 0.3, 0.45});
  const Eigen::VectorXd y = vec({10.0, 12.0, 11.0, 15.0});
  const GaussianProcess gp = fixed_gp(X, y, hyper_1d(0.2, 1.0, 1e-10));
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    const Prediction p = gp.predict(X.row(i).transpose());
    CHECK(p.mean == doctest::Approx(y[i]).epsilon(1e-6));
    CHECK(p.variance < 1e-6);
  }
  double previous = gp.predict(Eigen::VectorXd::Constant(1, 0.45)).variance;
  for (const double x : {0.5, 0.6, 0.75, 0.9, 1.0}) {
    const double v = gp.predict(Eigen::VectorXd::Constant(1, x)).variance;
    CAPTURE(x);
    CHECK(v > previous);
    previous = v;
  }
  // Far from every point the variance tends to the prior's, s2 times the targets' variance.
  const double prior = gp.y_scale() * gp.y_scale();
  CHECK(previous < prior);
  CHECK(previous > 0.9 * prior);
}

TEST_CASE("gp: input gradients of the posterior mean and std against central differences") {
  Rng rng(11);
  Eigen::MatrixXd X(7, 2);
  Eigen::VectorXd y(7);
  for (Eigen::Index i = 0; i < 7; ++i) {
    X(i, 0) = rng.uniform_double();
    X(i, 1) = rng.uniform_double();
    y[i] = std::sin(5 * X(i, 0)) + X(i, 1) * X(i, 1);
  }
  GpHyper h;
  h.log_length = Eigen::Vector2d(std::log(0.3), std::log(0.6));
  h.log_signal = std::log(1.3);
  h.log_noise = std::log(1e-3);
  const GaussianProcess gp = fixed_gp(X, y, h);
  const double eps = 1e-6;
  for (int t = 0; t < 5; ++t) {
    const Eigen::Vector2d x(rng.uniform_double(), rng.uniform_double());
    const PredictionGrad pg = gp.predict_with_gradient(x);
    const Prediction p = gp.predict(x);
    CHECK(pg.mean == doctest::Approx(p.mean).epsilon(1e-12));
    CHECK(pg.std == doctest::Approx(std::sqrt(p.variance)).epsilon(1e-10));
    for (int k = 0; k < 2; ++k) {
      Eigen::Vector2d xp = x, xm = x;
      xp[k] += eps;
      xm[k] -= eps;
      const Prediction pp = gp.predict(xp), pm = gp.predict(xm);
      const double fd_mean = (pp.mean - pm.mean) / (2 * eps);
      const double fd_std = (std::sqrt(pp.variance) - std::sqrt(pm.variance)) / (2 * eps);
      CAPTURE(t);
      CAPTURE(k);
      // Central differences: truncation ~eps^2 |f'''| ~ 1e-12 * 1e3 (length 0.3), rounding
      // ~1e-16 |f| / eps ~ 1e-10; 1e-6 absolute + relative separates them from any real error.
      CHECK(std::abs(pg.d_mean[k] - fd_mean) < 1e-6 * (1 + std::abs(fd_mean)));
      CHECK(std::abs(pg.d_std[k] - fd_std) < 1e-6 * (1 + std::abs(fd_std)));
    }
  }
}

TEST_CASE("gp: the log marginal likelihood's gradient against central differences") {
  Rng rng(5);
  const Eigen::Index n = 9, d = 3;
  Eigen::MatrixXd X(n, d);
  Eigen::VectorXd y(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index k = 0; k < d; ++k) X(i, k) = rng.uniform_double();
    y[i] = std::cos(4 * X(i, 0)) + 0.5 * X(i, 1) + 0.1 * rng.normal_double();
  }
  GaussianProcess gp;
  gp.fit(X, y, rng, false);
  for (const double noise : {1e-4, 0.05, 0.5}) {
    GpHyper h;
    h.log_length = Eigen::Vector3d(std::log(0.2), std::log(0.7), std::log(2.0));
    h.log_signal = std::log(0.8);
    h.log_noise = std::log(noise);
    Eigen::VectorXd grad;
    const double lml = gp.log_marginal_likelihood(h, &grad);
    REQUIRE(std::isfinite(lml));
    REQUIRE(grad.size() == d + 2);
    CHECK(gp.log_marginal_likelihood(h, nullptr) == lml);
    const Eigen::VectorXd v = h.pack();
    const double eps = 1e-5;
    for (Eigen::Index j = 0; j < v.size(); ++j) {
      Eigen::VectorXd vp = v, vm = v;
      vp[j] += eps;
      vm[j] -= eps;
      const double fd = (gp.log_marginal_likelihood(GpHyper::unpack(vp), nullptr) -
                         gp.log_marginal_likelihood(GpHyper::unpack(vm), nullptr)) /
                        (2 * eps);
      CAPTURE(noise);
      CAPTURE(j);
      CAPTURE(fd);
      CAPTURE(grad[j]);
      // Truncation ~eps^2 |f'''| ~ 1e-10 * O(10); rounding ~1e-16 |lml| / eps ~ 1e-10 (|lml| ~ 10).
      CHECK(std::abs(grad[j] - fd) < 1e-6 * (1 + std::abs(fd)));
    }
  }
}

TEST_CASE("gp: fitting raises the likelihood and recovers the length scales' ordering") {
  auto fit_1d = [](double frequency) {
    const Eigen::Index n = 20;
    Eigen::MatrixXd X(n, 1);
    Eigen::VectorXd y(n);
    for (Eigen::Index i = 0; i < n; ++i) {
      X(i, 0) = (static_cast<double>(i) + 0.5) / static_cast<double>(n);
      y[i] = std::sin(frequency * X(i, 0));
    }
    GaussianProcess gp;
    Rng rng(3);
    gp.fit(X, y, rng, false);
    const double lml_default = gp.log_marginal_likelihood();
    gp.fit(X, y, rng, true);
    CHECK(gp.log_marginal_likelihood() >= lml_default);
    return std::exp(gp.hyper().log_length[0]);
  };
  const double smooth = fit_1d(3.0);   // one gentle arc over the cube
  const double wiggly = fit_1d(30.0);  // ~5 periods, 4 points per period
  MESSAGE("fitted length scales: smooth ", smooth, ", wiggly ", wiggly);
  CHECK(smooth > 0.3);
  CHECK(wiggly < 0.15);
  CHECK(smooth > 3 * wiggly);

  // ARD: a target that ignores x1 gets a longer length scale there than on x0.
  Rng rng(9);
  const Eigen::Index n = 30;
  Eigen::MatrixXd X(n, 2);
  Eigen::VectorXd y(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    X(i, 0) = rng.uniform_double();
    X(i, 1) = rng.uniform_double();
    y[i] = std::sin(8 * X(i, 0));
  }
  GaussianProcess gp;
  gp.fit(X, y, rng, true);
  const double l0 = std::exp(gp.hyper().log_length[0]), l1 = std::exp(gp.hyper().log_length[1]);
  MESSAGE("ARD length scales: relevant ", l0, ", irrelevant ", l1);
  CHECK(l1 > 5 * l0);
  // And it predicts an unseen point well.
  const Prediction p = gp.predict(Eigen::Vector2d(0.33, 0.5));
  CHECK(p.mean == doctest::Approx(std::sin(8 * 0.33)).epsilon(0.05));
}

TEST_CASE("gp: constant targets, duplicate inputs, and errors") {
  Rng rng(2);
  GaussianProcess gp;
  // Constant targets: scale 1, the mean is the constant.
  gp.fit(column({0.2, 0.5, 0.9}), vec({4.0, 4.0, 4.0}), rng, true);
  CHECK(gp.y_scale() == 1.0);
  CHECK(gp.predict(Eigen::VectorXd::Constant(1, 0.7)).mean == doctest::Approx(4.0));
  // The same input twice with different targets and a near-zero noise: K is singular without the
  // noise floor, and the jitter retry keeps the factorisation alive.
  GaussianProcess dup;
  dup.set_hyper(hyper_1d(0.3, 1.0, 1e-300));
  dup.fit(column({0.4, 0.4, 0.8}), vec({1.0, 2.0, 0.0}), rng, false);
  CHECK(dup.jitter() > 0);
  CHECK(dup.predict(Eigen::VectorXd::Constant(1, 0.4)).mean == doctest::Approx(1.5).epsilon(1e-3));

  CHECK_THROWS_AS(gp.fit(column({0.1, 0.2}), vec({1.0}), rng), Error);
  CHECK_THROWS_AS(gp.fit(column({0.1, NAN}), vec({1.0, 2.0}), rng), Error);
  CHECK_THROWS_AS(gp.predict(Eigen::Vector2d(0.1, 0.2)), Error);
  CHECK_THROWS_AS(GaussianProcess(GpOptions{.length_min = 0}), Error);
  GaussianProcess empty;
  CHECK_THROWS_AS(empty.predict(Eigen::VectorXd::Constant(1, 0.1)), Error);
}
