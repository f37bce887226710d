// Dense: Keras Dense on a canonical (N, IC) input.
#pragma once

#include "mpigan/nn/layer.hpp"

namespace mpigan::nn {

/// @brief Fully connected layer. @f$ y_{n,o} = b_o + \sum_i W_{o,i}\, x_{n,i} @f$; kernel (OC, IC).
class Dense final : public Layer {
 public:
  Dense(std::string name, std::int64_t in, std::int64_t out, Init kernel_init = Init::glorot_uniform, bool bias = true);

  std::string kind() const override { return "Dense"; }
  std::string describe() const override;
  Shape output_shape(const Shape& src) const override;
  std::vector<ParamSpec> params() const override;

  TensorDesc setup(const TensorDesc& src) override;
  const Tensor& forward(const Tensor& src, const ForwardContext& ctx) override;
  void backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) override;

 private:
  InnerProductDesc m_desc;
  Init m_init;
  std::unique_ptr<InnerProductOp> m_op;
  TensorDesc m_src_desc;
  Tensor m_src, m_dst;
};

}  // namespace mpigan::nn
