// Dense: Keras Dense on a canonical (N, IC) input.
#pragma once

#include "mpigan/nn/layer.hpp"

namespace mpigan::nn {

/// @brief Fully connected layer. @f$ y_{n,o} = b_o + \sum_i W_{o,i}\, x_{n,i} @f$; kernel (OC, IC).
///
/// With a gain g != 1 the layer computes with W = g V and b = g c, where V and c are the stored
/// parameters (initialised to the kernel initialiser's draws divided by g): the "equalised
/// learning rate" reparametrisation. Under Adam or RMSprop, whose steps do not depend on the
/// gradient's scale, each step moves W and b g times as far as it would move a plain layer's: the
/// layer learns at g times the optimizer's learning rate (up to epsilon), with the same
/// initialisation and the same function. Under SGD the factor is g^2.
class Dense final : public Layer {
 public:
  Dense(std::string name, std::int64_t in, std::int64_t out, Init kernel_init = Init::glorot_uniform, bool bias = true,
        float gain = 1.0f);

  std::string kind() const override { return "Dense"; }
  std::string describe() const override;
  Shape output_shape(const Shape& src) const override;
  std::vector<ParamSpec> params() const override;
  /// The factor between the stored parameters and the ones the layer computes with (1: none).
  float gain() const { return m_gain; }

  TensorDesc setup(const TensorDesc& src) override;
  const Tensor& forward(const Tensor& src, const ForwardContext& ctx) override;
  void backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) override;

 private:
  InnerProductDesc m_desc;
  Init m_init;
  float m_gain;
  std::unique_ptr<InnerProductOp> m_op;
  TensorDesc m_src_desc;
  Tensor m_src, m_dst;
  Tensor m_kernel, m_bias;  ///< g V and g c, computed by forward when the gain is not 1
};

}  // namespace mpigan::nn
