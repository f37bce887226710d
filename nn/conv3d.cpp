// Conv3d (conv3d.hpp): Keras padding modes as Conv3dDesc, kernel and bias, the backend's convolution.
#include "mpigan/nn/conv3d.hpp"

#include "mpigan/core/error.hpp"

namespace mpigan::nn {

Conv3dDesc Conv3d::same(std::int64_t ic, std::int64_t oc, Dims3 k, bool bias) {
  Conv3dDesc d{ic, oc, k};
  d.pad_l = {(k.d - 1) / 2, (k.h - 1) / 2, (k.w - 1) / 2};
  d.pad_r = {k.d / 2, k.h / 2, k.w / 2};
  d.bias = bias;
  return d;
}

Conv3dDesc Conv3d::valid(std::int64_t ic, std::int64_t oc, Dims3 k, bool bias) {
  Conv3dDesc d{ic, oc, k};
  d.bias = bias;
  return d;
}

Conv3dDesc Conv3d::zero_padded(std::int64_t ic, std::int64_t oc, Dims3 k, Dims3 pad, bool bias) {
  Conv3dDesc d = valid(ic, oc, k, bias);
  d.pad_l = d.pad_r = pad;
  return d;
}

Conv3d::Conv3d(std::string name, const Conv3dDesc& desc, Init kernel_init)
    : Layer(std::move(name)), m_desc(desc), m_init(kernel_init) {
  MPIGAN_CHECK(desc.ic > 0 && desc.oc > 0 && desc.kernel.product() > 0, "layer '{}': invalid conv3d {}", this->name(),
               desc.to_string());
}

std::string Conv3d::describe() const {
  return fmt::format("{}->{} kernel {} pad {}|{}{} init {}", m_desc.ic, m_desc.oc, m_desc.kernel, m_desc.pad_l,
                     m_desc.pad_r, m_desc.bias ? "" : " no bias", to_string(m_init));
}

Shape Conv3d::output_shape(const Shape& src) const {
  try {
    return m_desc.output_shape(src);
  } catch (const ShapeError& e) {
    MPIGAN_THROW(ShapeError, "layer '{}' (Conv3D): {}", name(), e.message());
  }
}

std::vector<ParamSpec> Conv3d::params() const {
  const std::int64_t k = m_desc.kernel.product();
  std::vector<ParamSpec> p{{"kernel", m_desc.weights_shape(), m_init, m_desc.ic * k, m_desc.oc * k}};
  if (m_desc.bias) p.push_back({"bias", {m_desc.oc}, Init::zeros, 0, 0});
  return p;
}

TensorDesc Conv3d::setup(const TensorDesc& src) {
  output_shape(src.shape);  // named shape check
  if (!m_op) m_op = backend().make_conv3d(m_desc);
  m_src_desc = src;
  const TensorDesc dst = m_op->setup(src);
  ensure(m_dst, dst);
  return dst;
}

const Tensor& Conv3d::forward(const Tensor& src, const ForwardContext&) {
  check_input(src, m_src_desc);
  m_src = src;
  m_op->forward(src, m_weights[0], m_desc.bias ? m_weights[1] : Tensor(), m_dst);
  return m_dst;
}

void Conv3d::backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) {
  if (ctx.param_grads) {
    Tensor no_bias;
    m_op->backward_weights(m_src, diff_dst, m_grads[0], m_desc.bias ? m_grads[1] : no_bias);
  }
  if (ctx.need_diff_src) m_op->backward_data(diff_dst, m_weights[0], diff_src);
}

}  // namespace mpigan::nn
