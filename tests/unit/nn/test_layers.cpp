// nn layers on the real cpu backend (oneDNN, blocked layouts), checked by finite differences in
// float32 through the Network API: L = sum r * y accumulated in double; the numeric derivative
// uses the 4-point stencil (8(f(x+h) - f(x-h)) - (f(x+2h) - f(x-2h))) / 12h with h = 1e-2, whose
// truncation error is O(h^4) ~ 1e-8. The float32 forward makes L uncertain by ~1e-7 * sum|r y|,
// i.e. ~1e-5 on these sizes, which through the stencil (18/12h) gives ~2e-3: tolerance abs 2e-3 +
// rel 2e-3 (a 1% error in any gradient fails).
// Activations are sampled away from their kinks (|x| > 3h).
#include "test_utils.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/nn/activation.hpp"
#include "mpigan/nn/batch_norm.hpp"
#include "mpigan/nn/calo_heads.hpp"
#include "mpigan/nn/conv3d.hpp"
#include "mpigan/nn/dense.hpp"
#include "mpigan/nn/network.hpp"
#include "mpigan/nn/optimizer.hpp"
#include "mpigan/nn/resample.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>

using namespace mpigan;
using namespace mpigan::nn;
using namespace mpigan::test;

namespace {

constexpr float kH = 1e-2f;
const Tolerance kTol{2e-3, 2e-3};

struct Harness {
  std::unique_ptr<Backend> be = make_backend("cpu");
  Network net{"test"};
  Tensor x, r;
  ForwardContext fctx{Phase::train, false, 99, 7};

  Harness(std::unique_ptr<Layer> layer, const Shape& in, std::uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::vector<std::unique_ptr<Layer>> v;
    v.push_back(std::move(layer));
    net.add_node("out", "input", std::move(v), true);
    net.build(*be, item(in));
    Rng rng(seed);
    net.initialize(rng);
    // Perturb parameters away from their (often 0/1) initial values.
    Tensor w = net.weights().flat();
    for (auto& v2 : w.values()) v2 += 0.3f * (rng.uniform() - 0.5f);
    x = random_tensor(in, rng, lo, hi);
    const Tensor& y = net.forward(x, fctx)[0];
    r = random_tensor(y.shape(), rng);
  }
  static Shape item(const Shape& s) {
    switch (s.rank()) {
      case 2:
        return {s[1]};
      case 3:
        return {s[1], s[2]};
      case 4:
        return {s[1], s[2], s[3]};
      default:
        return {s[1], s[2], s[3], s[4]};
    }
  }
  double loss() {
    const Tensor y = be->to_host(net.forward(x, fctx)[0]);
    double s = 0;
    for (std::int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(y.data()[i]) * r.data()[i];
    return s;
  }
  /// Analytic gradients: returns dL/dx; parameter gradients land in net.grads().
  Tensor backward() {
    net.forward(x, fctx);
    net.zero_grads();
    return be->to_host(net.backward({r}, {true, true}));
  }
  void fd(const std::string& what, float* values, std::size_t n, const float* analytic, int samples,
          const std::function<bool(std::size_t)>& skip = nullptr) {
    Rng rng(n);
    std::vector<double> got, want;
    for (int s = 0; s < samples; ++s) {
      const std::size_t j = n <= static_cast<std::size_t>(samples) ? static_cast<std::size_t>(s) % n : rng.below(n);
      if (skip && skip(j)) continue;
      const float v0 = values[j];
      auto at = [&](float d) {
        values[j] = v0 + d;
        return loss();
      };
      const double num = (8 * (at(kH) - at(-kH)) - (at(2 * kH) - at(-2 * kH))) / (12 * static_cast<double>(kH));
      values[j] = v0;
      want.push_back(num);
      got.push_back(analytic[j]);
    }
    INFO(what << " (" << got.size() << " samples)");
    REQUIRE(!got.empty());
    check_close(what, got, want, kTol);
  }
  void check_all(const std::string& name, int samples = 24, const std::function<bool(std::size_t)>& skip_x = nullptr) {
    const Tensor dx = backward();
    Tensor g = net.grads().flat();
    const Tensor analytic_w = g.clone();
    fd(name + " d/dx", x.data(), static_cast<std::size_t>(x.numel()), dx.data(), samples, skip_x);
    for (std::size_t i = 0; i < net.weights().segments().size(); ++i) {
      const auto& seg = net.weights().segments()[i];
      fd(name + " d/d" + seg.name, net.weights().data() + seg.offset, static_cast<std::size_t>(seg.shape.numel()),
         analytic_w.data() + seg.offset, samples);
    }
  }
};

}  // namespace

TEST_CASE("Conv3d layer gradients (input, kernel, bias) on the cpu backend") {
  Harness h(std::make_unique<Conv3d>("conv", Conv3d::same(3, 16, {3, 4, 2}), Init::glorot_uniform), {2, 3, 6, 5, 7}, 1);
  h.check_all("conv same");
  Harness v(std::make_unique<Conv3d>("conv", Conv3d::zero_padded(8, 5, {3, 3, 3}, {1, 0, 2}, false), Init::he_uniform),
            {2, 8, 5, 6, 4}, 2);
  v.check_all("conv padded no bias");
}

TEST_CASE("Dense layer gradients") {
  Harness h(std::make_unique<Dense>("dense", 37, 11), {4, 37}, 3);
  h.check_all("dense");
}

TEST_CASE(
    "Dense with a gain: the same function at initialisation, gradients by finite differences, and g times "
    "the learning rate under Adam") {
  Harness h(std::make_unique<Dense>("dense", 37, 11, Init::glorot_uniform, true, 4.0f), {4, 37}, 3);
  h.check_all("dense gain 4");

  // Two layers from the same draws, one plain and one with gain 4, on the same input.
  auto be = make_backend("cpu");
  auto net = [&](float gain) {
    auto n = std::make_unique<Network>("dense");
    std::vector<std::unique_ptr<Layer>> v;
    v.push_back(std::make_unique<Dense>("dense", 7, 5, Init::glorot_uniform, true, gain));
    n->add_node("out", "input", std::move(v), true);
    n->build(*be, {7});
    Rng rng(11);
    n->initialize(rng);
    return n;
  };
  auto plain = net(1.0f), gained = net(4.0f);
  Rng rng(12);
  const Tensor x = random_tensor({3, 7}, rng);
  const ForwardContext ctx{Phase::train, false, 1, 0};
  const Tensor y1 = be->to_host(plain->forward(x, ctx)[0]), y4 = be->to_host(gained->forward(x, ctx)[0]);
  for (std::int64_t i = 0; i < y1.numel(); ++i) CHECK(y4.data()[i] == doctest::Approx(y1.data()[i]).epsilon(1e-6));
  const float stored = plain->weights().data()[0] / 4.0f;
  CHECK(gained->weights().data()[0] == doctest::Approx(stored).epsilon(1e-6));

  // One Adam step each on the same loss: the gained layer's effective weights (4 x stored) move 4
  // times as far, and its stored kernel's gradient is 4 times the plain one's.
  const Tensor r = random_tensor(y1.shape(), rng);
  std::vector<double> moved[2];
  for (int k = 0; k < 2; ++k) {
    Network& n = k == 0 ? *plain : *gained;
    const float g = k == 0 ? 1.0f : 4.0f;
    n.forward(x, ctx);
    n.zero_grads();
    n.backward({r}, {true, false});
    if (k == 1)
      for (std::int64_t i = 0; i < 35; ++i)
        CHECK(n.grads().data()[i] == doctest::Approx(4.0 * plain->grads().data()[i]).epsilon(1e-5));
    const Tensor before = n.weights().flat().clone();
    OptimizerConfig c = OptimizerConfig::defaults("adam");
    auto opt = make_optimizer(c, *be, n.weights());
    opt->step(n.weights(), n.grads());
    for (std::int64_t i = 0; i < before.numel(); ++i)
      moved[k].push_back(g * (static_cast<double>(n.weights().data()[i]) - before.data()[i]));
  }
  for (std::size_t i = 0; i < moved[0].size(); ++i) {
    if (std::abs(moved[0][i]) < 1e-5) continue;  // a zero gradient (Adam's step is 0 or epsilon-bound)
    CHECK(moved[1][i] == doctest::Approx(4.0 * moved[0][i]).epsilon(1e-3));
  }
  CHECK_THROWS_WITH(Dense("bad", 3, 2, Init::glorot_uniform, true, 0.0f), doctest::Contains("gain must be positive"));
}

TEST_CASE("BatchNorm3d gradients in the train phase, and running statistics") {
  Harness h(std::make_unique<BatchNorm3d>("bn", 6, 0.99f, 1e-3f), {3, 6, 4, 3, 5}, 4, -2.0f, 3.0f);
  h.check_all("batch norm");

  // Running statistics: moving = 0.99 moving + 0.01 batch, only when update_stats.
  auto be = make_backend("cpu");
  Network net("bn");
  std::vector<std::unique_ptr<Layer>> v;
  v.push_back(std::make_unique<BatchNorm3d>("bn", 2, 0.9f, 1e-3f));
  net.add_node("out", "input", std::move(v), true);
  net.build(*be, {2, 1, 1, 2});
  Rng rng(1);
  net.initialize(rng);
  Tensor x = Tensor::from({2, 2, 1, 1, 2}, std::vector<float>{1, 3, 10, 20, 5, 7, 30, 40});
  net.forward(x, {Phase::train, false, 0, 0});
  CHECK(net.state().data()[0] == 0.0f);  // moving_mean untouched
  net.forward(x, {Phase::train, true, 0, 0});
  // channel 0 values 1,3,5,7: mean 4, biased var 5; channel 1: 10,20,30,40: mean 25, var 125
  const float* st = net.state().data();
  const auto& segs = net.state().segments();
  CHECK(st[segs[0].offset + 0] == doctest::Approx(0.1 * 4));
  CHECK(st[segs[0].offset + 1] == doctest::Approx(0.1 * 25));
  CHECK(st[segs[1].offset + 0] == doctest::Approx(0.9 * 1 + 0.1 * 5));
  CHECK(st[segs[1].offset + 1] == doctest::Approx(0.9 * 1 + 0.1 * 125));
  // Inference uses the running statistics: y = (x - m)/sqrt(v + eps) with gamma 1, beta 0.
  const Tensor y = be->to_host(net.forward(x, {Phase::infer, true, 0, 0})[0]);
  CHECK(y.data()[0] == doctest::Approx((1 - 0.4) / std::sqrt(1.4 + 1e-3)).epsilon(1e-5));

  // The decay of the state: momentum^k after k updates of the statistics, not counting passes
  // without update_stats or in the infer phase; what is left of the state at the reset.
  CHECK(net.state_decay() == doctest::Approx(0.9));
  net.reset_state_decay();
  CHECK(net.state_decay() == 1.0);
  const std::vector<float> s0(st, st + net.state().size());
  net.forward(x, {Phase::train, true, 0, 0});
  net.forward(x, {Phase::train, false, 0, 0});
  net.forward(x, {Phase::train, true, 0, 0});
  CHECK(net.state_decay() == doctest::Approx(0.81));
  // moving = decay * moving_then + (1 - decay) * batch (the same batch twice).
  CHECK(st[segs[0].offset + 1] == doctest::Approx(0.81 * s0[segs[0].offset + 1] + 0.19 * 25));
  CHECK(st[segs[1].offset + 1] == doctest::Approx(0.81 * s0[segs[1].offset + 1] + 0.19 * 125));

  // Layers of different momenta in one network: no single decay, a clear error.
  Network mixed("mixed");
  std::vector<std::unique_ptr<Layer>> two;
  two.push_back(std::make_unique<BatchNorm3d>("bn_a", 2, 0.9f, 1e-3f));
  two.push_back(std::make_unique<BatchNorm3d>("bn_b", 2, 0.5f, 1e-3f));
  mixed.add_node("out", "input", std::move(two), true);
  mixed.build(*be, {2, 1, 1, 2});
  mixed.initialize(rng);
  CHECK(mixed.state_decay() == 1.0);
  mixed.forward(x, {Phase::train, true, 0, 0});
  CHECK_THROWS_WITH_AS(mixed.state_decay(), doctest::Contains("layer 'bn_b' by"), Error);
}

TEST_CASE("recalibrate_state: running statistics become the mean of the batch statistics for the weights as they are") {
  auto be = make_backend("cpu");
  Rng rng(3);
  // One BatchNorm: the passes x and 2 x. Channel 0 holds 1, 3, 5, 7 (mean 4, biased var 5), channel
  // 1 holds 10..40 (25, 125); doubled: 8, 20 and 50, 500. Means of the two passes: 6, 12.5; 37.5, 312.5.
  Network bn("bn");
  std::vector<std::unique_ptr<Layer>> v;
  v.push_back(std::make_unique<BatchNorm3d>("bn", 2, 0.99f, 1e-3f));
  bn.add_node("out", "input", std::move(v), true);
  bn.build(*be, {2, 1, 1, 2});
  bn.initialize(rng);
  const Tensor x = Tensor::from({2, 2, 1, 1, 2}, std::vector<float>{1, 3, 10, 20, 5, 7, 30, 40});
  Tensor x2 = Tensor::empty(x.shape());
  for (std::int64_t i = 0; i < x.numel(); ++i) x2.data()[i] = 2 * x.data()[i];
  bn.forward(x, {Phase::train, true, 0, 0});  // a state and a decay from before: both forgotten
  bn.recalibrate_state(
      2, [&](int k) { return k == 0 ? x : x2; }, 1);
  const float* st = bn.state().data();
  const auto& segs = bn.state().segments();
  CHECK(st[segs[0].offset + 0] == doctest::Approx(6.0).epsilon(1e-5));
  CHECK(st[segs[0].offset + 1] == doctest::Approx(37.5).epsilon(1e-5));
  CHECK(st[segs[1].offset + 0] == doctest::Approx(12.5).epsilon(1e-5));
  CHECK(st[segs[1].offset + 1] == doctest::Approx(312.5).epsilon(1e-5));
  CHECK(bn.state_decay() == 1.0);

  // Two BatchNorms behind convolutions: recalibrated on one batch z, the inference output is the
  // train-phase output of z (Keras normalises a batch with its biased variance, the statistic the
  // running variance follows), whatever the statistics were.
  Network net("deep");
  std::vector<std::unique_ptr<Layer>> w;
  w.push_back(std::make_unique<Conv3d>("c1", Conv3d::same(2, 3, {3, 3, 3})));
  w.push_back(std::make_unique<BatchNorm3d>("bn1", 3, 0.99f, 1e-3f));
  w.push_back(std::make_unique<Activation>("a1", Activation::leaky_relu(0.3f)));
  w.push_back(std::make_unique<Conv3d>("c2", Conv3d::same(3, 2, {3, 3, 3})));
  w.push_back(std::make_unique<BatchNorm3d>("bn2", 2, 0.99f, 1e-3f));
  net.add_node("out", "input", std::move(w), true);
  net.build(*be, {2, 4, 4, 4});
  net.initialize(rng);
  Tensor z = Tensor::empty({5, 2, 4, 4, 4});
  for (std::int64_t i = 0; i < z.numel(); ++i) z.data()[i] = static_cast<float>(rng.uniform(-1.0, 3.0));
  const Tensor train = be->to_host(net.forward(z, {Phase::train, false, 0, 0})[0]);
  const Tensor before = be->to_host(net.forward(z, {Phase::infer, false, 0, 0})[0]);
  net.recalibrate_state(
      3, [&](int) { return z; }, 1);
  const Tensor after = be->to_host(net.forward(z, {Phase::infer, false, 0, 0})[0]);
  double off_before = 0, off_after = 0;
  for (std::int64_t i = 0; i < z.numel(); ++i) {
    off_before = std::max(off_before, static_cast<double>(std::abs(before.data()[i] - train.data()[i])));
    off_after = std::max(off_after, static_cast<double>(std::abs(after.data()[i] - train.data()[i])));
  }
  CHECK(off_before > 0.1);  // the initial statistics (0, 1) are not z's
  CHECK(off_after < 1e-4);
  CHECK_THROWS_WITH_AS(net.recalibrate_state(
                           0, [&](int) { return z; }, 1),
                       doctest::Contains("expected at least 1"), Error);
}

TEST_CASE("activation, dropout, pooling, upsampling and reshape gradients") {
  for (const EltwiseDesc d : {Activation::relu(), Activation::leaky_relu(0.3f), Activation::sigmoid()}) {
    Harness h(std::make_unique<Activation>("act", d), {2, 4, 3, 3, 3}, 5, -2.0f, 2.0f);
    const Tensor x = h.x;
    h.check_all("activation " + d.to_string(), 40, [&](std::size_t j) { return std::abs(x.data()[j]) < 3 * kH; });
  }
  {
    Harness h(std::make_unique<Dropout>("drop", 0.3f), {2, 16, 3, 3, 3}, 6);
    h.check_all("dropout", 40);
    // Train phase drops about 30% and scales the rest by 1/0.7; infer phase is the identity.
    const Tensor y = h.be->to_host(h.net.forward(h.x, h.fctx)[0]);
    int dropped = 0;
    for (std::int64_t i = 0; i < y.numel(); ++i) {
      if (y.data()[i] == 0.0f)
        ++dropped;
      else
        CHECK(y.data()[i] == doctest::Approx(h.x.data()[i] / 0.7f).epsilon(1e-5));
    }
    CHECK(dropped / static_cast<double>(y.numel()) == doctest::Approx(0.3).epsilon(0.25));
    const Tensor yi = h.be->to_host(h.net.forward(h.x, {Phase::infer, false, 0, 0})[0]);
    check_close("dropout infer = identity", yi, h.x, {0, 0});
  }
  Harness p(std::make_unique<AvgPool3d>("pool", Dims3{2, 2, 2}), {2, 3, 5, 4, 7}, 7);
  p.check_all("avg pool", 40);
  Harness u(std::make_unique<UpSampling3d>("up", Dims3{2, 1, 3}), {2, 3, 2, 3, 2}, 8);
  u.check_all("upsample", 40);
  Harness f(Reshape::flatten("flat"), {3, 2, 3, 4, 5}, 9);
  f.check_all("flatten", 40);
}

TEST_CASE("calorimeter heads: Pow and SumCells gradients") {
  Harness p(std::make_unique<Pow>("pow", 1.0f / 0.85f), {2, 1, 4, 4, 3}, 10, 0.05f, 2.0f);
  p.check_all("pow", 40);
  Harness s(std::make_unique<SumCells>("sum"), {3, 1, 4, 3, 2}, 11, 0.0f, 1.0f);
  s.check_all("sum", 40);
}

TEST_CASE("measured angle: a straight track at a known angle, and its gradient in double") {
  // A track entering at (x, y) = (12.5, 12.5) going along depth z with dy/dz = cot(theta): the
  // measure is pi/2 - atan(slope) per layer = theta (the y tilt is what measPython reads).
  const Dims3 dims{25, 25, 25};
  for (double theta_deg : {70.0, 90.0, 110.0}) {
    const double theta = theta_deg * std::numbers::pi / 180.0;
    std::vector<float> img(25 * 25 * 25, 0.0f);
    for (int z = 0; z < 25; ++z) {
      const double y = 12.5 + (z - 12.0) / std::tan(theta);
      const int yi = static_cast<int>(std::floor(y));
      const double f = y - yi;  // split between two cells so the barycentre is exact
      img[(12 * 25 + yi) * 25 + z] += static_cast<float>(1.0 - f);
      if (f > 0) img[(12 * 25 + yi + 1) * 25 + z] += static_cast<float>(f);
    }
    const double a = measure_angle(img.data(), dims);
    INFO("theta " << theta_deg);
    CHECK(a == doctest::Approx(theta).epsilon(0.01));
  }
  std::vector<float> empty(27, 0.0f);
  CHECK(measure_angle(empty.data(), {3, 3, 3}) == 100.0);

  // Gradient against central differences (double inside; perturbation of float cells, h = 1e-3
  // on cells ~1: the measure is smooth there, so abs 1e-5 + rel 1e-3 holds).
  Rng rng(12);
  const Dims3 d{5, 6, 7};
  std::vector<float> im(static_cast<std::size_t>(d.product()));
  for (auto& v : im) v = 0.2f + rng.uniform();
  std::vector<double> g(im.size());
  measure_angle(im.data(), d, g.data());
  std::vector<double> got, want;
  for (int s = 0; s < 40; ++s) {
    const std::size_t j = rng.below(im.size());
    const float v0 = im[j];
    const float h = 1e-3f;
    im[j] = v0 + h;
    const double ap = measure_angle(im.data(), d);
    im[j] = v0 - h;
    const double am = measure_angle(im.data(), d);
    im[j] = v0;
    want.push_back((ap - am) / (static_cast<double>(v0 + h) - static_cast<double>(v0 - h)));
    got.push_back(g[j]);
  }
  check_close("d angle / d cell", got, want, {1e-5, 1e-3});
}

namespace {

/// The hand-computed shower of the feature tests: 5 x 5 pads x 3 layers (x, y from -2 to +2), E/100
/// = 0.5 in channel 1. Layer 0: 4 in the centre pad; layer 1: 1 at x = -1 and 1 at x = +1, y = 0;
/// layer 2: 2 at (x, y) = (+2, -1).
std::vector<float> hand_shower() {
  const std::int64_t cells = 5 * 5 * 3;
  std::vector<float> item(static_cast<std::size_t>(2 * cells), 0.0f);
  auto at = [&](int x, int y, int z) -> float& {
    return item[static_cast<std::size_t>(((x + 2) * 5 + (y + 2)) * 3 + z)];
  };
  at(0, 0, 0) = 4.0f;
  at(-1, 0, 1) = 1.0f;
  at(1, 0, 1) = 1.0f;
  at(2, -1, 2) = 2.0f;
  std::fill(item.begin() + cells, item.end(), 0.5f);  // the condition channel: not a cell
  return item;
}

}  // namespace

TEST_CASE("shower features: hand-computed response, layer energies, barycentres and widths, and their gradient") {
  // hand_shower() at power 1: layer 0 barycentre 0, width 0; layer 1 width_x 1, width_y 0.
  const Dims3 d{5, 5, 3};
  const std::int64_t cells = d.product();
  const std::vector<float> item = hand_shower();
  REQUIRE(shower_feature_count(3) == 17);
  std::vector<double> f(17);
  shower_features(item.data(), 2, d, 1.0f, f.data());
  const double eps = 1e-3, S = 8.0 + eps;
  CHECK(f[0] == doctest::Approx(std::log10(0.5)));
  CHECK(f[1] == doctest::Approx(10.0 * (std::log10(S / 0.5) - 2.3)));
  const double Dz[3] = {4.0 + eps, 2.0 + eps, 2.0 + eps};
  for (int z = 0; z < 3; ++z) CHECK(f[2 + 5 * z] == doctest::Approx(2.0 * (std::log10(Dz[z] / S) + 1.0)));
  // Layer 0: barycentre (0, 0), widths sqrt(1e-6).
  CHECK(f[3] == doctest::Approx(0.0));
  CHECK(f[4] == doctest::Approx(0.0));
  CHECK(f[5] == doctest::Approx(5.0 * 1e-3 - 2.0));
  // Layer 1: x second moment 2/D, barycentre 0 -> width_x sqrt(2/D + 1e-6); width_y sqrt(1e-6).
  CHECK(f[8] == doctest::Approx(0.0).epsilon(1e-12));
  CHECK(f[10] == doctest::Approx(5.0 * std::sqrt(2.0 / Dz[1] + 1e-6) - 2.0));
  CHECK(f[11] == doctest::Approx(5.0 * 1e-3 - 2.0));
  // Layer 2: barycentre (2, -1) * 2/D; variance 4*2/D - (4/D)^2 in x.
  const double mx = 4.0 / Dz[2], my = -2.0 / Dz[2];
  CHECK(f[13] == doctest::Approx(5.0 * mx));
  CHECK(f[14] == doctest::Approx(5.0 * my));
  CHECK(f[15] == doctest::Approx(5.0 * std::sqrt(8.0 / Dz[2] - mx * mx + 1e-6) - 2.0));
  CHECK(f[16] == doctest::Approx(5.0 * std::sqrt(2.0 / Dz[2] - my * my + 1e-6) - 2.0));
  // The 25-pad read-out measures in the same 5-pad units: one cell at x = +10 (of 25) is at +2.
  std::vector<float> fine(25 * 25 * 1, 0.0f);
  fine[static_cast<std::size_t>((22 * 25 + 12) * 1)] = 1.0f;
  std::vector<double> ff(7);
  shower_features(fine.data(), 1, {25, 25, 1}, 1.0f, ff.data());
  CHECK(ff[0] == 0.0);
  CHECK(ff[3] == doctest::Approx(5.0 * 2.0 / (1.0 + eps)));

  // The gradient through the layer (power 0.5, the rung's), against finite differences of the
  // shower channel; the condition channel gets none.
  Harness h(std::make_unique<ShowerFeatures>("hlf", 0.5f), {2, 2, 5, 5, 3}, 13, 0.3f, 1.5f);
  h.check_all("shower features", 60, [&](std::size_t j) {
    return j % static_cast<std::size_t>(2 * cells) >= static_cast<std::size_t>(cells);
  });
  const Tensor dx = h.backward();
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = cells; j < 2 * cells; ++j) CHECK(dx.data()[i * 2 * cells + j] == 0.0f);
}

TEST_CASE("transverse features: hand-computed column and row percentages, and their gradient") {
  const Dims3 d{5, 5, 3};
  const std::int64_t cells = d.product();
  // hand_shower() at power 0.5: the values are c^0.5, so its cells hold c = 16, 1, 1 and 4
  const std::vector<float> item = hand_shower();
  REQUIRE(transverse_feature_count(d) == 10);
  std::vector<double> t(10);
  transverse_features(item.data(), 2, d, 0.5f, t.data());
  const double S = 22.0 + 1e-3;
  const double want[10] = {0.0, 1.0, 16.0, 1.0, 4.0,   // columns x = -2 ... 2
                           0.0, 4.0, 18.0, 0.0, 0.0};  // rows y = -2 ... 2
  for (int k = 0; k < 10; ++k) CHECK(t[static_cast<std::size_t>(k)] == doctest::Approx(100.0 * want[k] / S));

  // The gradient of sum_k gy[k] t[k], against central differences on a random positive shower.
  Rng rng(21);
  std::vector<float> v(static_cast<std::size_t>(2 * cells));
  for (float& x : v) x = 0.2f + 1.3f * rng.uniform();
  std::vector<float> gy(10), g(v.size(), -1.0f);
  for (float& x : gy) x = rng.normal();
  transverse_features(v.data(), 2, d, 0.5f, t.data(), gy.data(), g.data());
  auto objective = [&](const std::vector<float>& w) {
    std::vector<double> f(10);
    transverse_features(w.data(), 2, d, 0.5f, f.data());
    double o = 0.0;
    for (int k = 0; k < 10; ++k) o += gy[static_cast<std::size_t>(k)] * f[static_cast<std::size_t>(k)];
    return o;
  };
  for (std::int64_t j = 0; j < cells; j += 7) {
    std::vector<float> up = v, down = v;
    const float h = 1e-3f;
    up[static_cast<std::size_t>(j)] += h;
    down[static_cast<std::size_t>(j)] -= h;
    const double fd = (objective(up) - objective(down)) / (2.0 * h);
    CHECK(g[static_cast<std::size_t>(j)] == doctest::Approx(fd).epsilon(2e-3));
  }
  for (std::int64_t j = cells; j < 2 * cells; ++j) CHECK(g[static_cast<std::size_t>(j)] == 0.0f);
}

TEST_CASE("a layer fed a wrong shape names the layer, expected and found") {
  auto be = make_backend("cpu");
  Network net("bad");
  std::vector<std::unique_ptr<Layer>> v;
  v.push_back(std::make_unique<Conv3d>("d_conv2", Conv3d::valid(4, 8, {3, 3, 3})));
  net.add_node("out", "input", std::move(v), true);
  CHECK_THROWS_WITH_AS(net.build(*be, {5, 8, 8, 8}),
                       doctest::Contains("layer 'd_conv2' (Conv3D): conv3d [ic=4 oc=8 k=(3,3,3)"), ShapeError);
  Network ok("ok");
  std::vector<std::unique_ptr<Layer>> w;
  w.push_back(std::make_unique<Dense>("g_dense", 200, 10));
  ok.add_node("out", "input", std::move(w), true);
  ok.build(*be, {200});
  CHECK_THROWS_WITH_AS(ok.forward(Tensor::zeros({4, 199}), {}),
                       doctest::Contains("input shape expected (N, (200)), found (4,199)"), ShapeError);
}

TEST_CASE("LayerTimes: each layer's forward and backward counted and timed, the results unchanged") {
  auto be = make_backend("cpu");
  Rng rng(5);
  Network net("timed");
  std::vector<std::unique_ptr<Layer>> v;
  v.push_back(std::make_unique<Conv3d>("c1", Conv3d::same(2, 3, {3, 3, 3})));
  v.push_back(std::make_unique<Activation>("a1", Activation::leaky_relu(0.3f)));
  v.push_back(std::make_unique<Conv3d>("c2", Conv3d::valid(3, 1, {2, 2, 2})));
  net.add_node("out", "input", std::move(v), true);
  net.build(*be, {2, 5, 5, 5});
  net.initialize(rng);
  Tensor x = Tensor::empty({3, 2, 5, 5, 5});
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data()[i] = static_cast<float>(rng.uniform(-1.0, 1.0));
  const Tensor dy = Tensor::full({3, 1, 4, 4, 4}, 0.5f);
  auto pass = [&] {
    net.zero_grads();
    const Tensor y = be->to_host(net.forward(x, {Phase::train, false, 0, 0})[0]);
    const Tensor dx = be->to_host(net.backward({dy}, {true, true}));
    return std::pair{y, dx};
  };
  const auto [y0, dx0] = pass();

  LayerTimes times;
  net.set_layer_times(&times);
  const auto [y1, dx1] = pass();
  pass();
  net.set_layer_times(nullptr);
  pass();  // not counted

  // Exactly equal: the waits change no arithmetic.
  check_close("forward, timed", y1, y0, {0, 0});
  check_close("input gradient, timed", dx1, dx0, {0, 0});
  REQUIRE(times.rows.size() == 3);
  const char* names[] = {"c1", "a1", "c2"};
  const char* kinds[] = {"Conv3D", "LeakyReLU", "Conv3D"};
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& r = times.rows[i];
    CAPTURE(r.layer);
    CHECK(r.network == "timed");
    CHECK(r.layer == names[i]);
    CHECK(r.kind == kinds[i]);
    CHECK(r.forward_calls == 2);
    CHECK(r.backward_calls == 2);
    CHECK(r.forward_s > 0.0);
    CHECK(r.backward_s > 0.0);
  }
  CHECK(times.rows[0].options.find("2->3") != std::string::npos);
}
