// The 5x5x5 rung's model (3dgan-5): its sizes, the ECAL-sum head on image^(1/power), the fitted
// ECAL targets, and the energy-normalised discriminator input of the GAN step.
#include "test_utils.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/models/gan_model.hpp"
#include "mpigan/models/gan_step.hpp"

#include <algorithm>
#include <cmath>
#include <set>

using namespace mpigan;
using namespace mpigan::models;
using namespace mpigan::test;

namespace {

/// n showers of 5^3 in the model's power space: cells c (model units) stored as c^power, with an
/// ECAL target sum(c) and E/100 in [0.2, 4].
RealBatch power_batch(std::int64_t n, float power, Rng& rng) {
  RealBatch b;
  b.image = Tensor::empty({n, 1, 5, 5, 5});
  b.energy = Tensor::empty({n, 1});
  b.ecal = Tensor::empty({n, 1});
  for (std::int64_t i = 0; i < n; ++i) {
    const float x = rng.uniform(0.2f, 4.0f);
    double sum = 0;
    for (int j = 0; j < 125; ++j) {
      const float c = x * 100.0f * rng.uniform(0.0f, 0.02f);
      sum += c;
      b.image.data()[i * 125 + j] = std::pow(c, power);
    }
    b.energy.data()[i] = x;
    b.ecal.data()[i] = static_cast<float>(sum);
  }
  return b;
}

std::size_t head(const GanModel& m, const std::string& name) {
  const auto names = m.discriminator.output_names();
  return static_cast<std::size_t>(std::find(names.begin(), names.end(), name) - names.begin());
}

}  // namespace

TEST_CASE("3dgan-5: sizes, heads, and the ECAL sum of image^(1/power)") {
  auto be = make_backend("reference");
  auto m = make_gan({.name = "3dgan-5"}, *be, 1);
  CHECK(m->image == Shape{1, 5, 5, 5});
  CHECK(m->latent == 64);
  CHECK(m->ecal_power == 0.5f);
  CHECK(m->generator.weights().count() == 142400);
  CHECK(m->discriminator.weights().count() == 25730);
  CHECK(m->discriminator.output_names() == std::vector<std::string>{"fake", "energy", "ecal"});
  // The ECAL head undoes the power: sum over cells of image^2.
  Rng rng(3, 1);
  const RealBatch b = power_batch(4, 0.5f, rng);
  GanStep step(*m, *be, StepConfig{}, 1);
  const auto out = step.discriminate(b.image, nn::Phase::infer);
  for (int i = 0; i < 4; ++i) CHECK(out[head(*m, "ecal")].data()[i] == doctest::Approx(b.ecal.data()[i]).epsilon(1e-4));
  // Another power reaches the head; power 1 has no Pow node.
  auto m1 = make_gan({.name = "3dgan-5", .power = 1.0f}, *be, 1);
  CHECK(m1->ecal_power == 1.0f);
  CHECK(m1->discriminator.summary().find("inv_pow") == std::string::npos);
  CHECK(m->discriminator.summary().find("inv_pow") != std::string::npos);
}

TEST_CASE("3dgan-5 generator_width: every hidden layer of the generator w times wider, the discriminator as it was") {
  auto be = make_backend("reference");
  // Per w: Dense 64 -> 32w*27 (56 160 w), conv1 27*32w*64w + 64w, bn1 2*64w, conv2 8*64w*32w + 32w,
  // bn2 2*32w, conv3 27*32w*16w + 16w, conv4 27*16w (no bias): 85 504 w^2 + 56 896 w.
  for (const int w : {1, 2, 3}) {
    auto m = make_gan({.name = "3dgan-5", .generator_width = w}, *be, 1);
    CHECK(m->generator.weights().count() == static_cast<std::size_t>(85504 * w * w + 56896 * w));
    CHECK(m->discriminator.weights().count() == 25730);
    CHECK(m->generator.summary().find("(N,1,5,5,5)") != std::string::npos);
  }
  auto m2 = make_gan({.name = "3dgan-5", .generator_width = 2}, *be, 1);
  CHECK(m2->generator.summary().find("(N,128,3,3,3)") != std::string::npos);
  CHECK(m2->generator.summary().find("(N,32,5,5,5)") != std::string::npos);
  CHECK_THROWS_WITH(make_gan({.name = "3dgan-25", .generator_width = 2}, *be, 1),
                    doctest::Contains("other than 1 only for 3dgan-5"));
  CHECK_THROWS_WITH(make_gan({.name = "3dgan-5", .generator_width = 0}, *be, 1), doctest::Contains("must be >= 1"));
}

TEST_CASE("3dgan-25 follows the data's power in its ECAL head; power 1 (its default) adds no node") {
  auto be = make_backend("reference");
  auto plain = make_gan({.name = "3dgan-25"}, *be, 1);
  CHECK(plain->ecal_power == 1.0f);
  CHECK(plain->discriminator.summary().find("inv_pow") == std::string::npos);
  auto m = make_gan({.name = "3dgan-25", .power = 0.5f}, *be, 1);
  CHECK(m->ecal_power == 0.5f);
  CHECK(m->discriminator.weights().count() == plain->discriminator.weights().count());
  // Two showers of 25^3 cells c stored as sqrt(c): the head returns sum(c), not sum(sqrt(c)).
  Rng rng(5, 1);
  Tensor image = Tensor::empty({2, 1, 25, 25, 25});
  double sums[2] = {0, 0};
  for (std::int64_t i = 0; i < image.numel(); ++i) {
    const float c = rng.uniform(0.0f, 0.5f);
    sums[i / (25 * 25 * 25)] += c;
    image.data()[i] = std::sqrt(c);
  }
  GanStep step(*m, *be, StepConfig{}, 1);
  const auto out = step.discriminate(image, nn::Phase::infer);
  for (int i = 0; i < 2; ++i) CHECK(out[head(*m, "ecal")].data()[i] == doctest::Approx(sums[i]).epsilon(1e-4));
}

TEST_CASE(
    "a conditioned discriminator reads E/100 as a second channel; its ECAL head and G's gradient see the shower only") {
  for (const char* be_name : {"reference", "cpu"}) {
    CAPTURE(be_name);
    auto be = make_backend(be_name);
    auto plain = make_gan({.name = "3dgan-5"}, *be, 1);
    auto m = make_gan({.name = "3dgan-5", .condition = true}, *be, 1);
    CHECK(m->conditioned);
    CHECK(m->discriminator_input() == Shape{2, 5, 5, 5});
    CHECK(m->image == Shape{1, 5, 5, 5});
    // d_conv1 (3^3 kernel, 32 filters) gains one input channel: 27 x 32 weights
    CHECK(m->discriminator.weights().count() == plain->discriminator.weights().count() + 27 * 32);
    CHECK(m->generator.weights().count() == plain->generator.weights().count());

    Rng rng(7, 1);
    const RealBatch b = power_batch(4, 0.5f, rng);
    GanStep step(*m, *be, StepConfig{}, 1);
    CHECK_THROWS_WITH_AS(step.discriminate(b.image), doctest::Contains("pass the energies"), Error);
    const auto out = step.discriminate(b.image, b.energy);
    // the ECAL head sums channel 0 squared, whatever the energy channel holds
    for (int i = 0; i < 4; ++i)
      CHECK(out[head(*m, "ecal")].data()[i] == doctest::Approx(b.ecal.data()[i]).epsilon(1e-4));
    // the same showers at other energies: the real/fake head answers differently, the ECAL head does not
    Tensor other = Tensor::empty({4, 1});
    for (int i = 0; i < 4; ++i) other.data()[i] = 4.5f - b.energy.data()[i];
    const auto moved = step.discriminate(b.image, other);
    int differ = 0;
    for (int i = 0; i < 4; ++i) {
      differ += moved[head(*m, "fake")].data()[i] != out[head(*m, "fake")].data()[i];
      CHECK(moved[head(*m, "ecal")].data()[i] == doctest::Approx(out[head(*m, "ecal")].data()[i]).epsilon(1e-6));
    }
    CHECK(differ == 4);

    // dL/d(input) of L = sum of the ECAL head: 2 sqrt(c) = 2 x on channel 0, nothing on channel 1
    Tensor in = Tensor::empty({4, 2, 5, 5, 5});
    for (int i = 0; i < 4; ++i) {
      std::copy_n(b.image.data() + i * 125, 125, in.data() + i * 250);
      std::fill_n(in.data() + i * 250 + 125, 125, b.energy.data()[i]);
    }
    Tensor dev = in;
    if (be->device() != Device::cpu) {
      dev = be->allocate(in.shape());
      be->from_host(in, dev);
    }
    const nn::ForwardContext ctx{nn::Phase::infer, false, 1, 0};
    m->discriminator.forward(dev, ctx);
    std::vector<Tensor> diffs(3);
    diffs[head(*m, "ecal")] = Tensor::full({4, 1}, 1.0f);
    const Tensor g = be->to_host(m->discriminator.backward(diffs, {false, true}));
    REQUIRE(g.shape() == in.shape());
    double worst = 0.0, leak = 0.0;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 125; ++j) {
        worst = std::max(worst, std::abs(g.data()[i * 250 + j] - 2.0 * in.data()[i * 250 + j]));
        leak = std::max(leak, std::abs(static_cast<double>(g.data()[i * 250 + 125 + j])));
      }
    CHECK(worst < 1e-4);
    CHECK(leak == 0.0);
  }
  // only the fixed-angle models with an ECAL head take it
  auto be = make_backend("reference");
  CHECK_THROWS_WITH_AS(make_gan({.name = "anglegan-51", .condition = true}, *be, 1), doctest::Contains("condition"),
                       Error);
}

TEST_CASE("a conditioned 3dgan-5 step trains: finite losses, both networks move") {
  auto be = make_backend("cpu");
  auto m = make_gan({.name = "3dgan-5", .condition = true}, *be, 3);
  Rng rng(11, 1);
  const RealBatch b = power_batch(8, 0.5f, rng);
  GanStep step(*m, *be, StepConfig{}, 5);
  auto copy = [](const nn::Network& net) {
    const Tensor w = net.weights().flat();
    return std::vector<float>(w.data(), w.data() + w.numel());
  };
  const std::vector<float> g0 = copy(m->generator), d0 = copy(m->discriminator);
  const StepLosses l = step.run(b, 0, [&](Net n) {
    auto& net = n == Net::generator ? m->generator : m->discriminator;
    Tensor w = net.weights().flat(), g = net.grads().flat();
    for (std::int64_t i = 0; i < w.numel(); ++i) w.data()[i] -= 1e-3f * g.data()[i];
  });
  CHECK(std::isfinite(l.d_real));
  CHECK(std::isfinite(l.d_fake));
  CHECK(std::isfinite(l.g));
  CHECK(copy(m->generator) != g0);
  CHECK(copy(m->discriminator) != d0);
}

TEST_CASE("fakes_batch_stats: the discriminator's fakes on the generator's batch statistics, running ones kept") {
  auto be = make_backend("cpu");
  Rng rng(11, 1);
  const RealBatch b = power_batch(8, 0.5f, rng);
  const auto none = [](Net) {};
  StepLosses l[2];
  std::vector<float> running[2];
  for (int k = 0; k < 2; ++k) {
    auto m = make_gan({.name = "3dgan-5", .condition = true}, *be, 3);
    StepConfig c;
    c.fakes_batch_stats = k == 1;
    GanStep step(*m, *be, c, 5);
    const Tensor s0 = m->generator.state().flat().clone();
    l[k] = step.run(b, 0, none);
    const Tensor s1 = m->generator.state().flat();
    running[k].assign(s1.data(), s1.data() + s1.numel());
    CHECK(running[k] != std::vector<float>(s0.data(), s0.data() + s0.numel()));  // the generator's passes
  }
  // Only the generator's own passes (the same draws in both modes) moved the running statistics:
  // the fake batch on batch statistics left them as the inference-mode one does.
  CHECK(running[1] == running[0]);
  // The same real pass; a different fake batch (untrained running statistics are 0 and 1, far from
  // the batch's), so a different loss on it.
  CHECK(l[1].d_real == doctest::Approx(l[0].d_real).epsilon(1e-6));
  CHECK(std::abs(l[1].d_fake - l[0].d_fake) > 1e-3 * std::abs(l[0].d_fake));
}

TEST_CASE("hlf_head: a fifth output read through the shower's features, trained by BCE; it needs condition") {
  auto be = make_backend("cpu");
  auto m = make_gan({.name = "3dgan-5", .condition = true, .hlf_head = true}, *be, 3);
  CHECK(m->discriminator.output_names() == std::vector<std::string>{"fake", "energy", "ecal", "hlf"});
  // 2 + 5 * 5 = 27 features -> Dense 64 -> Dense 64 -> Dense 1, on top of the conditioned D.
  auto plain = make_gan({.name = "3dgan-5", .condition = true}, *be, 3);
  CHECK(m->discriminator.weights().count() - plain->discriminator.weights().count() == (27 + 1) * 64 + 65 * 64 + 65);
  CHECK(m->loss_weights.hlf == m->loss_weights.bce);
  Rng rng(11, 1);
  const RealBatch b = power_batch(8, 0.5f, rng);
  GanStep step(*m, *be, StepConfig{}, 5);
  const Tensor w0 = m->discriminator.weights().flat().clone();
  const StepLosses l = step.run(b, 0, [&](Net n) {
    auto& net = n == Net::generator ? m->generator : m->discriminator;
    Tensor w = net.weights().flat(), g = net.grads().flat();
    for (std::int64_t i = 0; i < w.numel(); ++i) w.data()[i] -= 1e-3f * g.data()[i];
  });
  const std::size_t k = head(*m, "hlf");
  // An untrained sigmoid head: BCE near ln 2 on real and on fake.
  CHECK(l.d_real_heads[k] > 0.3);
  CHECK(l.d_real_heads[k] < 1.5);
  CHECK(std::isfinite(l.g_heads[k]));
  // Its weights (the last segments) moved.
  const auto& segs = m->discriminator.weights().segments();
  const auto& last = segs.back();
  bool moved = false;
  for (std::int64_t i = 0; i < last.shape.numel(); ++i)
    moved |= m->discriminator.weights().data()[last.offset + i] != w0.data()[last.offset + i];
  CHECK(moved);
  CHECK_THROWS_WITH(make_gan({.name = "3dgan-5", .hlf_head = true}, *be, 3),
                    doctest::Contains("hlf_head (a real/fake head on the shower's features) needs condition: true"));

  // hlf_lr_scale changes how fast the head learns, not what it computes: from the same seed, the
  // same losses before any step.
  auto fast = make_gan({.name = "3dgan-5", .condition = true, .hlf_head = true, .hlf_lr_scale = 5.0f}, *be, 3);
  auto slow = make_gan({.name = "3dgan-5", .condition = true, .hlf_head = true}, *be, 3);
  GanStep fast_step(*fast, *be, StepConfig{}, 5), slow_step(*slow, *be, StepConfig{}, 5);
  const auto none = [](Net) {};
  const StepLosses lf = fast_step.run(b, 0, none), ls = slow_step.run(b, 0, none);
  CHECK(lf.d_real_heads[k] == doctest::Approx(ls.d_real_heads[k]).epsilon(1e-5));
  CHECK(lf.g_heads[k] == doctest::Approx(ls.g_heads[k]).epsilon(1e-5));
}

TEST_CASE(
    "hlf_mmd, response_mmd, longitudinal_mmd, transverse_mmd: the generator's loss gains MMD^2 of the showers' "
    "features; its "
    "gradient by finite "
    "differences, with the features scaled by the batch's spread or by their spread at each energy") {
  for (const bool by_energy : {false, true}) {
    CAPTURE(by_energy);
    auto be = make_backend("cpu");
    auto m = make_gan({.name = "3dgan-5", .condition = true}, *be, 3);
    Rng rng(11, 1);
    const RealBatch b = power_batch(16, 0.5f, rng);
    StepConfig c;
    c.generator_passes = 1;
    c.mmd_energy_scale = by_energy;
    StepConfig c1 = c, c2 = c;
    c1.hlf_mmd = 3.0f;
    c2.hlf_mmd = 3.0f;
    c2.response_mmd = 2.0f;
    c2.longitudinal_mmd = 1.5f;
    c2.transverse_mmd = 1.2f;
    GanStep plain(*m, *be, c, 5), one(*m, *be, c1, 5), both(*m, *be, c2, 5);
    CHECK(plain.loss_names() == m->discriminator.output_names());
    CHECK(one.loss_names().back() == "hlf_mmd");
    CHECK(both.loss_names().back() == "transverse_mmd");
    std::vector<float> grad;
    const auto keep_g = [&](Net n) {
      if (n != Net::generator) return;
      const Tensor g = m->generator.grads().flat();
      grad.assign(g.data(), g.data() + g.numel());
    };
    // Weights never change here; the generator's pass reads only weights and the (seed, step) noise.
    const StepLosses lp = plain.run(b, 0, keep_g);
    const std::vector<float> g_plain = grad;
    const StepLosses l1 = one.run(b, 0, keep_g);
    const StepLosses l2 = both.run(b, 0, keep_g);
    const std::vector<float> g_both = grad;
    REQUIRE(l1.heads.size() == lp.heads.size() + 1);
    REQUIRE(l2.heads.size() == lp.heads.size() + 4);
    const std::size_t h = lp.heads.size();
    const double mmd = l2.g_heads[h], resp = l2.g_heads[h + 1], lon = l2.g_heads[h + 2], tra = l2.g_heads[h + 3];
    CHECK(mmd > 0.01);  // untrained showers against the batch's
    CHECK(resp > 0.01);
    CHECK(lon > 0.01);
    CHECK(tra > 0.01);
    CHECK(lon != doctest::Approx(resp).epsilon(1e-3));  // the layers' fractions enter its kernel
    CHECK(tra != doctest::Approx(resp).epsilon(1e-3));  // and the columns' and rows' into this one
    CHECK(tra != doctest::Approx(lon).epsilon(1e-3));
    // the full term does not depend on the others, nor on the transverse profiles computed beside it
    CHECK(l1.g_heads[h] == doctest::Approx(mmd).epsilon(1e-9));
    CHECK(l2.g == doctest::Approx(lp.g + 3.0 * mmd + 2.0 * resp + 1.5 * lon + 1.2 * tra).epsilon(1e-5));
    CHECK(l2.d_real == doctest::Approx(lp.d_real).epsilon(1e-6));
    CHECK(l2.d_real_heads[h] == 0.0);
    CHECK(l2.d_fake_heads[h + 1] == 0.0);
    CHECK(l2.d_fake_heads[h + 2] == 0.0);
    CHECK(l2.d_fake_heads[h + 3] == 0.0);
    // The terms' share of the generator's gradient, g_both - g_plain, against central differences
    // of 3 MMD^2 + 2 MMD^2_response + 1.5 MMD^2_longitudinal + 1.2 MMD^2_transverse on the three
    // weights it moves most.
    std::vector<std::size_t> idx(g_both.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::partial_sort(idx.begin(), idx.begin() + 3, idx.end(), [&](std::size_t a, std::size_t b2) {
      return std::abs(g_both[a] - g_plain[a]) > std::abs(g_both[b2] - g_plain[b2]);
    });
    const auto none = [](Net) {};
    const auto terms = [&] {
      const StepLosses l = both.run(b, 0, none);
      return 3.0 * l.g_heads[h] + 2.0 * l.g_heads[h + 1] + 1.5 * l.g_heads[h + 2] + 1.2 * l.g_heads[h + 3];
    };
    for (int t = 0; t < 3; ++t) {
      const std::size_t j = idx[static_cast<std::size_t>(t)];
      float* w = m->generator.weights().data() + j;
      const float w0 = *w, dw = 2e-3f * std::max(std::abs(w0), 0.05f);
      *w = w0 + dw;
      const double up = terms();
      *w = w0 - dw;
      const double down = terms();
      *w = w0;
      const double fd = (up - down) / (2.0 * static_cast<double>(dw));
      CHECK(g_both[j] - g_plain[j] == doctest::Approx(fd).epsilon(0.03));
    }
    // The response's spread about the real batch's curve (response_spread), alone: its value is a
    // squared log ratio, its share of the gradient against central differences.
    StepConfig c3 = c;
    c3.response_spread = 1.5f;
    GanStep spread(*m, *be, c3, 5);
    CHECK(spread.loss_names().back() == "response_spread");
    const StepLosses l3 = spread.run(b, 0, keep_g);
    const std::vector<float> g_spread = grad;
    REQUIRE(l3.heads.size() == lp.heads.size() + 1);
    const double sp = l3.g_heads[h];
    CHECK(sp > 1e-3);  // untrained showers: their response's spread is not the batch's
    CHECK(l3.g == doctest::Approx(lp.g + 1.5 * sp).epsilon(1e-5));
    std::partial_sort(idx.begin(), idx.begin() + 3, idx.end(), [&](std::size_t a, std::size_t b2) {
      return std::abs(g_spread[a] - g_plain[a]) > std::abs(g_spread[b2] - g_plain[b2]);
    });
    for (int t = 0; t < 3; ++t) {
      const std::size_t j = idx[static_cast<std::size_t>(t)];
      float* w = m->generator.weights().data() + j;
      const float w0 = *w, dw = 2e-3f * std::max(std::abs(w0), 0.05f);
      *w = w0 + dw;
      const double up = spread.run(b, 0, none).g_heads[h];
      *w = w0 - dw;
      const double down = spread.run(b, 0, none).g_heads[h];
      *w = w0;
      const double fd = 1.5 * (up - down) / (2.0 * static_cast<double>(dw));
      CHECK(g_spread[j] - g_plain[j] == doctest::Approx(fd).epsilon(0.03));
    }
    // Their values at evaluation: inference-mode showers against the batch.
    const StepLosses ev = both.evaluate(b, 9);
    CHECK(ev.heads == both.loss_names());
    CHECK(ev.g_heads[h + 1] > 0.0);
    CHECK(spread.evaluate(b, 9).g_heads[h] > 0.0);
    CHECK_THROWS_WITH(
        GanStep(*make_gan({.name = "3dgan-5"}, *be, 3), *be, c2, 5),
        doctest::Contains("(hlf_mmd, response_mmd, longitudinal_mmd, transverse_mmd, response_spread) compare showers "
                          "of like energy"));
  }
}

TEST_CASE("the ECAL fit takes the data's coefficients; the default is the reference's GetEcalFit") {
  for (float x : {0.1f, 1.0f, 2.5f, 5.0f}) {
    CHECK(ecal_fit(x, 100.0f, kReferenceEcalFit) == ecal_fit(x, 100.0f));
    // ratio(x) = 2 + x (percent): target = (2 + x) x xscale
    CHECK(ecal_fit(x, 100.0f, {0, 0, 0, 1, 2}) == doctest::Approx((2.0f + x) * x * 100.0f));
  }
}

TEST_CASE("normalise_energy: the discriminator's ECAL head and targets are divided by E alike") {
  auto be = make_backend("cpu");
  auto m = make_gan({.name = "3dgan-5"}, *be, 2);
  Rng rng(5, 2);
  const RealBatch b = power_batch(16, 0.5f, rng);
  for (bool normalise : {false, true}) {
    CAPTURE(normalise);
    StepConfig sc;
    sc.normalise_energy = normalise;
    GanStep step(*m, *be, sc, 7);
    // Real showers whose ECAL targets are their sums: the ECAL head's MAPE on real is ~0 whether
    // or not both sides are divided by E (a mismatch of the two scalings would be off by E).
    const StepLosses l = step.evaluate(b, 11);
    CHECK(l.d_real_heads[head(*m, "ecal")] < 1e-3);
  }
  // The D input is the image over E: D's ECAL head sees sum / (E/100).
  StepConfig sc;
  sc.normalise_energy = true;
  GanStep step(*m, *be, sc, 7);
  RealBatch wrong = b;  // targets not divided: the head must now be off by the factor E/100
  const StepLosses l = step.evaluate(b, 11);
  StepConfig off;
  GanStep plain(*m, *be, off, 7);
  wrong.ecal = Tensor::empty({16, 1});
  for (int i = 0; i < 16; ++i) wrong.ecal.data()[i] = b.ecal.data()[i] / b.energy.data()[i];
  // plain: the head sees sum, the target is sum / x: MAPE = mean |1 - x| in percent
  double expect = 0;
  for (int i = 0; i < 16; ++i) expect += 100.0 * std::abs(1.0 - b.energy.data()[i]) / 1.0;
  expect /= 16;
  const StepLosses lp = plain.evaluate(wrong, 11);
  CHECK(lp.d_real_heads[head(*m, "ecal")] == doctest::Approx(expect).epsilon(1e-3));
  CHECK(l.d_real_heads[head(*m, "ecal")] < 1e-3);
  // The angle model refuses it.
  auto a = make_gan({.name = "anglegan-51"}, *be, 1);
  CHECK_THROWS_WITH_AS(GanStep(*a, *be, sc, 1), doctest::Contains("normalise_energy"), Error);
}

TEST_CASE("normalise_energy trains: the generator's gradient is scaled back through the division") {
  // One step on and off from the same weights: both finite, and different (the D sees other inputs).
  auto be = make_backend("cpu");
  Rng rng(9, 3);
  const RealBatch b = power_batch(8, 0.5f, rng);
  std::vector<float> g_after[2];
  for (int k = 0; k < 2; ++k) {
    auto m = make_gan({.name = "3dgan-5"}, *be, 4);
    StepConfig sc;
    sc.normalise_energy = k == 1;
    sc.ecal_fit = {0, 0, 0, 0, 2.0f};
    sc.ecal_xscale = 100.0f;
    GanStep step(*m, *be, sc, 3);
    const StepLosses l = step.run(b, 0, [&](Net n) {
      auto& net = n == Net::generator ? m->generator : m->discriminator;
      // plain SGD, lr 1e-3, on the cpu backend's host buffers
      Tensor w = net.weights().flat(), g = net.grads().flat();
      for (std::int64_t i = 0; i < w.numel(); ++i) w.data()[i] -= 1e-3f * g.data()[i];
    });
    CHECK(std::isfinite(l.g));
    const Tensor w = m->generator.weights().flat();
    g_after[k].assign(w.data(), w.data() + w.numel());
  }
  CHECK(g_after[0] != g_after[1]);
}

TEST_CASE("noise sphere: the fixed model's input is (E/100) z with |z| = sqrt(latent); normal draws the same z") {
  auto be = make_backend("reference");
  auto normal = make_gan({.name = "3dgan-5"}, *be, 1);
  auto sphere = make_gan({.name = "3dgan-5", .noise = "sphere"}, *be, 1);
  CHECK_FALSE(normal->noise_on_sphere);
  CHECK(sphere->noise_on_sphere);
  GanStep a(*normal, *be, StepConfig{}, 1), b(*sphere, *be, StepConfig{}, 1);
  const Tensor energy = Tensor::from({3, 1}, std::vector<float>{0.1f, 1.0f, 4.0f});
  Rng r1(7, 1), r2(7, 1);
  const Tensor za = a.generator_input(energy, Tensor(), r1), zb = b.generator_input(energy, Tensor(), r2);
  const std::int64_t n = normal->latent;
  for (std::int64_t i = 0; i < 3; ++i) {
    double na = 0, nb = 0, dot = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      const double x = za.data()[i * n + j], y = zb.data()[i * n + j];
      na += x * x;
      nb += y * y;
      dot += x * y;
    }
    const double e = energy.data()[i];
    CHECK(std::sqrt(nb) == doctest::Approx(e * std::sqrt(static_cast<double>(n))).epsilon(1e-5));
    CHECK(dot / std::sqrt(na * nb) == doctest::Approx(1.0).epsilon(1e-6));                  // the same direction
    CHECK(std::abs(std::sqrt(na) / (e * std::sqrt(static_cast<double>(n))) - 1.0) > 1e-4);  // |z| varies
  }
  CHECK_THROWS_WITH_AS(make_gan({.name = "3dgan-5", .noise = "uniform"}, *be, 1), doctest::Contains("noise"), Error);
}

TEST_CASE("input concat: [E/100, z] with z of size latent - 1, on the sphere of radius sqrt(latent - 1)") {
  auto be = make_backend("reference");
  auto m = make_gan({.name = "3dgan-5", .noise = "sphere", .input = "concat"}, *be, 1);
  auto product = make_gan({.name = "3dgan-5", .noise = "sphere"}, *be, 1);
  CHECK(m->energy_concat);
  CHECK(m->latent == 64);
  CHECK(m->noise == 63);
  CHECK(m->generator.weights().count() == product->generator.weights().count());
  GanStep step(*m, *be, StepConfig{}, 1);
  const Tensor energy = Tensor::from({3, 1}, std::vector<float>{0.1f, 1.0f, 4.0f});
  Rng rng(7, 1);
  const Tensor in = step.generator_input(energy, Tensor(), rng);
  REQUIRE(in.shape() == Shape({3, 64}));
  for (std::int64_t i = 0; i < 3; ++i) {
    CHECK(in.data()[i * 64] == energy.data()[i]);
    double n2 = 0;
    for (std::int64_t j = 1; j < 64; ++j) n2 += static_cast<double>(in.data()[i * 64 + j]) * in.data()[i * 64 + j];
    CHECK(std::sqrt(n2) == doctest::Approx(std::sqrt(63.0)).epsilon(1e-5));
  }
  // From given noise: the same rows.
  Tensor noise = Tensor::empty({3, 63});
  Rng again(7, 1);
  for (float& z : noise.values()) z = again.normal();
  const Tensor in2 = step.generator_input(energy, Tensor(), noise);
  for (std::int64_t k = 0; k < in.numel(); ++k) CHECK(in2.data()[k] == in.data()[k]);
  CHECK_THROWS_WITH(make_gan({.name = "3dgan-5", .input = "sum"}, *be, 1), doctest::Contains("product or concat"));
  CHECK_THROWS_WITH(make_gan({.name = "tiny-8", .input = "concat"}, *be, 1), doctest::Contains("3dgan-5 and 3dgan-25"));
}

TEST_CASE("symmetrise: reflections are permutations whose backward is their transpose; generation reflects") {
  // Hand case: a 3x3x1 shower with cell (x, y) = 10 x + y.
  Tensor one = Tensor::empty({1, 1, 3, 3, 1});
  for (int x = 0; x < 3; ++x)
    for (int y = 0; y < 3; ++y) one.data()[x * 3 + y] = static_cast<float>(10 * x + y);
  auto at = [](const Tensor& t, int x, int y) { return t.data()[x * 3 + y]; };
  CHECK(at(reflect_showers(one, {1}, false), 0, 1) == 21.0f);  // x reflected: (2, 1) -> (0, 1)
  CHECK(at(reflect_showers(one, {2}, false), 1, 0) == 12.0f);  // y reflected: (1, 2) -> (1, 0)
  CHECK(at(reflect_showers(one, {4}, false), 0, 2) == 20.0f);  // exchanged: (2, 0) -> (0, 2)
  CHECK(at(reflect_showers(one, {5}, false), 2, 2) == 20.0f);  // exchanged, then x reflected
  // <P a, b> = <a, P^T b> for every code (the backward is the adjoint), and P^T P = 1.
  Rng rng(5, 1);
  const std::vector<std::uint8_t> codes{0, 1, 2, 3, 4, 5, 6, 7};
  const Tensor a = random_tensor({8, 1, 4, 4, 3}, rng), b = random_tensor({8, 1, 4, 4, 3}, rng);
  const Tensor pa = reflect_showers(a, codes, false), ptb = reflect_showers(b, codes, true);
  const Tensor back = reflect_showers(pa, codes, true);
  double lhs = 0, rhs = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    lhs += static_cast<double>(pa.data()[i]) * b.data()[i];
    rhs += static_cast<double>(a.data()[i]) * ptb.data()[i];
    CHECK(back.data()[i] == a.data()[i]);
  }
  CHECK(lhs == doctest::Approx(rhs).epsilon(1e-6));
  // Generation: each shower of the symmetrised model is one of the 8 images of the plain model's
  // (the same weights, the same noise), and more than one reflection occurs.
  auto be = make_backend("cpu");
  auto plain = make_gan({.name = "3dgan-5", .noise = "sphere"}, *be, 4);
  auto sym = make_gan({.name = "3dgan-5", .noise = "sphere", .symmetrise = true}, *be, 4);
  GanStep ps(*plain, *be, StepConfig{}, 1), ss(*sym, *be, StepConfig{}, 1);
  Tensor energy = Tensor::empty({32, 1});
  for (std::int64_t i = 0; i < 32; ++i) energy.data()[i] = 0.2f + 0.1f * static_cast<float>(i);
  const Tensor g0 = ps.generate(energy, Tensor(), 9), g1 = ss.generate(energy, Tensor(), 9);
  std::set<int> seen;
  for (std::int64_t i = 0; i < 32; ++i) {
    Tensor item = Tensor::empty({1, 1, 5, 5, 5});
    std::copy_n(g0.data() + i * 125, 125, item.data());
    int found = -1;
    for (std::uint8_t c = 0; c < 8 && found < 0; ++c) {
      const Tensor r = reflect_showers(item, {c}, false);
      if (std::equal(r.data(), r.data() + 125, g1.data() + i * 125)) found = c;
    }
    CHECK(found >= 0);
    seen.insert(found);
  }
  CHECK(seen.size() > 2);
  // A training step runs through the reflections.
  Rng r2(11, 1);
  auto cond = make_gan({.name = "3dgan-5", .condition = true, .noise = "sphere", .symmetrise = true}, *be, 3);
  GanStep cs(*cond, *be, StepConfig{}, 5);
  const StepLosses l = cs.run(power_batch(8, 0.5f, r2), 0, [&](Net n) {
    auto& net = n == Net::generator ? cond->generator : cond->discriminator;
    Tensor w = net.weights().flat(), g = net.grads().flat();
    for (std::int64_t i = 0; i < w.numel(); ++i) w.data()[i] -= 1e-3f * g.data()[i];
  });
  CHECK(std::isfinite(l.g));
  CHECK_THROWS_WITH(make_gan({.name = "anglegan-51", .symmetrise = true}, *be, 1), doctest::Contains("symmetrise"));
}
