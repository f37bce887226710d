// Losses against hand-computed values (Keras definitions) and optimizers against closed-form steps.
#include "test_utils.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/rng.hpp"
#include "mpigan/nn/loss.hpp"
#include "mpigan/nn/optimizer.hpp"

#include <cmath>
#include <vector>

using namespace mpigan;
using namespace mpigan::nn;

TEST_CASE("BCE as Keras defines it: clipping and the epsilon inside the log") {
  const std::vector<float> p{0.9f, 0.2f}, y{1.0f, 0.0f};
  std::vector<float> g(2);
  // -(ln(0.9 + 1e-7) + ln(1 - 0.2 + 1e-7)) / 2
  CHECK(loss_value_and_grad(LossKind::bce, p, y, 1.0f, g) == doctest::Approx(0.1642519154).epsilon(1e-6));
  // d/dp of the mean: -1/(0.9 + 1e-7)/2 and 1/(0.8 + 1e-7)/2
  CHECK(g[0] == doctest::Approx(-0.5555554938).epsilon(1e-6));
  CHECK(g[1] == doctest::Approx(0.6249999219).epsilon(1e-6));
  // Weighted gradient: weight * dL/dp.
  loss_value_and_grad(LossKind::bce, p, y, 3.0f, g);
  CHECK(g[0] == doctest::Approx(3 * -0.5555554938).epsilon(1e-6));
  // p = 0 with y = 1 is clipped to 1e-7: loss -ln(2e-7), gradient 0 (outside the clip range).
  const std::vector<float> p0{0.0f}, y1{1.0f};
  std::vector<float> g0(1);
  CHECK(loss_value_and_grad(LossKind::bce, p0, y1, 1.0f, g0) == doctest::Approx(15.4249484704).epsilon(1e-6));
  CHECK(g0[0] == 0.0f);
}

TEST_CASE("MAPE, MAE and MSE against hand-computed values") {
  const std::vector<float> y{2.0f, 0.5f, 0.0f}, p{1.5f, 1.0f, 1e-8f};
  std::vector<float> g(3);
  // 100 * mean(0.5/2, 0.5/0.5, 1e-8/max(0,1e-7)) = 100 * (0.25 + 1 + 0.1) / 3 = 45
  CHECK(loss_value_and_grad(LossKind::mape, p, y, 0.1f, g) == doctest::Approx(45.0).epsilon(1e-5));
  // 0.1 * 100 * sign(p - y) / max(|y|, 1e-7) / 3
  CHECK(g[0] == doctest::Approx(0.1 * 100 * -1 / 2.0 / 3).epsilon(1e-6));
  CHECK(g[1] == doctest::Approx(0.1 * 100 * 1 / 0.5 / 3).epsilon(1e-6));
  CHECK(g[2] == doctest::Approx(0.1 * 100 * 1 / 1e-7 / 3).epsilon(1e-5));
  CHECK(loss_value_and_grad(LossKind::mae, p, y, 25.0f, g) == doctest::Approx((0.5 + 0.5 + 1e-8) / 3).epsilon(1e-6));
  CHECK(g[0] == doctest::Approx(-25.0 / 3).epsilon(1e-6));
  CHECK(loss_value_and_grad(LossKind::mse, p, y, 1.0f, g) == doctest::Approx((0.25 + 0.25) / 3).epsilon(1e-6));
  CHECK(g[1] == doctest::Approx(2 * 0.5 / 3).epsilon(1e-6));
  // |y - p| = 0: TF's sign(0) = 0 gradient.
  const std::vector<float> same{1.0f};
  std::vector<float> g1(1);
  CHECK(loss_value_and_grad(LossKind::mae, same, same, 1.0f, g1) == 0.0);
  CHECK(g1[0] == 0.0f);
  CHECK_THROWS_WITH_AS(parse_loss("hinge"), doctest::Contains("unknown loss 'hinge'"), Error);
}

namespace {
struct OneParam {
  std::unique_ptr<Backend> be = make_backend("cpu");
  ParameterSet w, g;
  OneParam(float w0, float g0) {
    w.add("w", {1});
    g.add("w", {1});
    w.allocate(*be);
    g.allocate(*be);
    w.data()[0] = w0;
    g.data()[0] = g0;
  }
};
}  // namespace

TEST_CASE("the binned mean-ratio loss: the mean response per bin costs, the spread inside a bin does not") {
  // bins of [0, 5]: {0.2, 0.3} in bin 0 (ratios 1.1, 0.9: mean 1), {4.0, 4.5} in bin 1 (1.0, 1.2: mean 1.1)
  const std::vector<float> pred{1.1f, 0.9f, 2.0f, 2.4f}, target{1, 1, 2, 2}, key{0.2f, 0.3f, 4.0f, 4.5f};
  std::vector<float> diff(4);
  const double l = nn::binned_mean_ratio_loss(pred, target, key, 2, 0.0f, 5.0f, 1.0f, diff);
  CHECK(l == doctest::Approx(100.0 * 0.5 * 0.1).epsilon(1e-5));  // 5
  CHECK(diff[0] == 0.0f);
  CHECK(diff[1] == 0.0f);
  CHECK(diff[2] == doctest::Approx(100.0 / (4 * 2)));  // 12.5
  CHECK(diff[3] == doctest::Approx(12.5));
  // against central differences, weight 0.3
  nn::binned_mean_ratio_loss(pred, target, key, 2, 0.0f, 5.0f, 0.3f, diff);
  for (std::size_t i = 2; i < 4; ++i) {
    std::vector<float> up = pred, down = pred;
    up[i] += 1e-3f;
    down[i] -= 1e-3f;
    const double fd = (nn::binned_mean_ratio_loss(up, target, key, 2, 0.0f, 5.0f, 1.0f, {}) -
                       nn::binned_mean_ratio_loss(down, target, key, 2, 0.0f, 5.0f, 1.0f, {})) /
                      2e-3;
    CHECK(diff[i] == doctest::Approx(0.3 * fd).epsilon(1e-3));
  }
  // the same showers' MAPE counts their spread; one bin holding everything, with keys out of range
  const std::vector<float> spread{0.9f, 1.1f, 0.8f, 1.2f}, ones{1, 1, 1, 1}, keys{-1.0f, 0.5f, 0.7f, 9.0f};
  CHECK(nn::binned_mean_ratio_loss(spread, ones, keys, 1, 0.0f, 1.0f, 1.0f, {}) < 1e-4);  // float rounding only
  CHECK(nn::loss_value_and_grad(nn::LossKind::mape, spread, ones, 1.0f, {}) == doctest::Approx(15.0));
  CHECK_THROWS_AS(nn::binned_mean_ratio_loss(spread, ones, keys, 0, 0.0f, 1.0f, 1.0f, {}), Error);
}

TEST_CASE("the binned spread loss: a hand-computed case, finite differences, no bias at the right spread") {
  // reference: bin 0 (x < 0.8, the median) residuals +-1, bin 1 +-2; generated: 3 in bin 0, 2 in bin 1
  const std::vector<double> xr{0.1, 0.2, 0.8, 0.9}, rr{1, -1, 2, -2};
  const std::vector<double> xf{0.15, 0.3, 0.85, 0.95, 0.5}, rf{2, 2, 2, 2, 0};
  std::vector<double> grad(5);
  const double l = nn::binned_spread_loss(xf, rf, xr, rr, 2, 0, grad);
  CHECK(l == doctest::Approx(0.6 * std::pow(0.5 * std::log(8.0 / 3.0), 2)));  // bin 1 matches: 4 against 4
  CHECK(grad[2] == 0.0);
  CHECK(grad[4] == 0.0);  // a residual of 0 moves nothing
  // a fit of one parameter on the reference: its mean squares grow by 4/3
  CHECK(nn::binned_spread_loss(xf, rf, xr, rr, 2, 1, {}) ==
        doctest::Approx(0.6 * std::pow(0.5 * std::log(2.0), 2) + 0.4 * std::pow(0.5 * std::log(0.75), 2)));
  for (std::size_t i = 0; i < 5; ++i) {
    std::vector<double> up = rf, down = rf;
    up[i] += 1e-5;
    down[i] -= 1e-5;
    const double fd =
        (nn::binned_spread_loss(xf, up, xr, rr, 2, 0, {}) - nn::binned_spread_loss(xf, down, xr, rr, 2, 0, {})) / 2e-5;
    CHECK(grad[i] == doctest::Approx(fd).epsilon(1e-6));
  }
  // the same residuals at the same energies cost nothing; a spread 10 % too wide costs (ln 1.1)^2
  CHECK(nn::binned_spread_loss(xr, rr, xr, rr, 2, 0, {}) == doctest::Approx(0.0));
  Rng rng(5, 2);
  std::vector<double> x(20000), r(20000), wide(20000);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = rng.uniform();
    r[i] = rng.normal();
    wide[i] = 1.1 * rng.normal();
  }
  CHECK(nn::binned_spread_loss(x, wide, x, r, 4, 0, {}) == doctest::Approx(std::pow(std::log(1.1), 2)).epsilon(0.15));
  // Batches of 64 against 64 (16 a bin): the derivative in the generated spread's log,
  // sum_i r_i dL/dr_i, averages to ~0 at the reference's spread and is clearly negative 15 % below it.
  const auto mean_slope = [&](double width) {
    double s = 0.0;
    const int draws = 3000;
    std::vector<double> xf64(64), rf64(64), xr64(64), rr64(64), g(64);
    for (int d = 0; d < draws; ++d) {
      for (std::size_t i = 0; i < 64; ++i) {
        xf64[i] = rng.uniform(), rf64[i] = width * rng.normal();
        xr64[i] = rng.uniform(), rr64[i] = rng.normal();
      }
      nn::binned_spread_loss(xf64, rf64, xr64, rr64, 4, 0, g);
      for (std::size_t i = 0; i < 64; ++i) s += rf64[i] * g[i];
    }
    return s / draws;
  };
  const double at_right = mean_slope(1.0), narrow = mean_slope(0.85);
  CHECK(narrow < -0.1);
  CHECK(std::abs(at_right) < 0.15 * std::abs(narrow));
  CHECK_THROWS_AS(nn::binned_spread_loss(xf, rf, xr, rr, 3, 0, {}), Error);  // 4 reference samples for 3 bins
}

TEST_CASE("MMD^2 with the rational-quadratic mixture: a hand-computed case, finite differences, a shift it must see") {
  auto k = [](double s) {  // the kernel as loss.hpp writes it
    double v = 0.0;
    for (double a : {0.2, 0.5, 1.0, 2.0, 5.0}) v += std::pow(1.0 + s / (2.0 * a), -a);
    return v;
  };
  // d = 1, x = {0, 1}, y = {0, 2}: xx pair s = 1, yy pair s = 4, xy pairs s = 0, 4, 1, 1;
  // MMD^2 = k(1) + k(4) - (2/4)(k(0) + k(4) + 2 k(1)) = (k(4) - k(0)) / 2, k(0) = 5
  const std::vector<double> x{0.0, 1.0}, y{0.0, 2.0}, one{1.0};
  std::vector<double> g(2);
  CHECK(nn::mmd2_rq(x, y, 1, one, g) == doctest::Approx(0.5 * (k(4.0) - 5.0)).epsilon(1e-12));
  // dMMD^2/dx_0 = k'(1) 2 (0 - 1) - (2/4)(k'(0) 2 (0 - 0) + k'(4) 2 (0 - 2)), k' by central differences of k
  auto dk = [&](double s) { return (k(s + 1e-6) - k(s - 1e-6)) / 2e-6; };
  CHECK(g[0] == doctest::Approx(-2.0 * dk(1.0) + 2.0 * dk(4.0)).epsilon(1e-6));
  // n = 5, m = 4 in d = 3 with scales: the gradient against central differences
  Rng rng(7, 1);
  std::vector<double> xs(15), ys(12), scale{0.5, 2.0, 1.3};
  for (double& v : xs) v = rng.normal();
  for (double& v : ys) v = rng.normal() + 0.3;
  std::vector<double> gx(15);
  nn::mmd2_rq(xs, ys, 3, scale, gx);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    std::vector<double> up = xs, down = xs;
    up[i] += 1e-5;
    down[i] -= 1e-5;
    const double fd = (nn::mmd2_rq(up, ys, 3, scale, {}) - nn::mmd2_rq(down, ys, 3, scale, {})) / 2e-5;
    CHECK(gx[i] == doctest::Approx(fd).epsilon(1e-6));
  }
  // 300 draws of N(0, 1)^2 against 300 others: near 0; against N(0.5, 1) x N(0, 1): well above
  auto draw = [&](double shift) {
    std::vector<double> v(600);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = rng.normal() + (i % 2 == 0 ? shift : 0.0);
    return v;
  };
  const std::vector<double> a = draw(0.0), same = draw(0.0), shifted = draw(0.5), two{1.0, 1.0};
  const double null = nn::mmd2_rq(a, same, 2, two, {});
  const double alt = nn::mmd2_rq(a, shifted, 2, two, {});
  CHECK(std::abs(null) < 0.01);
  CHECK(alt > 0.05);
  CHECK(alt > 5.0 * std::abs(null));
  CHECK_THROWS_AS(nn::mmd2_rq(std::vector<double>{1.0}, y, 1, one, {}), Error);  // one sample
}

TEST_CASE("EnergyStandardiser: features in units of their spread at each energy; a constant column, one energy") {
  // Rows (x, f1, f2, f3) in pairs at the same x: f1 = 2 + 3u + 0.5u^2 +- s(x), u = x - mean(x),
  // s(x)^2 = 0.04 + 0.02 (x - 1): the fits are exact, and every residual standardises to +-1.
  const std::vector<double> xs{1.0, 1.4, 1.9, 2.3, 2.7};
  double x0 = 0.0;
  for (double x : xs) x0 += x / 5.0;
  auto mu = [&](double x) { return 2.0 + 3.0 * (x - x0) + 0.5 * (x - x0) * (x - x0); };
  auto s = [](double x) { return std::sqrt(0.04 + 0.02 * (x - 1.0)); };
  std::vector<double> ref;
  for (double x : xs)
    for (double sign : {1.0, -1.0}) ref.insert(ref.end(), {x, mu(x) + sign * s(x), 7.0, -x + sign * 0.3});
  const nn::EnergyStandardiser st(ref, 4, 0.05);
  for (double x : {1.0, 2.0, 2.7}) {
    CHECK(st.mean(1, x) == doctest::Approx(mu(x)).epsilon(1e-10));
    CHECK(st.sigma(1, x) == doctest::Approx(s(x)).epsilon(1e-10));
    CHECK(st.sigma(2, x) == doctest::Approx(0.05));  // constant: the floor
    CHECK(st.sigma(3, x) == doctest::Approx(0.3).epsilon(1e-10));
  }
  std::vector<double> out(ref.size());
  st.apply(ref, out);
  for (std::size_t i = 0; i < 10; ++i) {
    const double sign = i % 2 == 0 ? 1.0 : -1.0;
    CHECK(out[4 * i] == ref[4 * i]);  // x is kept
    CHECK(out[4 * i + 1] == doctest::Approx(sign).epsilon(1e-9));
    CHECK(out[4 * i + 2] == doctest::Approx(0.0).scale(1.0));
    CHECK(out[4 * i + 3] == doctest::Approx(sign).epsilon(1e-9));
  }
  // A shower 2 sigma off at high x is 2 standardised units off, where a scale over the whole batch
  // (the spread of f3 over all x, 0.68) sees it as less than one.
  const std::vector<double> off{2.7, 0.0, 7.0, -2.7 + 0.3 + 0.3};
  std::vector<double> off_out(4);
  st.apply(off, off_out);
  CHECK(off_out[3] == doctest::Approx(2.0).epsilon(1e-9));
  // One energy only: the mean is the column's mean, the variance its mean squared residual.
  const std::vector<double> flat{1.5, 1.0, 0.0, 1.5, 3.0, 0.0, 1.5, 2.0, 0.0};
  const nn::EnergyStandardiser one(flat, 3, 0.05);
  CHECK(one.mean(1, 1.5) == doctest::Approx(2.0).epsilon(1e-10));
  CHECK(one.sigma(1, 1.5) == doctest::Approx(std::sqrt(2.0 / 3.0)).epsilon(1e-10));
  CHECK_THROWS_AS(nn::EnergyStandardiser(std::vector<double>{1.0, 2.0, 3.0, 4.0}, 2, 0.05), Error);  // 2 rows
}

TEST_CASE("SGD with momentum and Nesterov: two steps in closed form") {
  for (bool nesterov : {false, true}) {
    OneParam p(1.0f, 0.5f);
    OptimizerConfig c = OptimizerConfig::defaults("sgd");
    c.lr = 0.1;
    c.momentum = 0.9;
    c.nesterov = nesterov;
    auto opt = make_optimizer(c, *p.be, p.w);
    opt->step(p.w, p.g);  // v1 = -0.05; w1 = 1 - 0.05 (nesterov: 1 + 0.9*-0.05 - 0.05 = 0.905)
    CHECK(p.w.data()[0] == doctest::Approx(nesterov ? 0.905 : 0.95));
    p.g.data()[0] = -1.0f;
    opt->step(p.w, p.g);  // v2 = 0.9*-0.05 + 0.1 = 0.055
    CHECK(p.w.data()[0] == doctest::Approx(nesterov ? 0.905 + 0.9 * 0.055 + 0.1 : 0.95 + 0.055));
    CHECK(opt->iterations() == 2);
  }
  OneParam plain(1.0f, 0.5f);
  auto sgd = make_optimizer(OptimizerConfig::defaults("sgd"), *plain.be, plain.w);  // lr 0.01 (Keras default)
  sgd->step(plain.w, plain.g);
  CHECK(plain.w.data()[0] == doctest::Approx(1.0 - 0.005));
}

TEST_CASE("RMSprop: first step is lr * g / (sqrt((1-rho) g^2) + eps)") {
  OneParam p(2.0f, 0.5f);
  auto opt = make_optimizer(OptimizerConfig::defaults("rmsprop"), *p.be, p.w);
  opt->step(p.w, p.g);
  CHECK(p.w.data()[0] == doctest::Approx(2.0 - 0.003162275660).epsilon(1e-6));
  CHECK(opt->slots()[0].second->data()[0] == doctest::Approx(0.1 * 0.25));
}

TEST_CASE("Adam with a constant gradient moves lr * sign(g) per step (bias correction)") {
  OneParam p(0.0f, -3.0f);
  auto opt = make_optimizer(OptimizerConfig::defaults("adam"), *p.be, p.w);
  double w = 0.0;
  for (int t = 1; t <= 5; ++t) {
    opt->step(p.w, p.g);
    // m_t = (1-b1^t) g, v_t = (1-b2^t) g^2 -> step = lr * g / (|g| + eps / sqrt(1 - b2^t))
    w -= 1e-3 * -3.0 / (3.0 + 1e-7 / std::sqrt(1.0 - std::pow(0.999, t)));
    CHECK(p.w.data()[0] == doctest::Approx(w).epsilon(1e-5));
  }
}

TEST_CASE("optimizer configuration errors name the parameter") {
  OneParam p(0.0f, 0.0f);
  OptimizerConfig c = OptimizerConfig::defaults("adam");
  c.lr = -1;
  CHECK_THROWS_WITH_AS(make_optimizer(c, *p.be, p.w), doctest::Contains("lr must be > 0"), Error);
  c = OptimizerConfig::defaults("adagrad");
  CHECK_THROWS_WITH_AS(make_optimizer(c, *p.be, p.w), doctest::Contains("unknown optimizer 'adagrad'"), Error);
}
