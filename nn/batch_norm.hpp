// BatchNorm3d: Keras BatchNormalization over the channel dim (axis 1 here).
#pragma once

#include "mpigan/nn/layer.hpp"

namespace mpigan::nn {

/// @brief Batch normalisation per channel over N and the spatial dims.
/// Train phase: @f$ y = \gamma (x - \mu_B)/\sqrt{\sigma_B^2 + \epsilon} + \beta @f$ with the batch's
/// mean and biased variance; when ctx.update_stats, the running statistics move as Keras does:
/// @f$ m \leftarrow \text{momentum}\, m + (1-\text{momentum})\, \mu_B @f$ (same for the variance,
/// with the biased batch variance as Keras' non-fused 5D path computes it).
/// Infer phase: the running statistics replace the batch's. gamma/beta are trainable parameters;
/// moving_mean/moving_variance are state (non-trainable), initialised to 0 and 1.
class BatchNorm3d final : public Layer {
 public:
  BatchNorm3d(std::string name, std::int64_t channels, float momentum = 0.99f, float epsilon = 1e-3f);

  std::string kind() const override { return "BatchNormalization"; }
  std::string describe() const override;
  const BatchNormDesc& desc() const { return m_desc; }
  Shape output_shape(const Shape& src) const override;
  std::vector<ParamSpec> params() const override;
  std::vector<ParamSpec> state() const override;

  TensorDesc setup(const TensorDesc& src) override;
  const Tensor& forward(const Tensor& src, const ForwardContext& ctx) override;
  void backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) override;
  /// momentum^k after k updates of the running statistics since the last reset.
  double state_decay() const override { return m_decay; }
  void reset_state_decay() override { m_decay = 1.0; }

 private:
  BatchNormDesc m_desc;
  float m_momentum;
  std::unique_ptr<BatchNormOp> m_op;
  TensorDesc m_src_desc;
  Tensor m_src, m_dst, m_batch_mean, m_batch_var;
  bool m_last_was_train = false;
  double m_decay = 1.0;
};

}  // namespace mpigan::nn
