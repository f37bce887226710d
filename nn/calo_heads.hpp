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
  Tensor m_src, m_dst, m_host_dst;
};

}  // namespace mpigan::nn
