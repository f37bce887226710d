// Element-wise layers: activations (ReLU, LeakyReLU, Sigmoid) and Dropout. Both may run in place
// over their input (the network decides), which is what keeps the 3DGAN's activation memory low.
#pragma once

#include "mpigan/nn/layer.hpp"

namespace mpigan::nn {

/// @brief relu @f$ \max(x,0) @f$, leaky_relu @f$ x>0\,?\,x:\alpha x @f$ (Keras default
/// alpha 0.3), sigmoid @f$ 1/(1+e^{-x}) @f$. The backward uses the output (valid for alpha >= 0).
class Activation final : public Layer {
 public:
  Activation(std::string name, const EltwiseDesc& desc);
  static EltwiseDesc relu() { return {EltwiseKind::relu, 0.0f}; }
  static EltwiseDesc leaky_relu(float alpha = 0.3f) { return {EltwiseKind::leaky_relu, alpha}; }
  static EltwiseDesc sigmoid() { return {EltwiseKind::sigmoid, 0.0f}; }

  std::string kind() const override;
  std::string describe() const override { return m_desc.to_string(); }
  const EltwiseDesc& desc() const { return m_desc; }
  Shape output_shape(const Shape& src) const override { return src; }
  OutputUse backward_reads_output() const override {
    return m_desc.kind == EltwiseKind::sigmoid ? OutputUse::value : OutputUse::sign;
  }
  bool supports_inplace() const override { return true; }

  TensorDesc setup(const TensorDesc& src) override;
  const Tensor& forward(const Tensor& src, const ForwardContext& ctx) override;
  void backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) override;

 private:
  EltwiseDesc m_desc;
  std::unique_ptr<EltwiseOp> m_op;
  TensorDesc m_src_desc;
  Tensor m_dst;  // own buffer, or the input's storage when in place
};

/// @brief Inverted dropout (Keras): train phase keeps each element with probability 1-rate and
/// scales it by 1/(1-rate); infer phase is the identity. The mask is a function of (seed, layer,
/// pass) through Philox, kept for backward as one bit per element.
class Dropout final : public Layer {
 public:
  Dropout(std::string name, float rate);

  std::string kind() const override { return "Dropout"; }
  std::string describe() const override { return fmt::format("rate {}", m_rate); }
  Shape output_shape(const Shape& src) const override { return src; }
  bool supports_inplace() const override { return true; }
  bool preserves_sign() const override { return true; }

  TensorDesc setup(const TensorDesc& src) override;
  const Tensor& forward(const Tensor& src, const ForwardContext& ctx) override;
  void backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) override;

 private:
  float m_rate;
  TensorDesc m_src_desc;
  Tensor m_dst, m_mask;
  bool m_last_was_train = false;
};

}  // namespace mpigan::nn
