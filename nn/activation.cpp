// Activation and Dropout layers (activation.hpp) on the backend's element-wise and dropout ops.
#include "mpigan/nn/activation.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/rng.hpp"

namespace mpigan::nn {

Activation::Activation(std::string name, const EltwiseDesc& desc) : Layer(std::move(name)), m_desc(desc) {
  MPIGAN_CHECK(desc.alpha >= 0.0f, "layer '{}': LeakyReLU alpha must be >= 0, got {}", this->name(), desc.alpha);
}

std::string Activation::kind() const {
  switch (m_desc.kind) {
    case EltwiseKind::relu:
      return "ReLU";
    case EltwiseKind::leaky_relu:
      return "LeakyReLU";
    case EltwiseKind::sigmoid:
      return "Sigmoid";
  }
  return "Activation";
}

TensorDesc Activation::setup(const TensorDesc& src) {
  if (!m_op) m_op = backend().make_eltwise(m_desc);
  m_src_desc = src;
  const TensorDesc dst = m_op->setup(src);
  if (!inplace()) ensure(m_dst, dst);
  return dst;
}

const Tensor& Activation::forward(const Tensor& src, const ForwardContext&) {
  check_input(src, m_src_desc);
  if (inplace()) m_dst = src;
  m_op->forward(src, m_dst);
  return m_dst;
}

void Activation::backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) {
  if (ctx.need_diff_src) m_op->backward(m_dst, diff_dst, diff_src);
}

Dropout::Dropout(std::string name, float rate) : Layer(std::move(name)), m_rate(rate) {
  MPIGAN_CHECK(rate >= 0.0f && rate < 1.0f, "layer '{}': Dropout rate must be in [0, 1), got {}", this->name(), rate);
}

TensorDesc Dropout::setup(const TensorDesc& src) {
  m_src_desc = src;
  if (!inplace()) ensure(m_dst, src);
  ensure(m_mask, {{static_cast<std::int64_t>(dropout_mask_floats(src.physical_elems()))}, nullptr});
  return src;
}

const Tensor& Dropout::forward(const Tensor& src, const ForwardContext& ctx) {
  check_input(src, m_src_desc);
  if (inplace()) m_dst = src;
  m_last_was_train = ctx.phase == Phase::train && m_rate > 0.0f;
  if (!m_last_was_train) {
    if (!inplace()) backend().copy(src, m_dst);
    return m_dst;
  }
  backend().dropout(src, m_dst, m_rate, ctx.seed, mix64(hash_string(name()) ^ mix64(ctx.pass)), m_mask);
  return m_dst;
}

void Dropout::backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) {
  if (!ctx.need_diff_src) return;
  if (m_last_was_train)
    backend().dropout_backward(diff_dst, diff_src, m_rate, m_mask);
  else
    backend().copy(diff_dst, diff_src);
}

}  // namespace mpigan::nn
