// UpSampling3D, AveragePooling3D, Reshape and Flatten layers (resample.hpp).
#include "mpigan/nn/resample.hpp"

#include "mpigan/core/error.hpp"

namespace mpigan::nn {

UpSampling3d::UpSampling3d(std::string name, Dims3 factor) : Layer(std::move(name)), m_desc{factor} {
  MPIGAN_CHECK(factor.d >= 1 && factor.h >= 1 && factor.w >= 1, "layer '{}': upsampling factors must be >= 1, got {}",
               this->name(), factor);
}

Shape UpSampling3d::output_shape(const Shape& src) const {
  MPIGAN_CHECK_SHAPE(src.rank() == 5, "layer '{}' (UpSampling3D): input must be NCDHW, found {}", name(), src);
  return m_desc.output_shape(src);
}

TensorDesc UpSampling3d::setup(const TensorDesc& src) {
  output_shape(src.shape);
  if (!m_op) m_op = backend().make_upsample(m_desc);
  m_src_desc = src;
  const TensorDesc dst = m_op->setup(src);
  ensure(m_dst, dst);
  return dst;
}

const Tensor& UpSampling3d::forward(const Tensor& src, const ForwardContext&) {
  check_input(src, m_src_desc);
  m_op->forward(src, m_dst);
  return m_dst;
}

void UpSampling3d::backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) {
  if (ctx.need_diff_src) m_op->backward(diff_dst, diff_src);
}

AvgPool3d::AvgPool3d(std::string name, Dims3 pool) : Layer(std::move(name)), m_desc{pool, pool} {
  MPIGAN_CHECK(pool.d >= 1 && pool.h >= 1 && pool.w >= 1, "layer '{}': pool sizes must be >= 1, got {}", this->name(),
               pool);
}

Shape AvgPool3d::output_shape(const Shape& src) const {
  try {
    return m_desc.output_shape(src);
  } catch (const ShapeError& e) {
    MPIGAN_THROW(ShapeError, "layer '{}' (AveragePooling3D): {}", name(), e.message());
  }
}

TensorDesc AvgPool3d::setup(const TensorDesc& src) {
  output_shape(src.shape);
  if (!m_op) m_op = backend().make_avg_pool(m_desc);
  m_src_desc = src;
  const TensorDesc dst = m_op->setup(src);
  ensure(m_dst, dst);
  return dst;
}

const Tensor& AvgPool3d::forward(const Tensor& src, const ForwardContext&) {
  check_input(src, m_src_desc);
  m_op->forward(src, m_dst);
  return m_dst;
}

void AvgPool3d::backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) {
  if (ctx.need_diff_src) m_op->backward(diff_dst, diff_src);
}

Reshape::Reshape(std::string name, std::vector<std::int64_t> target)
    : Layer(std::move(name)), m_target(std::move(target)) {
  MPIGAN_CHECK(!m_target.empty() && m_target.size() < Shape::kMaxRank, "layer '{}': Reshape target needs 1..{} dims",
               this->name(), Shape::kMaxRank - 1);
}

std::unique_ptr<Reshape> Reshape::flatten(std::string name) {
  auto r = std::make_unique<Reshape>(std::move(name), std::vector<std::int64_t>{-1});
  r->m_flatten = true;
  return r;
}

std::string Reshape::describe() const {
  if (m_flatten) return {};
  std::string s = "target (";
  for (std::size_t i = 0; i < m_target.size(); ++i) s += (i ? "," : "") + std::to_string(m_target[i]);
  return s + ")";
}

Shape Reshape::output_shape(const Shape& src) const {
  MPIGAN_CHECK_SHAPE(src.rank() >= 1, "layer '{}' ({}): input needs a batch dim, found {}", name(), kind(), src);
  if (m_flatten) return {src[0], src.item_numel()};
  std::int64_t n = 1;
  for (auto v : m_target) n *= v;
  MPIGAN_CHECK_SHAPE(n == src.item_numel(), "layer '{}' (Reshape): {} elements per item do not fit target {}", name(),
                     src.item_numel(), describe());
  Shape out;
  switch (m_target.size()) {
    case 1:
      out = {src[0], m_target[0]};
      break;
    case 2:
      out = {src[0], m_target[0], m_target[1]};
      break;
    case 3:
      out = {src[0], m_target[0], m_target[1], m_target[2]};
      break;
    default:
      out = {src[0], m_target[0], m_target[1], m_target[2], m_target[3]};
      break;
  }
  return out;
}

TensorDesc Reshape::setup(const TensorDesc& src) {
  const Shape out = output_shape(src.shape);
  m_src_desc = src;
  if (!src.canonical()) ensure(m_canonical, {src.shape, nullptr});
  return {out, nullptr};
}

const Tensor& Reshape::forward(const Tensor& src, const ForwardContext&) {
  check_input(src, m_src_desc);
  const Shape out = output_shape(src.shape());
  if (src.canonical()) {
    m_dst = src.reshaped(out);
  } else {
    backend().reorder(src, m_canonical);
    m_dst = m_canonical.reshaped(out);
  }
  return m_dst;
}

void Reshape::backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) {
  if (!ctx.need_diff_src) return;
  const Tensor flat = diff_dst.reshaped(m_src_desc.shape);
  if (diff_src.canonical())
    backend().copy(flat, diff_src);
  else
    backend().reorder(flat, diff_src);
}

}  // namespace mpigan::nn
