// The 3DGAN networks and the tiny-8 sandbox built layer by layer (gan_model.hpp), with the
// reference loss weights and the ECAL-sum fit of each model.
#include "mpigan/models/gan_model.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/nn/activation.hpp"
#include "mpigan/nn/batch_norm.hpp"
#include "mpigan/nn/calo_heads.hpp"
#include "mpigan/nn/conv3d.hpp"
#include "mpigan/nn/dense.hpp"
#include "mpigan/nn/resample.hpp"

namespace mpigan::models {

using nn::Activation;
using nn::BatchNorm3d;
using nn::Conv3d;
using nn::Init;
using Layers = std::vector<std::unique_ptr<nn::Layer>>;

namespace {

template <class L, class... A>
void push(Layers& v, A&&... a) {
  v.push_back(std::make_unique<L>(std::forward<A>(a)...));
}

void conv(Layers& v, const std::string& name, const Conv3dDesc& d, Init init) {
  push<Conv3d>(v, name, d, init);
}

/// A discriminator's first block: the convolution @p c, LeakyReLU and dropout (d_conv1, d_lrelu1,
/// d_drop1).
void discriminator_first_block(Layers& d, const Conv3dDesc& c, const ModelOptions& o) {
  conv(d, "d_conv1", c, Init::glorot_uniform);
  push<Activation>(d, "d_lrelu1", Activation::leaky_relu(o.leaky_alpha));
  push<nn::Dropout>(d, "d_drop1", o.dropout);
}

/// A discriminator's block @p k (2, 3, ...): the convolution @p c, LeakyReLU, BatchNorm over its
/// output channels (epsilon @p eps) and dropout (d_convK, d_lreluK, d_bnK, d_dropK).
void discriminator_block(Layers& d, int k, const Conv3dDesc& c, const ModelOptions& o, float eps) {
  const std::string n = std::to_string(k);
  conv(d, "d_conv" + n, c, Init::glorot_uniform);
  push<Activation>(d, "d_lrelu" + n, Activation::leaky_relu(o.leaky_alpha));
  push<BatchNorm3d>(d, "d_bn" + n, c.oc, o.bn_momentum, eps);
  push<nn::Dropout>(d, "d_drop" + n, o.dropout);
}

/// The heads shared by every discriminator: real/fake and energy on the flattened features.
void add_feature_heads(nn::Network& d, std::int64_t features) {
  Layers fake;
  push<nn::Dense>(fake, "fake_dense", features, 1);
  push<Activation>(fake, "fake_sigmoid", Activation::sigmoid());
  d.add_node("fake", "features", std::move(fake), true);
  Layers energy;
  push<nn::Dense>(energy, "energy_dense", features, 1);
  d.add_node("energy", "features", std::move(energy), true);
}

/// The ECAL-sum head: the sum of the cells in the data's units, i.e. of input^(1/power) when the
/// cells are preprocessed to a power.
void add_ecal_head(GanModel& m) {
  std::string cells = "input";
  if (m.conditioned) {  // the shower is channel 0; channel 1 holds E/100
    Layers shower;
    push<nn::Channel>(shower, "shower", std::int64_t{0});
    m.discriminator.add_node("shower", "input", std::move(shower));
    cells = "shower";
  }
  if (m.ecal_power != 1.0f) {
    Layers inv;
    push<nn::Pow>(inv, "inv_pow", 1.0f / m.ecal_power);
    m.discriminator.add_node("inv", cells, std::move(inv));
    cells = "inv";
  }
  Layers ecal;
  push<nn::SumCells>(ecal, "ecal_sum");
  m.discriminator.add_node("ecal", cells, std::move(ecal), true);
}

/// The high-level-feature real/fake head (ModelOptions::hlf_head): ShowerFeatures on D's input,
/// then Dense 64, LeakyReLU 0.2, Dense 64, LeakyReLU 0.2, Dense 1, sigmoid; the Dense layers' gain
/// is the head's learning-rate multiplier (ModelOptions::hlf_lr_scale).
void add_hlf_head(GanModel& m, float lr_scale) {
  const std::int64_t features = nn::shower_feature_count(m.image[3]);
  Layers h;
  push<nn::ShowerFeatures>(h, "hlf_features", m.ecal_power);
  push<nn::Dense>(h, "hlf_dense1", features, 64, Init::glorot_uniform, true, lr_scale);
  push<Activation>(h, "hlf_lrelu1", Activation::leaky_relu(0.2f));
  push<nn::Dense>(h, "hlf_dense2", 64, 64, Init::glorot_uniform, true, lr_scale);
  push<Activation>(h, "hlf_lrelu2", Activation::leaky_relu(0.2f));
  push<nn::Dense>(h, "hlf_dense3", 64, 1, Init::glorot_uniform, true, lr_scale);
  push<Activation>(h, "hlf_sigmoid", Activation::sigmoid());
  m.discriminator.add_node("hlf", "input", std::move(h), true);
}

void build_3dgan_25(GanModel& m, const ModelOptions& o) {
  const float a = o.leaky_alpha;
  const float eps = 1e-3f;
  m.latent = o.latent > 0 ? o.latent : 200;
  m.noise = m.latent;  // input = (E/100) * z
  m.image = {1, 25, 25, 25};
  m.ecal_power = o.power > 0.0f ? o.power : 1.0f;
  {
    Layers g;
    push<nn::Dense>(g, "g_dense", m.latent, 64 * 7 * 7, Init::glorot_uniform);
    push<nn::Reshape>(g, "g_reshape", std::vector<std::int64_t>{8, 7, 7, 8});
    conv(g, "g_conv1", Conv3d::same(8, 64, {6, 6, 8}), Init::he_uniform);
    push<Activation>(g, "g_lrelu1", Activation::leaky_relu(a));
    push<BatchNorm3d>(g, "g_bn1", 64, o.bn_momentum, eps);
    push<nn::UpSampling3d>(g, "g_up1", Dims3{2, 2, 2});
    Conv3dDesc c2 = Conv3d::valid(64, 6, {6, 5, 8});
    c2.pad_l = c2.pad_r = {2, 2, 0};  // ZeroPadding3D((2, 2, 0))
    conv(g, "g_conv2", c2, Init::he_uniform);
    push<Activation>(g, "g_lrelu2", Activation::leaky_relu(a));
    push<BatchNorm3d>(g, "g_bn2", 6, o.bn_momentum, eps);
    push<nn::UpSampling3d>(g, "g_up2", Dims3{2, 2, 3});
    Conv3dDesc c3 = Conv3d::valid(6, 6, {3, 3, 8});
    c3.pad_l = c3.pad_r = {1, 0, 3};  // ZeroPadding3D((1, 0, 3))
    conv(g, "g_conv3", c3, Init::he_uniform);
    push<Activation>(g, "g_lrelu3", Activation::leaky_relu(a));
    conv(g, "g_conv4", Conv3d::valid(6, 1, {2, 2, 2}, false), Init::glorot_normal);
    push<Activation>(g, "g_relu", Activation::relu());
    m.generator.add_node("image", "input", std::move(g), true);
  }
  {
    Layers d;
    discriminator_first_block(d, Conv3d::same(o.condition ? 2 : 1, 32, {5, 5, 5}), o);
    const Dims3 pads[3] = {{2, 2, 2}, {2, 2, 2}, {1, 1, 1}};
    for (int i = 0; i < 3; ++i)
      discriminator_block(d, i + 2, Conv3d::zero_padded(i == 0 ? 32 : 8, 8, {5, 5, 5}, pads[i]), o, eps);
    push<nn::AvgPool3d>(d, "d_pool", Dims3{2, 2, 2});
    push<nn::Reshape>(d, "d_flatten", std::vector<std::int64_t>{8 * 11 * 11 * 11});
    m.discriminator.add_node("features", "input", std::move(d));
    add_feature_heads(m.discriminator, 8 * 11 * 11 * 11);
    add_ecal_head(m);
  }
}

void build_anglegan_51(GanModel& m, const ModelOptions& o) {
  const float eps = 1e-6f;
  m.latent = o.latent > 0 ? o.latent : 256;
  m.noise = m.latent - 2;  // input = concat(E/100, theta, noise)
  m.image = {1, 51, 51, 25};
  m.ecal_power = 0.85f;
  {
    Layers g;
    push<nn::Dense>(g, "g_dense", m.latent, 8 * 9 * 9 * 8, Init::glorot_uniform);
    push<nn::Reshape>(g, "g_reshape", std::vector<std::int64_t>{8, 9, 9, 8});
    push<nn::UpSampling3d>(g, "g_up", Dims3{6, 6, 6});
    conv(g, "g_conv1", Conv3d::valid(8, 8, {6, 6, 8}), Init::he_uniform);
    push<Activation>(g, "g_relu1", Activation::relu());
    push<BatchNorm3d>(g, "g_bn1", 8, o.bn_momentum, eps);
    for (int i = 0; i < 3; ++i) {
      const std::string k = std::to_string(i + 2);
      Conv3dDesc c = Conv3d::valid(i == 0 ? 8 : 6, 6, {4, 4, 6});
      c.pad_l = c.pad_r = {2, 2, 1};  // ZeroPadding3D((2, 2, 1))
      conv(g, "g_conv" + k, c, Init::he_uniform);
      push<Activation>(g, "g_relu" + k, Activation::relu());
      push<BatchNorm3d>(g, "g_bn" + k, 6, o.bn_momentum, eps);
    }
    Conv3dDesc c5 = Conv3d::valid(6, 6, {3, 3, 5});
    c5.pad_l = c5.pad_r = {1, 1, 0};
    conv(g, "g_conv5", c5, Init::he_uniform);
    push<Activation>(g, "g_relu5", Activation::relu());
    push<BatchNorm3d>(g, "g_bn5", 6, o.bn_momentum, eps);
    Conv3dDesc c6 = Conv3d::valid(6, 6, {3, 3, 3});
    c6.pad_l = c6.pad_r = {1, 1, 0};
    conv(g, "g_conv6", c6, Init::he_uniform);
    push<Activation>(g, "g_relu6", Activation::relu());
    conv(g, "g_conv7", Conv3d::valid(6, 1, {2, 2, 2}, false), Init::glorot_normal);
    push<Activation>(g, "g_relu", Activation::relu());
    m.generator.add_node("image", "input", std::move(g), true);
  }
  {
    Layers d;
    discriminator_first_block(d, Conv3d::same(1, 16, {5, 6, 6}), o);
    const Dims3 pads[3] = {{0, 0, 1}, {0, 0, 1}, {0, 0, 0}};
    for (int i = 0; i < 3; ++i)
      discriminator_block(d, i + 2, Conv3d::zero_padded(i == 0 ? 16 : 8, 8, {5, 6, 6}, pads[i]), o, eps);
    push<nn::AvgPool3d>(d, "d_pool", Dims3{2, 2, 2});
    push<nn::Reshape>(d, "d_flatten", std::vector<std::int64_t>{8 * 19 * 18 * 7});
    m.discriminator.add_node("features", "input", std::move(d));
    add_feature_heads(m.discriminator, 8 * 19 * 18 * 7);
    Layers inv;
    push<nn::Pow>(inv, "inv_pow", 1.0f / 0.85f);
    m.discriminator.add_node("inv", "input", std::move(inv));
    Layers ang;
    push<nn::EcalAngle>(ang, "ecal_angle");
    m.discriminator.add_node("angle", "inv", std::move(ang), true);
    Layers ecal;
    push<nn::SumCells>(ecal, "ecal_sum");
    m.discriminator.add_node("ecal", "inv", std::move(ecal), true);
  }
}

constexpr float kPower3dgan5 = 0.5f;

void build_3dgan_5(GanModel& m, const ModelOptions& o) {
  // The 3DGAN's design sized for the 5x5x5 read-out: G input (E/100) * z, Dense -> Reshape ->
  // Conv3D/LeakyReLU/BatchNorm -> UpSampling3D -> Conv3D/LeakyReLU/BatchNorm -> Conv3D/LeakyReLU ->
  // Conv3D (no bias, Glorot normal) -> ReLU; D Conv3D/LeakyReLU/Dropout then Conv3D/LeakyReLU/
  // BatchNorm/Dropout twice, flattened into the real/fake and energy heads, and the ECAL sum.
  const float a = o.leaky_alpha;
  const float eps = 1e-3f;
  m.latent = o.latent > 0 ? o.latent : 64;
  m.noise = m.latent;  // input = (E/100) * z
  m.image = {1, 5, 5, 5};
  m.ecal_power = o.power > 0.0f ? o.power : kPower3dgan5;
  {
    const std::int64_t w = o.generator_width, c16 = 16 * w, c32 = 32 * w, c64 = 64 * w;
    Layers g;
    push<nn::Dense>(g, "g_dense", m.latent, c32 * 3 * 3 * 3, Init::glorot_uniform);
    push<nn::Reshape>(g, "g_reshape", std::vector<std::int64_t>{c32, 3, 3, 3});
    conv(g, "g_conv1", Conv3d::same(c32, c64, {3, 3, 3}), Init::he_uniform);
    push<Activation>(g, "g_lrelu1", Activation::leaky_relu(a));
    push<BatchNorm3d>(g, "g_bn1", c64, o.bn_momentum, eps);
    push<nn::UpSampling3d>(g, "g_up1", Dims3{2, 2, 2});
    conv(g, "g_conv2", Conv3d::valid(c64, c32, {2, 2, 2}), Init::he_uniform);  // 6^3 -> 5^3
    push<Activation>(g, "g_lrelu2", Activation::leaky_relu(a));
    push<BatchNorm3d>(g, "g_bn2", c32, o.bn_momentum, eps);
    conv(g, "g_conv3", Conv3d::same(c32, c16, {3, 3, 3}), Init::he_uniform);
    push<Activation>(g, "g_lrelu3", Activation::leaky_relu(a));
    conv(g, "g_conv4", Conv3d::same(c16, 1, {3, 3, 3}, false), Init::glorot_normal);
    push<Activation>(g, "g_relu", Activation::relu());
    m.generator.add_node("image", "input", std::move(g), true);
  }
  {
    Layers d;
    discriminator_first_block(d, Conv3d::same(o.condition ? 2 : 1, 32, {3, 3, 3}), o);
    for (int i = 0; i < 2; ++i) discriminator_block(d, i + 2, Conv3d::same(i == 0 ? 32 : 16, 16, {3, 3, 3}), o, eps);
    push<nn::Reshape>(d, "d_flatten", std::vector<std::int64_t>{16 * 5 * 5 * 5});
    m.discriminator.add_node("features", "input", std::move(d));
    add_feature_heads(m.discriminator, 16 * 5 * 5 * 5);
    add_ecal_head(m);
  }
}

void build_tiny_8(GanModel& m, const ModelOptions& o) {
  const float a = o.leaky_alpha;
  m.latent = o.latent > 0 ? o.latent : 16;
  m.noise = m.latent;
  m.image = {1, 8, 8, 8};
  {
    Layers g;
    push<nn::Dense>(g, "g_dense", m.latent, 8 * 4 * 4 * 4, Init::glorot_uniform);
    push<nn::Reshape>(g, "g_reshape", std::vector<std::int64_t>{8, 4, 4, 4});
    conv(g, "g_conv1", Conv3d::same(8, 8, {3, 3, 3}), Init::he_uniform);
    push<Activation>(g, "g_lrelu1", Activation::leaky_relu(a));
    push<BatchNorm3d>(g, "g_bn1", 8, o.bn_momentum, 1e-3f);
    push<nn::UpSampling3d>(g, "g_up1", Dims3{2, 2, 2});
    conv(g, "g_conv2", Conv3d::same(8, 4, {3, 3, 3}), Init::he_uniform);
    push<Activation>(g, "g_lrelu2", Activation::leaky_relu(a));
    conv(g, "g_conv3", Conv3d::same(4, 1, {2, 2, 2}, false), Init::glorot_normal);
    push<Activation>(g, "g_relu", Activation::relu());
    m.generator.add_node("image", "input", std::move(g), true);
  }
  {
    Layers d;
    discriminator_first_block(d, Conv3d::same(1, 8, {3, 3, 3}), o);
    discriminator_block(d, 2, Conv3d::zero_padded(8, 8, {3, 3, 3}, {1, 1, 1}), o, 1e-3f);
    push<nn::AvgPool3d>(d, "d_pool", Dims3{2, 2, 2});
    push<nn::Reshape>(d, "d_flatten", std::vector<std::int64_t>{8 * 4 * 4 * 4});
    m.discriminator.add_node("features", "input", std::move(d));
    add_feature_heads(m.discriminator, 8 * 4 * 4 * 4);
    Layers ecal;
    push<nn::SumCells>(ecal, "ecal_sum");
    m.discriminator.add_node("ecal", "input", std::move(ecal), true);
  }
}

}  // namespace

std::vector<std::string> model_names() {
  return {"3dgan-25", "anglegan-51", "3dgan-5", "tiny-8"};
}

LossWeights reference_loss_weights(const std::string& name) {
  if (name == "anglegan-51") return {3.0f, 0.1f, 0.1f, 25.0f, 3.0f};
  return {2.0f, 0.1f, 0.1f, 0.0f, 2.0f};
}

float ecal_fit(float x, float xscale, const std::array<float, 5>& c) {
  const float ratio = (((c[0] * x + c[1]) * x + c[2]) * x + c[3]) * x + c[4];
  return ratio * x * xscale;
}

float ecal_fit(float x, float xscale) {
  return ecal_fit(x, xscale, kReferenceEcalFit);
}

std::unique_ptr<GanModel> make_gan(const ModelOptions& o, Backend& backend, std::uint64_t seed) {
  auto m = std::make_unique<GanModel>();
  m->name = o.name;
  MPIGAN_CHECK(o.dropout >= 0.0f && o.dropout < 1.0f, "model '{}': dropout must be in [0, 1), got {}", o.name,
               o.dropout);
  MPIGAN_CHECK(!o.condition || o.name == "3dgan-5" || o.name == "3dgan-25",
               "model '{}': condition (E as the discriminator's second channel) is for 3dgan-5 and 3dgan-25", o.name);
  m->conditioned = o.condition;
  MPIGAN_CHECK(o.generator_width >= 1 && (o.generator_width == 1 || o.name == "3dgan-5"),
               "model '{}': generator_width {} must be >= 1, and other than 1 only for 3dgan-5", o.name,
               o.generator_width);
  if (o.name == "3dgan-25") {
    build_3dgan_25(*m, o);
  } else if (o.name == "anglegan-51") {
    m->angle_model = true;
    build_anglegan_51(*m, o);
  } else if (o.name == "3dgan-5") {
    build_3dgan_5(*m, o);
  } else if (o.name == "tiny-8") {
    build_tiny_8(*m, o);
  } else {
    MPIGAN_FATAL("unknown model '{}': expected one of 3dgan-25, anglegan-51, 3dgan-5, tiny-8", o.name);
  }
  MPIGAN_CHECK(o.noise == "normal" || o.noise == "sphere", "model '{}': noise must be normal or sphere, got '{}'",
               o.name, o.noise);
  m->noise_on_sphere = o.noise == "sphere";
  MPIGAN_CHECK(o.input == "product" || o.input == "concat", "model '{}': input must be product or concat, got '{}'",
               o.name, o.input);
  MPIGAN_CHECK(o.input == "product" || o.name == "3dgan-5" || o.name == "3dgan-25",
               "model '{}': input concat ([E/100, z]) is for 3dgan-5 and 3dgan-25", o.name);
  if (o.input == "concat") {
    m->energy_concat = true;
    m->noise = m->latent - 1;
  }
  MPIGAN_CHECK(!o.hlf_head || o.condition,
               "model '{}': hlf_head (a real/fake head on the shower's features) needs condition: true, so that it "
               "judges a shower against its energy",
               o.name);
  if (o.hlf_head) add_hlf_head(*m, o.hlf_lr_scale);
  MPIGAN_CHECK(!o.symmetrise || (!m->angle_model && m->image[1] == m->image[2]),
               "model '{}': symmetrise (random reflections and x-y exchange of the showers) is for the fixed-angle "
               "models with square layers",
               o.name);
  m->symmetrise = o.symmetrise;
  MPIGAN_CHECK(m->noise > 0, "model '{}': latent size {} leaves no room for noise", o.name, m->latent);
  m->loss_weights = o.loss_weights.bce >= 0.0f ? o.loss_weights : reference_loss_weights(o.name);
  if (m->loss_weights.hlf < 0.0f) m->loss_weights.hlf = m->loss_weights.bce;
  m->generator.build(backend, {m->latent});
  m->discriminator.build(backend, m->discriminator_input());
  // The step runs one network's backward at a time: one pair of gradient workspaces serves both.
  m->generator.share_gradient_workspaces(m->discriminator);
  Rng rng(seed, hash_string("model-init"));
  m->generator.initialize(rng);
  m->discriminator.initialize(rng);
  return m;
}

}  // namespace mpigan::models
