// Dense (dense.hpp): kernel and bias, the backend's inner product.
#include "mpigan/nn/dense.hpp"

#include "mpigan/core/error.hpp"

namespace mpigan::nn {

Dense::Dense(std::string name, std::int64_t in, std::int64_t out, Init kernel_init, bool bias)
    : Layer(std::move(name)), m_desc{in, out, bias}, m_init(kernel_init) {
  MPIGAN_CHECK(in > 0 && out > 0, "layer '{}': Dense sizes must be positive, got {} -> {}", this->name(), in, out);
}

std::string Dense::describe() const {
  return fmt::format("{}->{}{} init {}", m_desc.ic, m_desc.oc, m_desc.bias ? "" : " no bias", to_string(m_init));
}

Shape Dense::output_shape(const Shape& src) const {
  MPIGAN_CHECK_SHAPE(src.rank() == 2 && src[1] == m_desc.ic,
                     "layer '{}' (Dense): input shape expected (N,{}), found {}", name(), m_desc.ic, src);
  return {src[0], m_desc.oc};
}

std::vector<ParamSpec> Dense::params() const {
  std::vector<ParamSpec> p{{"kernel", {m_desc.oc, m_desc.ic}, m_init, m_desc.ic, m_desc.oc}};
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
  m_op->forward(src, m_weights[0], m_desc.bias ? m_weights[1] : Tensor(), m_dst);
  return m_dst;
}

void Dense::backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) {
  if (ctx.param_grads) {
    Tensor no_bias;
    m_op->backward_weights(m_src, diff_dst, m_grads[0], m_desc.bias ? m_grads[1] : no_bias);
  }
  if (ctx.need_diff_src) m_op->backward_data(diff_dst, m_weights[0], diff_src);
}

}  // namespace mpigan::nn
