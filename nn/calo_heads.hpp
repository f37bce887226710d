// Parameter-free layers of the 3DGAN discriminator heads that measure the calorimeter image
// itself: Pow (the AngleGAN's inverse of its 0.85 power), SumCells (the ECAL-sum head), Channel
// (the shower channel of a conditioned input) and EcalAngle (the measured incidence angle, `ecal_angle` / `measPython`
// of the reference code). These heads are differentiable w.r.t. the image: through them the generator learns to produce
// the right total energy and angle.
#pragma once

#include "mpigan/nn/layer.hpp"

#include <vector>

namespace mpigan::nn {

/// @brief y = max(x, 0)^p element-wise. dy/dx = p x^(p-1) for x > 0, else 0.
class Pow final : public Layer {
 public:
  Pow(std::string name, float exponent);
  std::string kind() const override { return "Pow"; }
  std::string describe() const override { return fmt::format("exponent {}", m_power); }
  Shape output_shape(const Shape& src) const override { return src; }
  TensorDesc setup(const TensorDesc& src) override;
  const Tensor& forward(const Tensor& src, const ForwardContext& ctx) override;
  void backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) override;

 private:
  float m_power;
  TensorDesc m_src_desc;
  Tensor m_src, m_dst;
};

/// @brief ECAL sum: y_n = sum of all cells of item n; output (N, 1).
class SumCells final : public Layer {
 public:
  explicit SumCells(std::string name) : Layer(std::move(name)) {}
  std::string kind() const override { return "SumCells"; }
  Shape output_shape(const Shape& src) const override { return {src[0], 1}; }
  TensorDesc setup(const TensorDesc& src) override;
  const Tensor& forward(const Tensor& src, const ForwardContext& ctx) override;
  void backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) override;

 private:
  TensorDesc m_src_desc;
  Tensor m_dst;
};

/// @brief One channel of a canonical (N, C, X, Y, Z) input as (N, 1, X, Y, Z): the shower of a
/// discriminator input that carries its condition in further channels. Computed on the host.
class Channel final : public Layer {
 public:
  Channel(std::string name, std::int64_t index) : Layer(std::move(name)), m_index(index) {}
  std::string kind() const override { return "Channel"; }
  std::string describe() const override { return fmt::format("channel {}", m_index); }
  Shape output_shape(const Shape& src) const override;
  TensorDesc setup(const TensorDesc& src) override;
  const Tensor& forward(const Tensor& src, const ForwardContext& ctx) override;
  void backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) override;

 private:
  std::int64_t m_index;
  TensorDesc m_src_desc;
  Tensor m_dst, m_host;
};

/// The measured angle of one shower image (X, Y, Z) = (x, y, depth), as `ecal_angle` of the
/// reference AngleGAN defines it (svalleco/3Dgan, Anglegan branch). Coordinates are index + 0.5. With S the
/// image sum and (x_ref, y_ref, z_ref) its energy barycentre; per depth layer z with sum S_z > 0 the
/// layer barycentre (x_z, y_z); zproj = sqrt(max((x_z - x_ref)^2 + (z - z_ref)^2, 1e-7));
/// m = (y_z - y_ref)/zproj, negated for z < z_ref; a_z = pi/2 - atan(m); the angle is
/// sum_z a_z z / sum_z z over non-empty layers. An empty image measures 100.
/// If @p grad is non-null it receives d(angle)/d(cell) (size X*Y*Z); layers with S_z = 0 and an
/// empty image contribute no gradient.
double measure_angle(const float* image, Dims3 dims, double* grad = nullptr);

/// @brief The measured-angle head: (N, 1, X, Y, Z) -> (N, 1), computed on the host in double.
class EcalAngle final : public Layer {
 public:
  explicit EcalAngle(std::string name) : Layer(std::move(name)) {}
  std::string kind() const override { return "EcalAngle"; }
  Shape output_shape(const Shape& src) const override;
  TensorDesc setup(const TensorDesc& src) override;
  const Tensor& forward(const Tensor& src, const ForwardContext& ctx) override;
  void backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) override;

 private:
  TensorDesc m_src_desc;
  Tensor m_src, m_dst, m_host;  ///< m_host: the output, on the host, for a backend off the CPU
};

/// The high-level features of one conditioned discriminator input (C, X, Y, Z), channel 0 the
/// shower as preprocessed (cells^power in the model's units), channel 1 (if C = 2) E/100: the
/// quantities a physicist, and the validation's classifier, look at first. With c = x^(1/power)
/// the cells, S their sum, S_z that of depth layer z, transverse coordinates u = (i - (X-1)/2) * 5/X
/// (in units of a 5-pad read-out's pads, so that 5^3 and 25^3 widths are alike) and eps = 1e-3:
///   f[0]          = log10(E/100)                          (0 without a condition channel)
///   f[1]          = 10 (log10((S + eps)/(E/100)) - 2.3)    (the response; 2.3: a 2 % sampling fraction)
///   f[2 + 5z + 0] = 2 (log10((S_z + eps)/(S + eps)) + 1)   (the longitudinal profile)
///   f[2 + 5z + 1] = 5 x_z,   f[2 + 5z + 2] = 5 y_z         (the layer's barycentre, sum c u / (S_z + eps))
///   f[2 + 5z + 3] = 5 w_x - 2, f[2 + 5z + 4] = 5 w_y - 2   (its width, sqrt(max(var, 0) + 1e-6))
/// The affine constants bring each feature to order one for the head's Dense layers. If @p grad_out
/// is non-null it receives sum_k gy[k] d f[k] / d x for every input value (channel 1: zero).
std::int64_t shower_feature_count(std::int64_t depth);
void shower_features(const float* item, std::int64_t channels, Dims3 dims, float power, double* f,
                     const float* gy = nullptr, float* grad_out = nullptr);

/// The shower's two transverse profiles, as percentages of its sum: with c, S and eps as above and
/// C_x (C_y) the sum of the cells in column x (row y) over the other transverse index and all layers,
///   t[x]     = 100 C_x / (S + eps),   x < X
///   t[X + y] = 100 C_y / (S + eps),   y < Y
/// The mean of these is what the rung's transverse-profile target compares with Monte Carlo. If
/// @p grad_out is non-null it receives sum_k gy[k] d t[k] / d x for every input value (any channel
/// past the first: zero).
std::int64_t transverse_feature_count(Dims3 dims);
void transverse_features(const float* item, std::int64_t channels, Dims3 dims, float power, double* t,
                         const float* gy = nullptr, float* grad_out = nullptr);

/// @brief The high-level-feature head's input: (N, C, X, Y, Z) -> (N, 2 + 5Z), computed on the
/// host in double (shower_features).
class ShowerFeatures final : public Layer {
 public:
  ShowerFeatures(std::string name, float power);
  std::string kind() const override { return "ShowerFeatures"; }
  std::string describe() const override { return fmt::format("power {}", m_power); }
  Shape output_shape(const Shape& src) const override;
  TensorDesc setup(const TensorDesc& src) override;
  const Tensor& forward(const Tensor& src, const ForwardContext& ctx) override;
  void backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) override;

 private:
  float m_power;
  TensorDesc m_src_desc;
  Tensor m_src, m_dst, m_host;  ///< m_host: the output, on the host, for a backend off the CPU
};

}  // namespace mpigan::nn
