// Dense (dense.hpp): kernel and bias, the backend's inner product.
#include "mpigan/nn/dense.hpp"

#include "mpigan/core/error.hpp"

#include <cmath>

namespace mpigan::nn {

Dense::Dense(std::string name, std::int64_t in, std::int64_t out, Init kernel_init, bool bias, float gain)
    : Layer(std::move(name)), m_desc{in, out, bias}, m_init(kernel_init), m_gain(gain) {
  MPIGAN_CHECK(in > 0 && out > 0, "layer '{}': Dense sizes must be positive, got {} -> {}", this->name(), in, out);
  MPIGAN_CHECK(std::isfinite(gain) && gain > 0.0f, "layer '{}': Dense gain must be positive and finite, got {}",
               this->name(), gain);
}

std::string Dense::describe() const {
  return fmt::format("{}->{}{} init {}{}", m_desc.ic, m_desc.oc, m_desc.bias ? "" : " no bias", to_string(m_init),
                     m_gain == 1.0f ? std::string() : fmt::format(" gain {}", m_gain));
}

Shape Dense::output_shape(const Shape& src) const {
  MPIGAN_CHECK_SHAPE(src.rank() == 2 && src[1] == m_desc.ic,
                     "layer '{}' (Dense): input shape expected (N,{}), found {}", name(), m_desc.ic, src);
  return {src[0], m_desc.oc};
}

std::vector<ParamSpec> Dense::params() const {
  std::vector<ParamSpec> p{{"kernel", {m_desc.oc, m_desc.ic}, m_init, m_desc.ic, m_desc.oc, 1.0f / m_gain}};
  if (m_desc.bias) p.push_back({"bias", {m_desc.oc}, Init::zeros, 0, 0});
  return p;
}

TensorDesc Dense::setup(const TensorDesc& src) {
  output_shape(src.shape);
  MPIGAN_CHECK(src.canonical(), "layer '{}' (Dense): input must be canonical, got {}", name(), src.to_string());
  if (!m_op) m_op = backend().make_inner_product(m_desc);
  m_src_desc = src;
  const TensorDesc dst = m_op->setup(src);
  ensure(m_dst, dst);
  return dst;
}

const Tensor& Dense::forward(const Tensor& src, const ForwardContext&) {
  check_input(src, m_src_desc);
  m_src = src;
  if (m_gain == 1.0f) {
    m_kernel = m_weights[0];
    if (m_desc.bias) m_bias = m_weights[1];
  } else {
    // Recomputed on every call: the stored parameters change between calls (optimizer steps,
    // weights received from a master).
    ensure(m_kernel, m_weights[0].desc());
    backend().axpby(m_gain, m_weights[0], 0.0f, m_kernel);
    if (m_desc.bias) {
      ensure(m_bias, m_weights[1].desc());
      backend().axpby(m_gain, m_weights[1], 0.0f, m_bias);
    }
  }
  m_op->forward(src, m_kernel, m_desc.bias ? m_bias : Tensor(), m_dst);
  return m_dst;
}

void Dense::backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) {
  if (ctx.param_grads) {
    Tensor no_bias;
    m_op->backward_weights(m_src, diff_dst, m_grads[0], m_desc.bias ? m_grads[1] : no_bias);
    if (m_gain != 1.0f) {  // dL/dV = g dL/dW
      backend().axpby(0.0f, m_grads[0], m_gain, m_grads[0]);
      if (m_desc.bias) backend().axpby(0.0f, m_grads[1], m_gain, m_grads[1]);
    }
  }
  if (ctx.need_diff_src) m_op->backward_data(diff_dst, m_kernel, diff_src);
}

}  // namespace mpigan::nn
