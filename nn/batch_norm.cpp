// BatchNorm3d (batch_norm.hpp): gamma/beta, running statistics, and the backend's batch-norm op in
// training and inference mode.
#include "mpigan/nn/batch_norm.hpp"

#include "mpigan/core/error.hpp"

namespace mpigan::nn {

BatchNorm3d::BatchNorm3d(std::string name, std::int64_t channels, float momentum, float epsilon)
    : Layer(std::move(name)), m_desc{channels, epsilon}, m_momentum(momentum) {
  MPIGAN_CHECK(channels > 0 && momentum >= 0.0f && momentum <= 1.0f && epsilon > 0.0f,
               "layer '{}': BatchNormalization needs channels > 0, momentum in [0,1], epsilon > 0 (got {}, {}, {})",
               this->name(), channels, momentum, epsilon);
}

std::string BatchNorm3d::describe() const {
  return fmt::format("channels {} momentum {} epsilon {}", m_desc.channels, m_momentum, m_desc.epsilon);
}

Shape BatchNorm3d::output_shape(const Shape& src) const {
  MPIGAN_CHECK_SHAPE(src.rank() >= 2 && src[1] == m_desc.channels,
                     "layer '{}' (BatchNormalization): input expected {} channels in dim 1, found shape {}", name(),
                     m_desc.channels, src);
  return src;
}

std::vector<ParamSpec> BatchNorm3d::params() const {
  return {{"gamma", {m_desc.channels}, Init::ones, 0, 0}, {"beta", {m_desc.channels}, Init::zeros, 0, 0}};
}

std::vector<ParamSpec> BatchNorm3d::state() const {
  return {{"moving_mean", {m_desc.channels}, Init::zeros, 0, 0},
          {"moving_variance", {m_desc.channels}, Init::ones, 0, 0}};
}

TensorDesc BatchNorm3d::setup(const TensorDesc& src) {
  output_shape(src.shape);
  if (!m_op) m_op = backend().make_batch_norm(m_desc);
  m_src_desc = src;
  const TensorDesc dst = m_op->setup(src);
  ensure(m_dst, dst);
  ensure(m_batch_mean, {{m_desc.channels}, nullptr});
  ensure(m_batch_var, {{m_desc.channels}, nullptr});
  return dst;
}

const Tensor& BatchNorm3d::forward(const Tensor& src, const ForwardContext& ctx) {
  check_input(src, m_src_desc);
  m_src = src;
  m_last_was_train = ctx.phase == Phase::train;
  if (!m_last_was_train) {
    m_op->forward_inference(src, m_weights[0], m_weights[1], m_state[0], m_state[1], m_dst);
    return m_dst;
  }
  m_op->forward_training(src, m_weights[0], m_weights[1], m_dst, m_batch_mean, m_batch_var);
  if (ctx.update_stats) {
    backend().axpby(1.0f - m_momentum, m_batch_mean, m_momentum, m_state[0]);
    backend().axpby(1.0f - m_momentum, m_batch_var, m_momentum, m_state[1]);
    m_decay *= m_momentum;
  }
  return m_dst;
}

void BatchNorm3d::backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) {
  MPIGAN_CHECK(m_last_was_train, "layer '{}' (BatchNormalization): backward after an inference-phase forward", name());
  Tensor none;
  if (!ctx.need_diff_src && !ctx.param_grads) return;
  // The op always produces diff_src; without a destination, use a scratch the size of the input.
  Tensor scratch;
  Tensor& ds = ctx.need_diff_src ? diff_src : (scratch = backend().allocate(m_src_desc));
  m_op->backward(m_src, diff_dst, m_weights[0], m_batch_mean, m_batch_var, ds, ctx.param_grads ? m_grads[0] : none,
                 ctx.param_grads ? m_grads[1] : none);
}

}  // namespace mpigan::nn
