// The 3DGAN training step (gan_step.hpp): targets and label flips, the discriminator and generator
// passes with their head losses, gradient checks, evaluation and generation.
#include "mpigan/models/gan_step.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/nn/calo_heads.hpp"
#include "mpigan/nn/loss.hpp"

#include <algorithm>
#include <cmath>

namespace mpigan::models {

const char* to_string(Net n) {
  return n == Net::generator ? "generator" : "discriminator";
}

namespace {
enum HeadKind { kFake = 0, kEnergy = 1, kEcal = 2, kAngle = 3, kHlf = 4 };
}

GanStep::GanStep(GanModel& model, Backend& backend, const StepConfig& config, std::uint64_t seed)
    : m_model(model), m_backend(backend), m_config(config), m_seed(seed) {
  MPIGAN_CHECK(config.label_flip >= 0.0f && config.label_flip < 0.5f,
               "gan step: label_flip must be in [0, 0.5), got {}", config.label_flip);
  MPIGAN_CHECK(config.fake_energy_lo > 0.0f && config.fake_energy_hi >= config.fake_energy_lo,
               "gan step: fake energy range [{}, {}] must be positive and ordered", config.fake_energy_lo,
               config.fake_energy_hi);
  MPIGAN_CHECK(config.generator_passes >= 1, "gan step: generator_passes must be >= 1, got {}",
               config.generator_passes);
  MPIGAN_CHECK(!config.normalise_energy || !model.angle_model,
               "gan step: normalise_energy is for the fixed-angle models, not '{}'", model.name);
  MPIGAN_CHECK(config.hlf_mmd >= 0.0f && config.response_mmd >= 0.0f && config.longitudinal_mmd >= 0.0f &&
                   config.transverse_mmd >= 0.0f && config.response_spread >= 0.0f,
               "gan step: hlf_mmd, response_mmd, longitudinal_mmd, transverse_mmd and response_spread are loss "
               "weights, >= 0, got {}, {}, {}, {} and {}",
               config.hlf_mmd, config.response_mmd, config.longitudinal_mmd, config.transverse_mmd,
               config.response_spread);
  MPIGAN_CHECK(!config.feature_terms() || (model.conditioned && !model.angle_model),
               "gan step: the feature terms (hlf_mmd, response_mmd, longitudinal_mmd, transverse_mmd, response_spread) "
               "compare showers "
               "of like energy and read it from a "
               "conditioned discriminator's input: model '{}' needs condition: true (and a fixed angle)",
               model.name);
  m_heads = m_model.discriminator.output_names();
  for (const auto& h : m_heads) {
    const LossWeights& w = m_model.loss_weights;
    if (h == "fake")
      m_head_kind.push_back(kFake), m_head_weights.push_back(w.bce);
    else if (h == "energy")
      m_head_kind.push_back(kEnergy), m_head_weights.push_back(w.energy);
    else if (h == "ecal")
      m_head_kind.push_back(kEcal), m_head_weights.push_back(w.ecal);
    else if (h == "angle")
      m_head_kind.push_back(kAngle), m_head_weights.push_back(w.angle);
    else if (h == "hlf")
      m_head_kind.push_back(kHlf), m_head_weights.push_back(w.hlf);
    else
      MPIGAN_FATAL("model '{}': discriminator output '{}' has no loss", m_model.name, h);
  }
}

std::vector<std::string> GanStep::loss_names() const {
  std::vector<std::string> names = m_heads;
  if (m_config.hlf_mmd > 0.0f) names.emplace_back("hlf_mmd");
  if (m_config.response_mmd > 0.0f) names.emplace_back("response_mmd");
  if (m_config.longitudinal_mmd > 0.0f) names.emplace_back("longitudinal_mmd");
  if (m_config.transverse_mmd > 0.0f) names.emplace_back("transverse_mmd");
  if (m_config.response_spread > 0.0f) names.emplace_back("response_spread");
  return names;
}

std::vector<float> GanStep::MmdReference::weights() const {
  std::vector<float> w;
  for (const MmdTerm& t : terms) w.push_back(t.weight);
  if (!x.empty()) w.push_back(spread_weight);
  return w;
}

std::int64_t GanStep::feature_count() const {
  const Dims3 dims{m_model.image[1], m_model.image[2], m_model.image[3]};
  return nn::shower_feature_count(dims.w) + (m_config.transverse_mmd > 0.0f ? nn::transverse_feature_count(dims) : 0);
}

std::vector<double> GanStep::features_of(const Tensor& input) const {
  const Tensor host = to_host(input);
  const Shape& s = host.shape();
  const std::int64_t n = s[0], item = s.item_numel(), F = feature_count(), H = nn::shower_feature_count(s[4]);
  std::vector<double> f(static_cast<std::size_t>(n * F));
  for (std::int64_t i = 0; i < n; ++i) {
    nn::shower_features(host.data() + i * item, s[1], s.spatial(), m_model.ecal_power, f.data() + i * F);
    if (F > H)
      nn::transverse_features(host.data() + i * item, s[1], s.spatial(), m_model.ecal_power, f.data() + i * F + H);
  }
  return f;
}

GanStep::MmdReference GanStep::mmd_reference(const Tensor& real_input) const {
  MmdReference ref;
  const auto F = static_cast<std::size_t>(feature_count());
  const std::vector<double> raw = features_of(real_input);
  ref.features = raw;
  if (m_config.mmd_energy_scale || m_config.response_spread > 0.0f) ref.by_energy.emplace(raw, F, kMmdScaleFloor);
  if (m_config.mmd_energy_scale) ref.by_energy->apply(raw, ref.features);
  if (m_config.response_spread > 0.0f) {
    ref.spread_weight = m_config.response_spread;
    for (std::size_t i = 0; i < raw.size() / F; ++i) {
      ref.x.push_back(raw[i * F]);
      ref.residual.push_back(raw[i * F + 1] - ref.by_energy->mean(1, raw[i * F]));
    }
  }
  const std::vector<double>& real = ref.features;
  std::vector<MmdTerm>& terms = ref.terms;
  const std::size_t n = real.size() / F;
  std::vector<double> scale(F);
  for (std::size_t k = 0; k < F; ++k) {
    double m = 0.0, v = 0.0;
    for (std::size_t i = 0; i < n; ++i) m += real[i * F + k];
    m /= static_cast<double>(n);
    for (std::size_t i = 0; i < n; ++i) v += (real[i * F + k] - m) * (real[i * F + k] - m);
    // a feature constant in the batch (an empty layer's) keeps a scale of order one
    scale[k] = 1.0 / std::max(std::sqrt(v / static_cast<double>(n)), kMmdScaleFloor);
  }
  scale[0] *= kMmdEnergyWeight;
  // A term on some of the features: the other scales 0, these grown by sqrt(F / their count) so
  // that s (a mean over the F dimensions) is their mean.
  const auto only = [&](const std::vector<std::size_t>& keep) {
    const double grow = std::sqrt(static_cast<double>(F) / static_cast<double>(keep.size()));
    std::vector<double> some(F, 0.0);
    for (const std::size_t k : keep) some[k] = scale[k] * grow;
    return some;
  };
  // the shower features (the transverse profiles, when computed, follow them)
  const auto H = static_cast<std::size_t>(nn::shower_feature_count(m_model.image[3]));
  std::vector<std::size_t> shower(H);
  for (std::size_t k = 0; k < H; ++k) shower[k] = k;
  if (m_config.hlf_mmd > 0.0f) terms.push_back({m_config.hlf_mmd, only(shower)});
  // the energy and the response alone
  if (m_config.response_mmd > 0.0f) terms.push_back({m_config.response_mmd, only({0, 1})});
  if (m_config.longitudinal_mmd > 0.0f) {
    // the energy, the response and each layer's fraction (feature 2 + 5z of nn::shower_features)
    std::vector<std::size_t> keep{0, 1};
    for (std::size_t z = 0; z < (H - 2) / 5; ++z) keep.push_back(2 + 5 * z);
    terms.push_back({m_config.longitudinal_mmd, only(keep)});
  }
  if (m_config.transverse_mmd > 0.0f) {
    // the energy, the response and the transverse profiles (after the shower features)
    std::vector<std::size_t> keep{0, 1};
    for (std::size_t k = H; k < F; ++k) keep.push_back(k);
    terms.push_back({m_config.transverse_mmd, only(keep)});
  }
  return ref;
}

std::vector<double> GanStep::mmd_losses(const Tensor& input, const MmdReference& real, Tensor* d_input_grad) const {
  const Tensor host = to_host(input);
  const Shape& s = host.shape();
  const std::int64_t n = s[0], item = s.item_numel(), F = feature_count(), H = nn::shower_feature_count(s[4]);
  const std::vector<double> fake_features = features_of(host);
  std::vector<double> fake = fake_features;
  const auto& st = real.by_energy;
  const bool standardised = st && m_config.mmd_energy_scale;
  if (standardised) st->apply(fake_features, fake);
  std::vector<double> values, grad(d_input_grad != nullptr ? fake.size() : 0), sum(grad.size(), 0.0);
  for (const MmdTerm& t : real.terms) {
    values.push_back(nn::mmd2_rq(fake, real.features, static_cast<std::size_t>(F), t.scale, grad));
    for (std::size_t j = 0; j < grad.size(); ++j) sum[j] += t.weight * grad[j];
  }
  if (standardised && d_input_grad != nullptr)
    // back through the standardisation: d f'_k / d f_k = 1 / sigma_k(E); the energy is not generated
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t k = 1; k < F; ++k) {
        const auto j = static_cast<std::size_t>(i * F + k);
        sum[j] /= st->sigma(static_cast<std::size_t>(k), fake_features[static_cast<std::size_t>(i * F)]);
      }
  if (!real.x.empty()) {
    // the response's spread about the real batch's curve, on the features as computed
    std::vector<double> x(static_cast<std::size_t>(n)), r(x.size()), gr(d_input_grad != nullptr ? x.size() : 0);
    for (std::size_t i = 0; i < x.size(); ++i) {
      x[i] = fake_features[i * static_cast<std::size_t>(F)];
      r[i] = fake_features[i * static_cast<std::size_t>(F) + 1] - st->mean(1, x[i]);
    }
    values.push_back(nn::binned_spread_loss(x, r, real.x, real.residual, kResponseSpreadBins, 3, gr));
    for (std::size_t i = 0; i < gr.size(); ++i) sum[i * static_cast<std::size_t>(F) + 1] += real.spread_weight * gr[i];
  }
  if (d_input_grad == nullptr) return values;
  Tensor g = to_host(*d_input_grad);
  if (g.data() == d_input_grad->data()) g = g.clone();  // the network's own buffer: not ours to change
  std::vector<float> gy(static_cast<std::size_t>(F)), gx(static_cast<std::size_t>(item));
  std::vector<double> f(static_cast<std::size_t>(F));
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t k = 0; k < F; ++k)
      gy[static_cast<std::size_t>(k)] = static_cast<float>(sum[static_cast<std::size_t>(i * F + k)]);
    const float* x = host.data() + i * item;
    float* dst = g.data() + i * item;
    nn::shower_features(x, s[1], s.spatial(), m_model.ecal_power, f.data(), gy.data(), gx.data());
    for (std::int64_t j = 0; j < item; ++j) dst[j] += gx[static_cast<std::size_t>(j)];
    if (F > H) {
      nn::transverse_features(x, s[1], s.spatial(), m_model.ecal_power, f.data(), gy.data() + H, gx.data());
      for (std::int64_t j = 0; j < item; ++j) dst[j] += gx[static_cast<std::size_t>(j)];
    }
  }
  *d_input_grad = to_device(g);
  return values;
}

Tensor GanStep::to_device(const Tensor& host) const {
  if (m_backend.device() == Device::cpu) return host;
  Tensor d = m_backend.allocate(host.shape());
  m_backend.from_host(host, d);
  return d;
}

Tensor GanStep::to_host(const Tensor& t) const {
  return t.device() == Device::cpu && t.canonical() ? t : m_backend.to_host(t);
}

Tensor GanStep::generator_input(const Tensor& energy, const Tensor& angle, Rng& rng) const {
  Tensor noise = Tensor::empty({energy.shape()[0], m_model.noise});
  for (float& z : noise.values()) z = rng.normal();
  return generator_input(energy, angle, noise);
}

Tensor GanStep::generator_input(const Tensor& energy, const Tensor& angle, const Tensor& noise) const {
  const std::int64_t n = energy.shape()[0];
  MPIGAN_CHECK_SHAPE(noise.shape() == Shape({n, m_model.noise}),
                     "gan step: latent noise of shape {}; {} needs ({}, {})", noise.shape(), m_model.name, n,
                     m_model.noise);
  Tensor in = Tensor::empty({n, m_model.latent});
  float* p = in.data();
  for (std::int64_t i = 0; i < n; ++i) {
    float* row = p + i * m_model.latent;
    const float* z = noise.data() + i * m_model.noise;
    if (m_model.angle_model) {
      // concat(E/100, theta, noise)
      row[0] = energy.data()[i];
      row[1] = angle.data()[i];
      std::copy(z, z + m_model.noise, row + 2);
    } else {
      // (E/100) * z, or [E/100, z] with energy_concat; z on the sphere of radius sqrt(n) when
      // noise_on_sphere (n: the noise's size)
      const std::int64_t nz = m_model.noise;
      float* zr = m_model.energy_concat ? row + 1 : row;
      std::copy(z, z + nz, zr);
      float k = m_model.energy_concat ? 1.0f : energy.data()[i];
      if (m_model.energy_concat) row[0] = energy.data()[i];
      if (m_model.noise_on_sphere) {
        double norm2 = 0;
        for (std::int64_t j = 0; j < nz; ++j) norm2 += static_cast<double>(zr[j]) * zr[j];
        k *= static_cast<float>(std::sqrt(static_cast<double>(nz) / std::max(norm2, 1e-30)));
      }
      for (std::int64_t j = 0; j < nz; ++j) zr[j] *= k;
    }
  }
  return in;
}

double GanStep::head_losses(const std::vector<Tensor>& outputs, const std::vector<Tensor>& targets,
                            std::vector<double>& per_head, std::vector<Tensor>& diffs) const {
  per_head.assign(m_heads.size(), 0.0);
  diffs.assign(m_heads.size(), Tensor());
  double total = 0.0;
  const auto energy_head = std::find(m_head_kind.begin(), m_head_kind.end(), kEnergy);
  for (std::size_t h = 0; h < m_heads.size(); ++h) {
    const Tensor out = to_host(outputs[h]);
    const nn::LossKind kind = m_head_kind[h] == kFake || m_head_kind[h] == kHlf ? nn::LossKind::bce
                              : m_head_kind[h] == kAngle                        ? nn::LossKind::mae
                                                                                : nn::LossKind::mape;
    Tensor diff = Tensor::empty(out.shape());
    if (m_head_kind[h] == kEcal && m_config.ecal_mean_bins > 0 && energy_head != m_head_kind.end()) {
      const Tensor& energy = targets[static_cast<std::size_t>(energy_head - m_head_kind.begin())];
      per_head[h] = nn::binned_mean_ratio_loss(out.values(), targets[h].values(), energy.values(),
                                               m_config.ecal_mean_bins, m_config.fake_energy_lo,
                                               m_config.fake_energy_hi, m_head_weights[h], diff.values());
    } else {
      per_head[h] = nn::loss_value_and_grad(kind, out.values(), targets[h].values(), m_head_weights[h], diff.values());
    }
    total += m_head_weights[h] * per_head[h];
    if (m_head_weights[h] != 0.0f) diffs[h] = to_device(diff);
  }
  return total;
}

std::vector<Tensor> GanStep::head_targets(const Tensor& labels, const Tensor& energy, const Tensor& ecal,
                                          const Tensor& angle) const {
  std::vector<Tensor> t(m_heads.size());
  for (std::size_t h = 0; h < m_heads.size(); ++h)
    t[h] = m_head_kind[h] == kFake || m_head_kind[h] == kHlf ? labels
           : m_head_kind[h] == kEnergy                       ? energy
           : m_head_kind[h] == kEcal                         ? ecal
                                                             : angle;
  return t;
}

void GanStep::check_grads(Net net, std::uint64_t step, const char* phase) const {
  if (!m_config.check_finite) return;
  nn::Network& n = net == Net::generator ? m_model.generator : m_model.discriminator;
  const std::size_t bad = m_backend.count_nonfinite(n.grads().flat());
  if (bad > 0)
    MPIGAN_THROW(NumericError, "step {}: {} of {} gradient values of the {} are not finite after '{}'", step, bad,
                 n.grads().size(), to_string(net), phase);
}

Tensor GanStep::energy_scaled(const Tensor& images, const Tensor& energy) const {
  if (!m_config.normalise_energy) return images;
  const Tensor host = to_host(images);
  const std::int64_t n = host.shape()[0];
  const std::int64_t per = host.numel() / n;
  MPIGAN_CHECK_SHAPE(energy.numel() == n, "gan step: {} energies for {} showers", energy.numel(), n);
  Tensor out = Tensor::empty(host.shape());
  for (std::int64_t i = 0; i < n; ++i) {
    const float k = std::pow(energy.data()[i], -m_model.ecal_power);
    const float* src = host.data() + i * per;
    float* dst = out.data() + i * per;
    for (std::int64_t j = 0; j < per; ++j) dst[j] = src[j] * k;
  }
  return to_device(out);
}

Tensor GanStep::d_input(const Tensor& images, const Tensor& energy) const {
  const Tensor scaled = energy_scaled(images, energy);
  if (!m_model.conditioned) return scaled;
  const Tensor host = to_host(scaled);
  const std::int64_t n = host.shape()[0];
  const std::int64_t cells = host.numel() / n;
  MPIGAN_CHECK_SHAPE(energy.numel() == n, "gan step: {} energies for {} showers", energy.numel(), n);
  Tensor out = Tensor::empty(Shape::batch_of(n, m_model.discriminator_input()));
  for (std::int64_t i = 0; i < n; ++i) {
    float* dst = out.data() + i * 2 * cells;
    std::copy_n(host.data() + i * cells, cells, dst);
    std::fill_n(dst + cells, cells, energy.data()[i]);
  }
  return to_device(out);
}

Tensor GanStep::image_grad(const Tensor& d_input_grad, const Tensor& energy) const {
  if (!m_model.conditioned) return energy_scaled(d_input_grad, energy);
  const Tensor host = to_host(d_input_grad);
  const std::int64_t n = host.shape()[0];
  const std::int64_t cells = host.numel() / (2 * n);
  Tensor out = Tensor::empty(Shape::batch_of(n, m_model.image));
  for (std::int64_t i = 0; i < n; ++i) std::copy_n(host.data() + i * 2 * cells, cells, out.data() + i * cells);
  return energy_scaled(to_device(out), energy);
}

Tensor GanStep::energy_scaled_ecal(const Tensor& ecal, const Tensor& energy) const {
  if (!m_config.normalise_energy) return ecal;
  Tensor out = Tensor::empty(ecal.shape());
  for (std::int64_t i = 0; i < ecal.numel(); ++i) out.data()[i] = ecal.data()[i] / energy.data()[i];
  return out;
}

std::vector<std::uint8_t> GanStep::draw_reflections(std::int64_t n, Rng& rng) const {
  std::vector<std::uint8_t> codes;
  if (!m_model.symmetrise) return codes;
  codes.resize(static_cast<std::size_t>(n));
  for (auto& c : codes) c = static_cast<std::uint8_t>(rng.below(8));
  return codes;
}

Tensor reflect_showers(const Tensor& images, const std::vector<std::uint8_t>& codes, bool inverse) {
  const Shape& s = images.shape();
  MPIGAN_CHECK_SHAPE(s.rank() == 5 && s[1] == 1 && s[2] == s[3] && static_cast<std::int64_t>(codes.size()) == s[0],
                     "reflections need (N,1,X,X,Z) images and N codes, found {} and {}", s, codes.size());
  const std::int64_t n = s[0], X = s[2], Y = s[3], Z = s[4], item = X * Y * Z;
  Tensor out = Tensor::empty(s);
  for (std::int64_t i = 0; i < n; ++i) {
    const unsigned c = codes[static_cast<std::size_t>(i)];
    const float* src = images.data() + i * item;
    float* dst = out.data() + i * item;
    for (std::int64_t x = 0; x < X; ++x)
      for (std::int64_t y = 0; y < Y; ++y) {
        std::int64_t u = (c & 4u) ? y : x, v = (c & 4u) ? x : y;
        if (c & 1u) u = X - 1 - u;
        if (c & 2u) v = Y - 1 - v;
        // the shower's cell (x, y) goes to (u, v); a gradient comes back from (u, v) to (x, y)
        const float* from = inverse ? src + (u * Y + v) * Z : src + (x * Y + y) * Z;
        float* to = inverse ? dst + (x * Y + y) * Z : dst + (u * Y + v) * Z;
        std::copy_n(from, Z, to);
      }
  }
  return out;
}

Tensor GanStep::reflected(const Tensor& images, const std::vector<std::uint8_t>& codes, bool inverse) const {
  if (codes.empty()) return images;
  return to_device(reflect_showers(to_host(images), codes, inverse));
}

float GanStep::fake_ecal_target(float x) const {
  return m_config.ecal_linear > 0.0f ? m_config.ecal_linear * x : ecal_fit(x, m_config.ecal_xscale, m_config.ecal_fit);
}

// Long on purpose (~90 lines): the reference Keras step in its exact order (generate, D on real,
// D on fake, G twice through frozen D), read top to bottom against the reference Keras training (svalleco/3Dgan); the
// RNG draws must stay in this order for bitwise reproducibility.
StepLosses GanStep::run(const RealBatch& batch, std::uint64_t step, const ApplyFn& apply) {
  const std::int64_t n = batch.image.shape()[0];
  MPIGAN_CHECK_SHAPE(batch.image.shape() == Shape::batch_of(n, m_model.image),
                     "gan step: real images expected (N,{}), found {}", m_model.image, batch.image.shape());
  MPIGAN_CHECK_SHAPE(batch.energy.numel() == n && batch.ecal.numel() == n,
                     "gan step: energy/ecal targets need {} values, found {} / {}", n, batch.energy.numel(),
                     batch.ecal.numel());
  MPIGAN_CHECK(!m_model.angle_model || (batch.angle.defined() && batch.angle.numel() == n),
               "gan step: the angle model needs {} angles in the batch", n);

  Rng rng(m_seed, mix64(step ^ 0x3D6A4E5Bull));
  nn::Network& G = m_model.generator;
  nn::Network& D = m_model.discriminator;
  const Shape col{n, 1};
  StepLosses L;
  L.heads = loss_names();

  // Conditions of the fake batch.
  Tensor fake_energy = Tensor::empty(col), fake_ecal = Tensor::empty(col);
  if (m_model.angle_model) {
    fake_energy = batch.energy;
    fake_ecal = batch.ecal;
  } else {
    for (std::int64_t i = 0; i < n; ++i) {
      fake_energy.data()[i] = rng.uniform(m_config.fake_energy_lo, m_config.fake_energy_hi);
      fake_ecal.data()[i] = fake_ecal_target(fake_energy.data()[i]);
    }
  }
  auto flipped = [&](float value) {
    Tensor t = Tensor::empty(col);
    for (std::int64_t i = 0; i < n; ++i) t.data()[i] = rng.uniform() < m_config.label_flip ? 1.0f - value : value;
    return t;
  };
  auto check_loss = [&](double v, Net net, const char* phase) {
    if (m_config.check_finite && !std::isfinite(v))
      MPIGAN_THROW(NumericError, "step {}: the {} loss is not finite ({}) in '{}'", step, to_string(net), v, phase);
  };

  // 1. Fake batch from G in inference mode (or on batch statistics: StepConfig::fakes_batch_stats).
  const Tensor g_in = to_device(generator_input(fake_energy, batch.angle, rng));
  nn::ForwardContext infer{m_config.fakes_batch_stats ? nn::Phase::train : nn::Phase::infer, false, m_seed, 0};
  const Tensor fake = reflected(G.forward(g_in, infer)[0], draw_reflections(n, rng), false);

  std::vector<Tensor> diffs;
  const nn::BackwardContext d_only{true, false};
  const Tensor real_image = d_input(to_device(batch.image), batch.energy);
  const Tensor real_ecal = energy_scaled_ecal(batch.ecal, batch.energy);
  fake_ecal = energy_scaled_ecal(fake_ecal, fake_energy);
  MmdReference mmd;
  if (m_config.feature_terms()) mmd = mmd_reference(real_image);
  // 2. D on real.
  {
    nn::ForwardContext ctx{nn::Phase::train, true, m_seed, step * 8 + 0};
    const auto& out = D.forward(real_image, ctx);
    L.d_real =
        head_losses(out, head_targets(flipped(1.0f), batch.energy, real_ecal, batch.angle), L.d_real_heads, diffs);
    check_loss(L.d_real, Net::discriminator, "D on real");
    D.zero_grads();
    D.backward(diffs, d_only);
    check_grads(Net::discriminator, step, "D on real");
    apply(Net::discriminator);
  }
  // 3. D on fake (the generator's output buffer stays valid: G runs again only in step 4).
  {
    nn::ForwardContext ctx{nn::Phase::train, true, m_seed, step * 8 + 1};
    const auto& out = D.forward(d_input(fake, fake_energy), ctx);
    L.d_fake =
        head_losses(out, head_targets(flipped(0.0f), fake_energy, fake_ecal, batch.angle), L.d_fake_heads, diffs);
    check_loss(L.d_fake, Net::discriminator, "D on fake");
    D.zero_grads();
    D.backward(diffs, d_only);
    check_grads(Net::discriminator, step, "D on fake");
    apply(Net::discriminator);
  }
  // 4. G through the combined model, D frozen.
  Tensor ones = Tensor::full(col, 1.0f);
  const auto g_targets = head_targets(ones, fake_energy, fake_ecal, batch.angle);
  L.g_heads.assign(L.heads.size(), 0.0);
  for (int pass = 0; pass < m_config.generator_passes; ++pass) {
    const Tensor z = to_device(generator_input(fake_energy, batch.angle, rng));
    nn::ForwardContext g_ctx{nn::Phase::train, true, m_seed, step * 8 + 2 + static_cast<std::uint64_t>(pass) * 2};
    const auto codes = draw_reflections(n, rng);
    const Tensor image = d_input(reflected(G.forward(z, g_ctx)[0], codes, false), fake_energy);
    nn::ForwardContext d_ctx{nn::Phase::train, false, m_seed, step * 8 + 3 + static_cast<std::uint64_t>(pass) * 2};
    const auto& out = D.forward(image, d_ctx);
    std::vector<double> heads;
    double total = head_losses(out, g_targets, heads, diffs);
    Tensor d_in = D.backward(diffs, {false, true});
    if (m_config.feature_terms()) {
      const std::vector<double> v = mmd_losses(image, mmd, &d_in);
      const std::vector<float> w = mmd.weights();
      for (std::size_t t = 0; t < v.size(); ++t) {
        heads.push_back(v[t]);
        total += w[t] * v[t];
      }
    }
    check_loss(total, Net::generator, "G through frozen D");
    L.g += total / m_config.generator_passes;
    for (std::size_t h = 0; h < heads.size(); ++h) L.g_heads[h] += heads[h] / m_config.generator_passes;
    const Tensor d_image = reflected(image_grad(d_in, fake_energy), codes, true);
    G.zero_grads();
    G.backward({d_image}, {true, false});
    check_grads(Net::generator, step, "G through frozen D");
    apply(Net::generator);
  }
  L.d_real_heads.resize(L.heads.size(), 0.0);  // the feature terms are the generator's only
  L.d_fake_heads.resize(L.heads.size(), 0.0);
  return L;
}

StepLosses GanStep::evaluate(const RealBatch& batch, std::uint64_t seed) {
  const std::int64_t n = batch.image.shape()[0];
  MPIGAN_CHECK_SHAPE(batch.image.shape() == Shape::batch_of(n, m_model.image),
                     "gan evaluate: real images expected (N,{}), found {}", m_model.image, batch.image.shape());
  Rng rng(seed, hash_string("evaluate"));
  const Shape col{n, 1};
  StepLosses L;
  Tensor fake_energy = batch.energy, fake_ecal = batch.ecal;
  if (!m_model.angle_model) {
    fake_energy = Tensor::empty(col);
    fake_ecal = Tensor::empty(col);
    for (std::int64_t i = 0; i < n; ++i) {
      fake_energy.data()[i] = rng.uniform(m_config.fake_energy_lo, m_config.fake_energy_hi);
      fake_ecal.data()[i] = fake_ecal_target(fake_energy.data()[i]);
    }
  }
  const nn::ForwardContext infer{nn::Phase::infer, false, seed, 0};
  std::vector<Tensor> diffs;
  const Tensor ones = Tensor::full(col, 1.0f), zeros = Tensor::zeros(col);
  const Tensor real_input = d_input(to_device(batch.image), batch.energy);
  L.d_real = head_losses(m_model.discriminator.forward(real_input, infer),
                         head_targets(ones, batch.energy, energy_scaled_ecal(batch.ecal, batch.energy), batch.angle),
                         L.d_real_heads, diffs);
  const Tensor fake =
      reflected(m_model.generator.forward(to_device(generator_input(fake_energy, batch.angle, rng)), infer)[0],
                draw_reflections(n, rng), false);
  const Tensor fake_input = d_input(fake, fake_energy);
  const auto& out = m_model.discriminator.forward(fake_input, infer);
  fake_ecal = energy_scaled_ecal(fake_ecal, fake_energy);
  L.d_fake = head_losses(out, head_targets(zeros, fake_energy, fake_ecal, batch.angle), L.d_fake_heads, diffs);
  L.g = head_losses(out, head_targets(ones, fake_energy, fake_ecal, batch.angle), L.g_heads, diffs);
  L.heads = loss_names();
  if (m_config.feature_terms()) {
    const MmdReference real = mmd_reference(real_input);
    const std::vector<double> v = mmd_losses(fake_input, real, nullptr);
    const std::vector<float> w = real.weights();
    for (std::size_t t = 0; t < v.size(); ++t) {
      L.g_heads.push_back(v[t]);
      L.g += w[t] * v[t];
    }
  }
  L.d_real_heads.resize(L.heads.size(), 0.0);  // the feature terms are the generator's only
  L.d_fake_heads.resize(L.heads.size(), 0.0);
  return L;
}

Tensor GanStep::generate(const Tensor& energy, const Tensor& angle, std::uint64_t seed, bool batch_statistics) {
  Rng rng(seed, hash_string("generate"));
  const Tensor z = to_device(generator_input(energy, angle, rng));
  nn::ForwardContext infer{batch_statistics ? nn::Phase::train : nn::Phase::infer, false, seed, 0};
  const Tensor out = m_model.generator.forward(z, infer)[0];
  return m_backend.to_host(reflected(out, draw_reflections(energy.shape()[0], rng), false));
}

Tensor GanStep::generate_from(const Tensor& energy, const Tensor& angle, const Tensor& noise) {
  const Tensor z = to_device(generator_input(energy, angle, noise));
  nn::ForwardContext infer{nn::Phase::infer, false, 0, 0};
  const Tensor out = m_model.generator.forward(z, infer)[0];
  return m_backend.to_host(out);
}

void GanStep::recalibrate_generator_state(const Tensor& energy, const Tensor& angle, int batches, std::uint64_t seed) {
  Rng rng(seed, hash_string("recalibrate"));
  m_model.generator.recalibrate_state(
      batches, [&](int) { return to_device(generator_input(energy, angle, rng)); }, seed);
}

std::vector<Tensor> GanStep::discriminate(const Tensor& images, nn::Phase phase) {
  MPIGAN_CHECK(!m_model.conditioned, "gan step: model '{}' has a conditioned discriminator: pass the energies",
               m_model.name);
  return discriminate_input(to_device(images), phase);
}

std::vector<Tensor> GanStep::discriminate(const Tensor& images, const Tensor& energy, nn::Phase phase) {
  return discriminate_input(d_input(to_device(images), energy), phase);
}

std::vector<Tensor> GanStep::discriminate_input(const Tensor& input, nn::Phase phase) {
  const nn::ForwardContext ctx{phase, false, m_seed, 0};
  const auto& out = m_model.discriminator.forward(input, ctx);
  std::vector<Tensor> host;
  for (const auto& t : out) host.push_back(m_backend.to_host(t));
  return host;
}

}  // namespace mpigan::models
