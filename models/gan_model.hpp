// The 3DGAN networks (svalleco/3Dgan: EcalEnergyGan, AngleGAN) and a small sandbox GAN, built from nn layers.
//
//   "3dgan-25"     fixed-angle EcalEnergyGan, 25x25x25 showers: G 872,808 / D 73,402 parameters
//   "anglegan-51"  variable-angle AngleGAN, 51x51x25 showers: G ~1.37 M / D ~87 k, with the
//                  measured-angle and ECAL-sum heads on image^(1/0.85)
//   "3dgan-5"      the fixed-angle 3DGAN's design sized for the 5x5x5 read-out of the same ECAL (the
//                  converging rung), cells preprocessed to the power 0.5 (the angle model's power
//                  transform, stronger: the coarse cells span six decades), the ECAL-sum head on
//                  image^(1/power)
//   "tiny-8"       an 8x8x8 sandbox with the same structure and heads as 3dgan-25, for tests
//
// Images are (N, 1, X, Y, Z) = NCDHW with D = x, H = y, W = depth; Keras channels_last shapes
// (x, y, z, c) map to (c, x, y, z). Discriminator outputs, by name: "fake" (sigmoid real/fake
// probability), "energy" (E/100 regression), "ecal" (ECAL sum), and "angle" (angle model).
#pragma once

#include "mpigan/core/backend.hpp"
#include "mpigan/nn/network.hpp"

#include <array>
#include <memory>
#include <string>
#include <vector>

namespace mpigan::models {

/// Loss weights of the discriminator heads (0 disables a head's loss).
struct LossWeights {
  float bce = 2.0f, energy = 0.1f, ecal = 0.1f, angle = 0.0f;
  /// The high-level-feature head's real/fake loss (ModelOptions::hlf_head); negative = bce's weight.
  float hlf = -1.0f;
};

struct ModelOptions {
  std::string name = "3dgan-25";
  std::int64_t latent = 0;   ///< 0 = the architecture's (200, 256, 16)
  float dropout = 0.2f;      ///< discriminator dropout rate
  float leaky_alpha = 0.3f;  ///< Keras LeakyReLU default
  float bn_momentum = 0.99f;
  /// The cell power of the data's preprocessing (X <- X^power); 0 = the model's default. The ECAL-sum
  /// head sums image^(1/power), the deposited energy the ECAL target counts (3dgan-5 and 3dgan-25;
  /// the angle model's 0.85 is part of its architecture).
  float power = 0.0f;
  /// Condition the discriminator on the primary energy (fixed-angle models): its input gets a second
  /// channel holding E/100 in every cell, so that its real/fake head judges a shower against its
  /// energy (the response and its spread at each E), not against the mixture of all energies.
  bool condition = false;
  /// The noise of the fixed-angle models' input (E/100) * z: "normal" (the reference, z ~ N(0, 1)^n)
  /// or "sphere" (z drawn the same, then scaled to norm sqrt(n)). A generator that is nearly
  /// homogeneous in its input turns |z|'s relative spread, 1/sqrt(2n), into a spread of the
  /// shower's energy that Monte Carlo does not have; on the sphere only z's direction varies.
  std::string noise = "normal";
  /// How the fixed-angle models' generator input joins the energy and the noise: "product" (the
  /// 3DGAN's (E/100) z) or "concat" ([E/100, z] with z of size latent - 1). In the product the
  /// noise's effect on the shower scales with E, and at low E the layers' biases dominate it; the
  /// concatenation leaves the generator free to learn how the fluctuations change with E.
  std::string input = "product";
  /// A second real/fake head of the (conditioned) discriminator that reads the shower's high-level
  /// features (nn::shower_features: the response, the energy of each layer, its barycentre and
  /// width) through a small MLP: the quantities the validation's classifier separates on, which the
  /// convolutions see only through the fine structure of the cells. Off in the reference design.
  bool hlf_head = false;
  /// The hlf head's learning rate as a multiple of the discriminator's: its Dense layers compute
  /// with their stored weights times this gain (nn::Dense), which under Adam and RMSprop is a
  /// learning-rate multiplier. The head is a classifier of a few thousand weights chasing a moving
  /// generator; at the discriminator's rate it stays near chance while the validation's classifier
  /// (the same MLP at 5x the rate, trained to convergence) separates the showers.
  float hlf_lr_scale = 1.0f;
  /// The symmetries of the detector and of a beam entering at the centre at normal incidence:
  /// each generated shower is reflected in x, in y and has x and y exchanged, each at random with
  /// probability 1/2, in training (the gradient goes back through the same reflection) and at
  /// generation. The generator's output distribution is then invariant under them exactly.
  /// Fixed-angle models with square layers.
  bool symmetrise = false;
  /// The generator's channel multiplier (3dgan-5): every hidden convolution of the generator, and
  /// its Dense layer's output, has this many times the design's channels (32, 64, 32, 16). The
  /// discriminator is unchanged.
  int generator_width = 1;
  /// Loss weights; unset (negative bce) = the reference weights of the model.
  LossWeights loss_weights{-1.0f, 0.0f, 0.0f, 0.0f, -1.0f};
};

struct GanModel {
  std::string name;
  bool angle_model = false;
  bool noise_on_sphere = false;  ///< ModelOptions::noise == "sphere"
  bool energy_concat = false;    ///< ModelOptions::input == "concat": input [E/100, z]
  bool symmetrise = false;       ///< ModelOptions::symmetrise
  std::int64_t latent = 0;       ///< generator input size
  std::int64_t noise = 0;        ///< random part of the generator input (latent minus conditions)
  Shape image;                   ///< item shape (1, X, Y, Z)
  bool conditioned = false;      ///< ModelOptions::condition: D's input is (2, X, Y, Z), channel 1 = E/100
  LossWeights loss_weights;
  float ecal_power = 1.0f;  ///< the data's cell power (0.85 for the angle model)
  nn::Network generator{"generator"};
  nn::Network discriminator{"discriminator"};

  /// D's item shape: the image's, or (2, X, Y, Z) when conditioned.
  Shape discriminator_input() const { return conditioned ? Shape{2, image[1], image[2], image[3]} : image; }
};

/// Names accepted by make_gan.
std::vector<std::string> model_names();
/// Build (allocate on @p backend) and initialise a model with weights drawn from @p seed.
std::unique_ptr<GanModel> make_gan(const ModelOptions& options, Backend& backend, std::uint64_t seed);
/// The reference loss weights of a model: 3dgan-25 [2, 0.1, 0.1]; anglegan-51 [3, 0.1, 0.1, angle 25];
/// the optional feature head (hlf) weighted as the real/fake head.
LossWeights reference_loss_weights(const std::string& name);

/// GetEcalFit of the reference code: the ECAL-sum target of a fake shower of energy x = E/100,
/// ratio(x) = 0.0018x^4 - 0.023x^3 + 0.11x^2 - 0.28x + 2.21; target = ratio(x) * x * xscale.
float ecal_fit(float x, float xscale);
/// GetEcalFit's coefficients, highest power first: 0.0018x^4 - 0.023x^3 + 0.11x^2 - 0.28x + 2.21.
inline constexpr std::array<float, 5> kReferenceEcalFit{0.0018f, -0.023f, 0.11f, -0.28f, 2.21f};
/// The same with the ratio's polynomial coefficients @p c (highest power first).
float ecal_fit(float x, float xscale, const std::array<float, 5>& c);

}  // namespace mpigan::models
