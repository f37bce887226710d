// The 3DGAN training step (the reference Keras training, svalleco/3Dgan keras/EcalEnergyTrain.py), identical in every
// reference version:
//   1. noise + conditions -> G in INFERENCE mode (BatchNorm running statistics) -> fake batch;
//   2. D on the real batch, labels 1 with 5% bit flips, targets E/100, ECAL sum (and angle);
//   3. D on the fake batch, labels 0 with flips; targets: sampled E and the ECAL fit (fixed
//      angle) or the real batch's conditions (angle model);
//   4. twice: G through the combined model with D frozen (D normalises with batch statistics but
//      neither its weights nor its running statistics change), fresh noise, same conditions,
//      labels 1.
// After each of the four gradient computations the caller's apply(net) runs: a local optimizer
// step for single-process training, or the worker side of an update rule when distributed. The
// step's randomness (noise, sampled energies, flips, dropout masks) is a function of (seed, step),
// so a resumed run repeats it exactly. Non-finite losses or gradients throw NumericError naming
// the step, the network and the phase.
#pragma once

#include <array>

#include "mpigan/models/gan_model.hpp"
#include "mpigan/nn/loss.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mpigan::models {

/// A batch of real showers, canonical host tensors (the trainer fills it from data::Batch).
struct RealBatch {
  Tensor image;   ///< (N, 1, X, Y, Z) preprocessed
  Tensor energy;  ///< (N, 1) E/100
  Tensor ecal;    ///< (N, 1) ECAL-sum target
  Tensor angle;   ///< (N, 1) radians (angle model only)
};

struct StepConfig {
  float label_flip = 0.05f;
  float fake_energy_lo = 0.1f, fake_energy_hi = 5.0f;  ///< E/100 of the fixed-angle model's fake showers
  float ecal_xscale = 1.0f;                            ///< the data's xscale, for the ECAL fit of fakes
  float ecal_linear = 0.0f;  ///< > 0: fake ECAL target = ecal_linear * E/100 (toy data), instead of the fit
  /// The fit's ratio(x) = c[0] x^4 + c[1] x^3 + c[2] x^2 + c[3] x + c[4], x = E/100: sum(ECAL)/E in
  /// percent. Default: the reference's GetEcalFit, fitted to its Geant4 data.
  std::array<float, 5> ecal_fit = kReferenceEcalFit;
  int generator_passes = 2;
  bool check_finite = true;
  /// The discriminator sees each shower divided by its primary energy (E/100; cells in the data's
  /// power space scaled by (E/100)^-power), and its ECAL-sum targets are divided alike. Without
  /// it the discriminator cannot tell a shower of E from one of E' at the wrong sampling fraction
  /// (it never sees the condition); with it, sum/E and the shape per unit energy are what the
  /// real/fake head compares. Fixed-angle models only.
  bool normalise_energy = false;
  /// 0: the ECAL-sum loss is the reference's MAPE per shower, which pulls every shower's sum to
  /// its target and so narrows the energy resolution. N > 0: nn::binned_mean_ratio_loss over N
  /// bins of E/100 in the fake energy range, which pins the mean response in each bin and leaves
  /// its spread to the adversarial loss.
  int ecal_mean_bins = 0;
  /// How the discriminator's fake batch is drawn: false (the reference) with the generator in
  /// inference mode, its BatchNorm layers on their running statistics; true with batch statistics,
  /// as the generator's own passes draw the showers whose gradient it follows (running statistics
  /// left untouched). With the reference's choice the discriminator learns on showers of another
  /// generator than the one the generator's update moves, by the lag of the running means.
  bool fakes_batch_stats = false;
  /// > 0: the generator's loss gains this weight times the squared maximum mean discrepancy
  /// (nn::mmd2_rq) between the high-level features (nn::shower_features) of its showers and of
  /// the real batch's, each feature scaled by the real batch's spread and the energy feature by
  /// kMmdEnergyWeight more, so that showers are compared with showers of like energy. A
  /// non-adversarial pull on the joint distribution of the features (the response's spread, the
  /// layers' correlations) that the discriminator does not have to learn first. Needs a
  /// conditioned discriminator (the energy is read from its second channel).
  float hlf_mmd = 0.0f;
  /// > 0: the same with the energy and the response log10(S/E) alone (the first two features):
  /// the distribution of sum/E at each energy, i.e. the sampling fraction and the resolution,
  /// which in the full features' kernel is one dimension of 27.
  float response_mmd = 0.0f;
  /// > 0: the same with the energy, the response and the layers' energy fractions (features 0, 1
  /// and 2 + 5z): the joint distribution of the shower's depth profile and its sum at each energy.
  /// At high energy the resolution is mostly the spread of the showers' depth (the layers sample
  /// differently), which the response alone does not constrain and the 27 features dilute.
  float longitudinal_mmd = 0.0f;
  /// > 0: the same with the energy, the response and the two transverse profiles (the columns' and
  /// the rows' percentages of the sum, nn::transverse_features, appended to the features): the
  /// joint distribution of the lateral shape and the sum at each energy. The per-layer widths of
  /// the 27 features fix the second moment only; this term fixes how the energy divides between
  /// the shower's axis, the cells beside it and the outer ones.
  float transverse_mmd = 0.0f;
  /// How the MMD terms scale the features: false, each by the real batch's spread (all energies
  /// together); true, each in units of its spread at the shower's energy (nn::EnergyStandardiser
  /// fitted on the real batch), so that a feature's error counts as much at 500 GeV, where the
  /// showers fluctuate least, as at 10 GeV.
  bool mmd_energy_scale = false;
  /// > 0: the generator's loss gains this weight times nn::binned_spread_loss of the response (the
  /// feature log10(S/E)) about its mean curve at each energy (a quadratic in log E fitted on the real
  /// batch, nn::EnergyStandardiser), in kResponseSpreadBins bins of energy: the squared log of the
  /// ratio of the generated to the real rms about that curve. It pulls the energy resolution, the
  /// spread of sum/E, to the real one in each bin where the adversarial terms leave it too narrow or
  /// too wide; the mean response stays with the ECAL loss. Needs a conditioned discriminator.
  float response_spread = 0.0f;
  /// Whether any term on the features is on (the step then computes the real batch's features).
  bool feature_terms() const {
    return hlf_mmd > 0.0f || response_mmd > 0.0f || longitudinal_mmd > 0.0f || transverse_mmd > 0.0f ||
           response_spread > 0.0f;
  }
};

/// The bins of energy (quantiles of the real batch) of StepConfig::response_spread.
inline constexpr int kResponseSpreadBins = 4;

/// The energy feature's weight in StepConfig::hlf_mmd's kernel, beside the other features' 1.
inline constexpr double kMmdEnergyWeight = 4.0;
/// The smallest spread by which the MMD terms divide a feature (one constant in the batch: an empty
/// layer's), in the feature's units.
inline constexpr double kMmdScaleFloor = 0.05;

enum class Net { generator, discriminator };
const char* to_string(Net n);

/// Losses of one step: weighted totals and per-head values (unweighted), in head order.
struct StepLosses {
  std::vector<std::string> heads;        ///< GanStep::loss_names(): D's outputs, then the MMD terms on
  double d_real = 0, d_fake = 0, g = 0;  ///< weighted totals (g averaged over the passes)
  std::vector<double> d_real_heads, d_fake_heads, g_heads;
  double d_loss() const { return 0.5 * (d_real + d_fake); }
};

/// Host images (N,1,X,X,Z) with shower i reflected by codes[i] (bit 2: exchange x and y, applied
/// first; bit 0: reflect x; bit 1: reflect y), or with @p inverse the gradient of such a
/// reflection taken back (the permutation's transpose). GanModel::symmetrise.
Tensor reflect_showers(const Tensor& images, const std::vector<std::uint8_t>& codes, bool inverse);

class GanStep {
 public:
  using ApplyFn = std::function<void(Net)>;

  GanStep(GanModel& model, Backend& backend, const StepConfig& config, std::uint64_t seed);

  StepLosses run(const RealBatch& batch, std::uint64_t step, const ApplyFn& apply);

  /// The step's losses on @p batch without any update: G and D in inference mode (BatchNorm
  /// running statistics, no dropout), as Keras' test_on_batch computes them; no label flips.
  StepLosses evaluate(const RealBatch& batch, std::uint64_t seed);

  /// Generate showers for conditions energy (N,1) E/100 (and angle (N,1) rad for the angle
  /// model), inference mode; returns a canonical host tensor (N, 1, X, Y, Z). With
  /// @p batch_statistics the generator's BatchNorm layers normalise with the N showers' own
  /// statistics, as the training's generator passes do (running statistics left untouched).
  Tensor generate(const Tensor& energy, const Tensor& angle, std::uint64_t seed, bool batch_statistics = false);
  /// The same with the latent noise given: @p noise (N, GanModel::noise), z ~ N(0, 1) as
  /// generate() draws it (what an exported generator is checked against).
  Tensor generate_from(const Tensor& energy, const Tensor& angle, const Tensor& noise);

  /// Re-estimate the generator's BatchNorm statistics for its weights as they are
  /// (nn::Network::recalibrate_state) over @p batches passes on the conditions energy (N,1) (and
  /// angle), fresh latent noise each pass.
  void recalibrate_generator_state(const Tensor& energy, const Tensor& angle, int batches, std::uint64_t seed);

  /// Discriminator outputs for @p images as host (N,1) tensors in head order. Phase::infer uses
  /// the BatchNorm running statistics; Phase::train normalises with the batch's own statistics,
  /// as D sees its all-real and all-fake batches during training (running statistics and weights
  /// are left untouched either way).
  std::vector<Tensor> discriminate(const Tensor& images, nn::Phase phase = nn::Phase::infer);
  /// The same for showers of energies @p energy (N,1) E/100, as D sees them in training: divided by
  /// the energy with normalise_energy, with the energy channel of a conditioned discriminator.
  std::vector<Tensor> discriminate(const Tensor& images, const Tensor& energy, nn::Phase phase = nn::Phase::infer);

  const StepConfig& config() const { return m_config; }
  /// The names of the per-head losses of StepLosses: the discriminator's outputs, then "hlf_mmd",
  /// "response_mmd" and "response_spread" when on (generator losses only: 0 in the discriminator's
  /// columns).
  std::vector<std::string> loss_names() const;

  /// The generator's input (N, latent) for conditions @p energy (N,1) E/100 (and @p angle): (E/100) z
  /// for the fixed-angle models, [E/100, z] with GanModel::energy_concat (z on the sphere of radius
  /// sqrt(noise) with GanModel::noise_on_sphere),
  /// concat(E/100, theta, z) for the angle model; z ~ N(0, 1) from @p rng.
  Tensor generator_input(const Tensor& energy, const Tensor& angle, Rng& rng) const;
  /// The same from the noise @p noise (N, GanModel::noise) drawn already (row by row, as @p rng
  /// draws it above).
  Tensor generator_input(const Tensor& energy, const Tensor& angle, const Tensor& noise) const;

 private:
  float fake_ecal_target(float x) const;
  /// GanModel::symmetrise: one code per shower, bit 0 reflect x, bit 1 reflect y, bit 2 exchange x
  /// and y (applied first); empty when the model does not symmetrise (nothing drawn from @p rng).
  std::vector<std::uint8_t> draw_reflections(std::int64_t n, Rng& rng) const;
  /// The images (N,1,X,Y,Z) with each item's reflection applied, or with @p inverse its
  /// gradient taken back (the transpose of the permutation); @p images itself when @p codes is empty.
  Tensor reflected(const Tensor& images, const std::vector<std::uint8_t>& codes, bool inverse) const;
  /// With normalise_energy: a copy of @p images (N,1,X,Y,Z) with item i scaled by energy_i^-power,
  /// on the backend's device (the images themselves when off). Also the gradient's back-scaling.
  Tensor energy_scaled(const Tensor& images, const Tensor& energy) const;
  /// What D reads for showers @p images of energies @p energy: energy_scaled, and with a conditioned
  /// discriminator (GanModel::conditioned) a second channel holding energy_i in every cell.
  Tensor d_input(const Tensor& images, const Tensor& energy) const;
  /// The gradient of the shower from the gradient of D's input: its channel 0 (conditioned), scaled
  /// back by energy_scaled.
  Tensor image_grad(const Tensor& d_input_grad, const Tensor& energy) const;
  /// D's outputs for @p input (already in D's input form) as host tensors in head order.
  std::vector<Tensor> discriminate_input(const Tensor& input, nn::Phase phase);
  /// With normalise_energy: @p ecal_i / energy_i (else @p ecal).
  Tensor energy_scaled_ecal(const Tensor& ecal, const Tensor& energy) const;
  /// The discriminator heads' targets in head order: the real/fake @p labels, the energy, ECAL sum
  /// and angle regressions.
  std::vector<Tensor> head_targets(const Tensor& labels, const Tensor& energy, const Tensor& ecal,
                                   const Tensor& angle) const;
  /// Loss of D's outputs against targets; fills host gradients; returns the weighted total.
  double head_losses(const std::vector<Tensor>& outputs, const std::vector<Tensor>& targets,
                     std::vector<double>& per_head, std::vector<Tensor>& diffs) const;
  void check_grads(Net net, std::uint64_t step, const char* phase) const;
  /// StepConfig::hlf_mmd, response_mmd and response_spread: the features (N x F) of D inputs @p input
  /// (N, C, X, Y, Z); the real batch's side, made once a step (its features, standardised at each
  /// energy when StepConfig::mmd_energy_scale, the MMD terms on, each with its weight and per-feature
  /// kernel scales, and for the spread term the energies and the response's residuals about its
  /// fitted curve); each term's value for the fake D inputs @p input against it (the MMD terms, then
  /// the spread), and with @p d_input_grad given, the weighted sum of their gradients added to that
  /// gradient of D's input.
  struct MmdTerm {
    float weight;
    std::vector<double> scale;
  };
  struct MmdReference {
    std::vector<double> features;
    std::optional<nn::EnergyStandardiser> by_energy;  ///< fitted when mmd_energy_scale or response_spread
    std::vector<MmdTerm> terms;
    std::vector<double> x, residual;  ///< response_spread: log10(E/100) and the response about its curve
    float spread_weight = 0.0f;
    /// each value's weight in the generator's loss, in the order of mmd_losses' values
    std::vector<float> weights() const;
  };
  /// The features the MMD terms compare: nn::shower_features, then with transverse_mmd
  /// nn::transverse_features.
  std::int64_t feature_count() const;
  std::vector<double> features_of(const Tensor& input) const;
  MmdReference mmd_reference(const Tensor& real_input) const;
  std::vector<double> mmd_losses(const Tensor& input, const MmdReference& real, Tensor* d_input_grad) const;
  Tensor to_device(const Tensor& host) const;
  Tensor to_host(const Tensor& t) const;

  GanModel& m_model;
  Backend& m_backend;
  StepConfig m_config;
  std::uint64_t m_seed;
  std::vector<std::string> m_heads;
  std::vector<float> m_head_weights;
  std::vector<int> m_head_kind;  // 0 fake, 1 energy, 2 ecal, 3 angle
};

}  // namespace mpigan::models
