// Finite-difference gradient checks of the reference kernels, in double precision, for every op
// with a backward: input gradients for all of them, weight (and bias / scale / shift) gradients
// for those with parameters. The reference is the specification the other backends are tested
// against (test_ops.cpp), so this closes the loop: backend -> reference -> calculus.
//
// Method: L = sum_i r_i y_i for a fixed random r; the analytic gradient comes from the backward
// kernels with diff_dst = r; the numeric one from the central difference
// (L(x + h e_j) - L(x - h e_j)) / 2h at sampled indices j. In double with h = 1e-5 the truncation
// error is ~h^2 |f'''| ~ 1e-10 and the rounding error ~1e-16 |L| / h ~ 1e-11 |L|, so abs 1e-7 +
// rel 1e-6 is tight yet safe. Points within 1e-3 of an activation kink are skipped (the
// derivative is not defined there).
#include "test_utils.hpp"

#include "mpigan/backend/reference/kernels.hpp"

#include <cmath>
#include <functional>
#include <vector>

using namespace mpigan;
using namespace mpigan::test;

namespace {

constexpr double kH = 1e-5;
const Tolerance kTol{1e-7, 1e-6};

std::vector<double> random_vec(std::size_t n, Rng& rng, double lo = -1.0, double hi = 1.0) {
  std::vector<double> v(n);
  for (auto& x : v) x = lo + (hi - lo) * rng.uniform_double();
  return v;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

/// Compares @p analytic with central differences of @p loss w.r.t. @p x at up to @p samples indices.
void check_fd(const std::string& what, std::vector<double>& x, const std::vector<double>& analytic,
              const std::function<double()>& loss, Rng& rng, int samples = 40,
              const std::function<bool(std::size_t)>& skip = nullptr) {
  REQUIRE(x.size() == analytic.size());
  std::vector<double> got, want;
  for (int s = 0; s < samples; ++s) {
    const std::size_t j = x.size() <= static_cast<std::size_t>(samples) ? static_cast<std::size_t>(s) % x.size()
                                                                        : static_cast<std::size_t>(rng.below(x.size()));
    if (skip && skip(j)) continue;
    const double x0 = x[j];
    x[j] = x0 + kH;
    const double lp = loss();
    x[j] = x0 - kH;
    const double lm = loss();
    x[j] = x0;
    want.push_back((lp - lm) / (2 * kH));
    got.push_back(analytic[j]);
  }
  INFO(what << " (" << got.size() << " sampled indices)");
  CHECK(got.size() > 0);
  check_close(what, got, want, kTol);
}

}  // namespace

TEST_CASE("conv3d gradients (input, weights, bias) match finite differences") {
  struct Case {
    Shape src;
    Conv3dDesc d;
  };
  const Case cases[] = {
      {{2, 3, 5, 6, 4}, Conv3dDesc{3, 4, {3, 2, 3}, {1, 1, 1}, {1, 0, 2}, {1, 1, 0}, true}},
      {{1, 2, 7, 7, 8}, Conv3dDesc{2, 3, {6, 6, 8}, {1, 1, 1}, {2, 2, 3}, {3, 3, 4}, true}},   // TF same, even kernel
      {{2, 2, 7, 6, 5}, Conv3dDesc{2, 2, {3, 3, 3}, {2, 2, 1}, {1, 0, 1}, {1, 1, 0}, false}},  // strided, no bias
  };
  Rng rng(21);
  for (const auto& c : cases) {
    INFO("conv " << c.d.to_string() << " src " << c.src.to_string());
    const Shape dst = c.d.output_shape(c.src);
    auto x = random_vec(c.src.numel(), rng), w = random_vec(c.d.weights_shape().numel(), rng),
         b = random_vec(c.d.oc, rng), r = random_vec(dst.numel(), rng);
    std::vector<double> y(dst.numel());
    auto loss = [&] {
      ref::conv3d_forward(c.d, c.src, x.data(), w.data(), c.d.bias ? b.data() : nullptr, y.data());
      return dot(y, r);
    };
    std::vector<double> dx(x.size()), dw(w.size(), 0.0), db(b.size(), 0.0);
    ref::conv3d_backward_data(c.d, c.src, r.data(), w.data(), dx.data());
    ref::conv3d_backward_weights(c.d, c.src, x.data(), r.data(), dw.data(), c.d.bias ? db.data() : nullptr);
    check_fd("d/dx", x, dx, loss, rng);
    check_fd("d/dW", w, dw, loss, rng);
    if (c.d.bias) check_fd("d/db", b, db, loss, rng);
  }
}

TEST_CASE("inner product gradients match finite differences") {
  Rng rng(22);
  const InnerProductDesc d{13, 5, true};
  const std::int64_t n = 3;
  auto x = random_vec(n * d.ic, rng), w = random_vec(d.oc * d.ic, rng), b = random_vec(d.oc, rng),
       r = random_vec(n * d.oc, rng);
  std::vector<double> y(n * d.oc);
  auto loss = [&] {
    ref::inner_product_forward(n, d, x.data(), w.data(), b.data(), y.data());
    return dot(y, r);
  };
  std::vector<double> dx(x.size()), dw(w.size(), 0.0), db(b.size(), 0.0);
  ref::inner_product_backward_data(n, d, r.data(), w.data(), dx.data());
  ref::inner_product_backward_weights(n, d, x.data(), r.data(), dw.data(), db.data());
  check_fd("d/dx", x, dx, loss, rng);
  check_fd("d/dW", w, dw, loss, rng);
  check_fd("d/db", b, db, loss, rng);
}

TEST_CASE("batch norm gradients (input, gamma, beta) match finite differences") {
  Rng rng(23);
  const Shape s{3, 4, 3, 2, 5};
  const std::int64_t C = s[1];
  for (float eps : {1e-3f, 1e-6f}) {
    auto x = random_vec(s.numel(), rng, -2, 2), g = random_vec(C, rng, 0.5, 1.5), b = random_vec(C, rng),
         r = random_vec(s.numel(), rng);
    std::vector<double> y(x.size()), mean(C), var(C);
    auto loss = [&] {
      ref::batch_norm_forward_training(s, eps, x.data(), g.data(), b.data(), y.data(), mean.data(), var.data());
      return dot(y, r);
    };
    loss();
    std::vector<double> dx(x.size()), dg(C, 0.0), dbeta(C, 0.0);
    ref::batch_norm_backward(s, eps, x.data(), r.data(), g.data(), mean.data(), var.data(), dx.data(), dg.data(),
                             dbeta.data());
    check_fd("d/dx", x, dx, loss, rng);
    check_fd("d/dgamma", g, dg, loss, rng);
    check_fd("d/dbeta", b, dbeta, loss, rng);
  }
}

TEST_CASE("activation gradients match finite differences away from the kinks") {
  Rng rng(24);
  for (const EltwiseDesc d : {EltwiseDesc{EltwiseKind::relu, 0.0f}, EltwiseDesc{EltwiseKind::leaky_relu, 0.3f},
                              EltwiseDesc{EltwiseKind::sigmoid, 0.0f}}) {
    INFO(d.to_string());
    auto x = random_vec(200, rng, -3, 3), r = random_vec(200, rng);
    std::vector<double> y(x.size()), dx(x.size());
    auto loss = [&] {
      ref::eltwise_forward(d, x.size(), x.data(), y.data());
      return dot(y, r);
    };
    loss();
    ref::eltwise_backward(d, x.size(), y.data(), r.data(), dx.data());
    check_fd("d/dx", x, dx, loss, rng, 60, [&](std::size_t j) { return std::abs(x[j]) < 1e-3; });
  }
}

TEST_CASE("pooling and upsampling gradients match finite differences") {
  Rng rng(25);
  {
    const Shape s{2, 3, 7, 6, 5};
    const AvgPoolDesc d{{2, 2, 2}, {2, 2, 2}};
    const Shape o = d.output_shape(s);
    auto x = random_vec(s.numel(), rng), r = random_vec(o.numel(), rng);
    std::vector<double> y(o.numel()), dx(x.size());
    auto loss = [&] {
      ref::avg_pool_forward(d, s, x.data(), y.data());
      return dot(y, r);
    };
    ref::avg_pool_backward(d, s, r.data(), dx.data());
    check_fd("avg pool d/dx", x, dx, loss, rng, 80);
  }
  {
    const Shape s{2, 2, 3, 2, 4};
    const UpsampleDesc d{{2, 3, 2}};
    const Shape o = d.output_shape(s);
    auto x = random_vec(s.numel(), rng), r = random_vec(o.numel(), rng);
    std::vector<double> y(o.numel()), dx(x.size());
    auto loss = [&] {
      ref::upsample_forward(d, s, x.data(), y.data());
      return dot(y, r);
    };
    ref::upsample_backward(d, s, r.data(), dx.data());
    check_fd("upsample d/dx", x, dx, loss, rng, 80);
  }
}
