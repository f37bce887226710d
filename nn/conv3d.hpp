// Conv3d: Keras Conv3D with explicit per-side zero padding (covers 'valid', TF 'same' with its
// asymmetric split for even kernels, and ZeroPadding3D + Conv3D).
#pragma once

#include "mpigan/nn/layer.hpp"

namespace mpigan::nn {

/// @brief 3D convolution, channels in dim 1.
/// @f$ y_{n,o,d,h,w} = b_o + \sum_{i,a,b,c} W_{o,i,a,b,c}\; x_{n,i,\,d+a-p_d,\,h+b-p_h,\,w+c-p_w} @f$
/// with @f$ x = 0 @f$ outside the input. Kernel (OC, IC, KD, KH, KW), bias (OC).
class Conv3d final : public Layer {
 public:
  /// TF 'same' (stride 1): pad (k-1)/2 before and k/2 after in each dim.
  static Conv3dDesc same(std::int64_t ic, std::int64_t oc, Dims3 kernel, bool bias = true);
  static Conv3dDesc valid(std::int64_t ic, std::int64_t oc, Dims3 kernel, bool bias = true);
  /// ZeroPadding3D(pad) followed by a 'valid' Conv3D: the same pad on both sides of each dim.
  static Conv3dDesc zero_padded(std::int64_t ic, std::int64_t oc, Dims3 kernel, Dims3 pad, bool bias = true);

  Conv3d(std::string name, const Conv3dDesc& desc, Init kernel_init = Init::glorot_uniform);

  std::string kind() const override { return "Conv3D"; }
  std::string describe() const override;
  Shape output_shape(const Shape& src) const override;
  std::vector<ParamSpec> params() const override;
  const Conv3dDesc& desc() const { return m_desc; }

  TensorDesc setup(const TensorDesc& src) override;
  const Tensor& forward(const Tensor& src, const ForwardContext& ctx) override;
  void backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) override;

 private:
  Conv3dDesc m_desc;
  Init m_init;
  std::unique_ptr<Conv3dOp> m_op;
  TensorDesc m_src_desc;
  Tensor m_src, m_dst;
};

}  // namespace mpigan::nn
