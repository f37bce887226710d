// The reference backend's ops and flat math over canonical host tensors, on the loops of kernels.hpp.
#include "mpigan/backend/reference/reference_backend.hpp"

#include "mpigan/backend/reference/kernels.hpp"
#include "mpigan/core/error.hpp"
#include "mpigan/core/rng.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace mpigan {
namespace {

void require_canonical(const Tensor& t, const char* op, const char* role) {
  MPIGAN_CHECK(t.canonical() && t.device() == Device::cpu, "reference {}: {} must be a canonical host tensor, got {}",
               op, role, t.desc().to_string());
}

void require_shape(const Tensor& t, const Shape& want, const char* op, const char* role) {
  require_canonical(t, op, role);
  MPIGAN_CHECK_SHAPE(t.shape() == want, "reference {}: {} shape expected {}, found {}", op, role, want, t.shape());
}

std::size_t same_size(const Tensor& a, const Tensor& b, const char* op) {
  MPIGAN_CHECK(a.physical_elems() == b.physical_elems(), "reference {}: sizes differ ({} vs {})", op,
               a.desc().to_string(), b.desc().to_string());
  return a.physical_elems();
}

class RefConv3d final : public Conv3dOp {
 public:
  explicit RefConv3d(const Conv3dDesc& d) : m_desc(d) {}
  TensorDesc setup(const TensorDesc& src) override {
    MPIGAN_CHECK(src.canonical(), "reference conv3d: input layout must be canonical, got {}", src.to_string());
    m_src = src.shape;
    m_dst = m_desc.output_shape(src.shape);
    return {m_dst, nullptr};
  }
  void forward(const Tensor& src, const Tensor& w, const Tensor& b, Tensor& dst) override {
    require_shape(src, m_src, "conv3d", "src");
    require_shape(w, m_desc.weights_shape(), "conv3d", "weights");
    require_shape(dst, m_dst, "conv3d", "dst");
    ref::conv3d_forward(m_desc, m_src, src.data(), w.data(), m_desc.bias ? b.data() : nullptr, dst.data());
  }
  void backward_data(const Tensor& diff_dst, const Tensor& w, Tensor& diff_src) override {
    require_shape(diff_dst, m_dst, "conv3d", "diff_dst");
    require_shape(diff_src, m_src, "conv3d", "diff_src");
    ref::conv3d_backward_data(m_desc, m_src, diff_dst.data(), w.data(), diff_src.data());
  }
  void backward_weights(const Tensor& src, const Tensor& diff_dst, Tensor& dw, Tensor& db) override {
    require_shape(src, m_src, "conv3d", "src");
    require_shape(diff_dst, m_dst, "conv3d", "diff_dst");
    require_shape(dw, m_desc.weights_shape(), "conv3d", "diff_weights");
    ref::conv3d_backward_weights(m_desc, m_src, src.data(), diff_dst.data(), dw.data(),
                                 m_desc.bias && db.defined() ? db.data() : nullptr);
  }

 private:
  Conv3dDesc m_desc;
  Shape m_src, m_dst;
};

class RefInnerProduct final : public InnerProductOp {
 public:
  explicit RefInnerProduct(const InnerProductDesc& d) : m_desc(d) {}
  TensorDesc setup(const TensorDesc& src) override {
    MPIGAN_CHECK_SHAPE(src.canonical() && src.shape.rank() == 2 && src.shape[1] == m_desc.ic,
                       "reference inner_product {}: input expected canonical (N,{}), found {}", m_desc.to_string(),
                       m_desc.ic, src.to_string());
    m_n = src.shape[0];
    return {{m_n, m_desc.oc}, nullptr};
  }
  void forward(const Tensor& src, const Tensor& w, const Tensor& b, Tensor& dst) override {
    require_shape(src, {m_n, m_desc.ic}, "inner_product", "src");
    require_shape(w, {m_desc.oc, m_desc.ic}, "inner_product", "weights");
    ref::inner_product_forward(m_n, m_desc, src.data(), w.data(), m_desc.bias ? b.data() : nullptr, dst.data());
  }
  void backward_data(const Tensor& diff_dst, const Tensor& w, Tensor& diff_src) override {
    require_shape(diff_dst, {m_n, m_desc.oc}, "inner_product", "diff_dst");
    ref::inner_product_backward_data(m_n, m_desc, diff_dst.data(), w.data(), diff_src.data());
  }
  void backward_weights(const Tensor& src, const Tensor& diff_dst, Tensor& dw, Tensor& db) override {
    require_shape(dw, {m_desc.oc, m_desc.ic}, "inner_product", "diff_weights");
    ref::inner_product_backward_weights(m_n, m_desc, src.data(), diff_dst.data(), dw.data(),
                                        m_desc.bias && db.defined() ? db.data() : nullptr);
  }

 private:
  InnerProductDesc m_desc;
  std::int64_t m_n = 0;
};

class RefEltwise final : public EltwiseOp {
 public:
  explicit RefEltwise(const EltwiseDesc& d) : m_desc(d) {}
  TensorDesc setup(const TensorDesc& src) override {
    MPIGAN_CHECK(src.canonical(), "reference eltwise: input must be canonical, got {}", src.to_string());
    m_shape = src.shape;
    return src;
  }
  void forward(const Tensor& src, Tensor& dst) override {
    require_shape(src, m_shape, "eltwise", "src");
    ref::eltwise_forward(m_desc, same_size(src, dst, "eltwise"), src.data(), dst.data());
  }
  void backward(const Tensor& dst, const Tensor& diff_dst, Tensor& diff_src) override {
    require_shape(diff_dst, m_shape, "eltwise", "diff_dst");
    ref::eltwise_backward(m_desc, same_size(dst, diff_src, "eltwise"), dst.data(), diff_dst.data(), diff_src.data());
  }

 private:
  EltwiseDesc m_desc;
  Shape m_shape;
};

class RefBatchNorm final : public BatchNormOp {
 public:
  explicit RefBatchNorm(const BatchNormDesc& d) : m_desc(d) {}
  TensorDesc setup(const TensorDesc& src) override {
    MPIGAN_CHECK_SHAPE(src.canonical() && src.shape.rank() >= 2 && src.shape[1] == m_desc.channels,
                       "reference batch_norm {}: input expected canonical with {} channels, found {}",
                       m_desc.to_string(), m_desc.channels, src.to_string());
    m_shape = src.shape;
    return src;
  }
  void forward_training(const Tensor& src, const Tensor& gamma, const Tensor& beta, Tensor& dst, Tensor& mean,
                        Tensor& var) override {
    require_shape(src, m_shape, "batch_norm", "src");
    ref::batch_norm_forward_training(m_shape, m_desc.epsilon, src.data(), gamma.data(), beta.data(), dst.data(),
                                     mean.data(), var.data());
  }
  void forward_inference(const Tensor& src, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                         const Tensor& var, Tensor& dst) override {
    require_shape(src, m_shape, "batch_norm", "src");
    ref::batch_norm_forward_inference(m_shape, m_desc.epsilon, src.data(), gamma.data(), beta.data(), mean.data(),
                                      var.data(), dst.data());
  }
  void backward(const Tensor& src, const Tensor& diff_dst, const Tensor& gamma, const Tensor& mean, const Tensor& var,
                Tensor& diff_src, Tensor& dgamma, Tensor& dbeta) override {
    require_shape(diff_dst, m_shape, "batch_norm", "diff_dst");
    ref::batch_norm_backward(m_shape, m_desc.epsilon, src.data(), diff_dst.data(), gamma.data(), mean.data(),
                             var.data(), diff_src.data(), dgamma.defined() ? dgamma.data() : nullptr,
                             dbeta.defined() ? dbeta.data() : nullptr);
  }

 private:
  BatchNormDesc m_desc;
  Shape m_shape;
};

/// Average pooling and nearest upsampling, one class: a canonical input, the output shape from the
/// descriptor, and the reference kernels @p Forward and @p Backward.
template <class Op, class Desc, void (*Forward)(const Desc&, const Shape&, const float*, float*),
          void (*Backward)(const Desc&, const Shape&, const float*, float*)>
class RefResample final : public Op {
 public:
  RefResample(const Desc& d, const char* name) : m_desc(d), m_name(name) {}
  TensorDesc setup(const TensorDesc& src) override {
    MPIGAN_CHECK(src.canonical(), "reference {}: input must be canonical, got {}", m_name, src.to_string());
    m_src = src.shape;
    return {m_desc.output_shape(src.shape), nullptr};
  }
  void forward(const Tensor& src, Tensor& dst) override {
    require_shape(src, m_src, m_name, "src");
    Forward(m_desc, m_src, src.data(), dst.data());
  }
  void backward(const Tensor& diff_dst, Tensor& diff_src) override {
    require_shape(diff_src, m_src, m_name, "diff_src");
    Backward(m_desc, m_src, diff_dst.data(), diff_src.data());
  }

 private:
  Desc m_desc;
  const char* m_name;
  Shape m_src;
};

using RefAvgPool = RefResample<AvgPoolOp, AvgPoolDesc, ref::avg_pool_forward<float>, ref::avg_pool_backward<float>>;
using RefUpsample = RefResample<UpsampleOp, UpsampleDesc, ref::upsample_forward<float>, ref::upsample_backward<float>>;

}  // namespace

void ReferenceBackend::reorder(const Tensor& src, Tensor& dst) {
  require_canonical(src, "reorder", "src");
  require_shape(dst, src.shape(), "reorder", "dst");
  std::memcpy(dst.data(), src.data(), static_cast<std::size_t>(src.numel()) * sizeof(float));
}

std::unique_ptr<Conv3dOp> ReferenceBackend::make_conv3d(const Conv3dDesc& d) {
  return std::make_unique<RefConv3d>(d);
}
std::unique_ptr<InnerProductOp> ReferenceBackend::make_inner_product(const InnerProductDesc& d) {
  return std::make_unique<RefInnerProduct>(d);
}
std::unique_ptr<EltwiseOp> ReferenceBackend::make_eltwise(const EltwiseDesc& d) {
  return std::make_unique<RefEltwise>(d);
}
std::unique_ptr<BatchNormOp> ReferenceBackend::make_batch_norm(const BatchNormDesc& d) {
  return std::make_unique<RefBatchNorm>(d);
}
std::unique_ptr<AvgPoolOp> ReferenceBackend::make_avg_pool(const AvgPoolDesc& d) {
  return std::make_unique<RefAvgPool>(d, "avg_pool");
}
std::unique_ptr<UpsampleOp> ReferenceBackend::make_upsample(const UpsampleDesc& d) {
  return std::make_unique<RefUpsample>(d, "upsample");
}

void ReferenceBackend::fill(Tensor& x, float value) {
  float* p = x.data();
  for (std::size_t i = 0; i < x.physical_elems(); ++i) p[i] = value;
}

void ReferenceBackend::copy(const Tensor& src, Tensor& dst) {
  std::memcpy(dst.data(), src.data(), same_size(src, dst, "copy") * sizeof(float));
}

void ReferenceBackend::axpby(float a, const Tensor& x, float b, Tensor& y) {
  const std::size_t n = same_size(x, y, "axpby");
  for (std::size_t i = 0; i < n; ++i) y.data()[i] = a * x.data()[i] + (b == 0.0f ? 0.0f : b * y.data()[i]);
}

void ReferenceBackend::mul(const Tensor& a, const Tensor& b, Tensor& out) {
  const std::size_t n = same_size(a, b, "mul");
  same_size(a, out, "mul");
  for (std::size_t i = 0; i < n; ++i) out.data()[i] = a.data()[i] * b.data()[i];
}

double ReferenceBackend::sum_squares(const Tensor& x) {
  double s = 0.0;
  for (std::size_t i = 0; i < x.physical_elems(); ++i) s += static_cast<double>(x.data()[i]) * x.data()[i];
  return s;
}

std::size_t ReferenceBackend::count_nonfinite(const Tensor& x) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < x.physical_elems(); ++i) n += !std::isfinite(x.data()[i]);
  return n;
}

void ReferenceBackend::dropout(const Tensor& src, Tensor& dst, float rate, std::uint64_t seed, std::uint64_t stream,
                               Tensor& mask) {
  const std::size_t n = same_size(src, dst, "dropout");
  MPIGAN_CHECK(mask.physical_elems() >= dropout_mask_floats(n), "reference dropout: mask of {} floats for {} elements",
               mask.physical_elems(), n);
  auto* bits = reinterpret_cast<std::uint32_t*>(mask.data());
  std::fill_n(bits, dropout_mask_floats(n), 0u);
  const float keep_scale = 1.0f / (1.0f - rate);
  for (std::size_t i = 0; i < n; ++i) {
    const bool keep = dropout_uniform(philox_word(seed, stream, i / 2), i) >= rate;
    if (keep) bits[i / 32] |= 1u << (i % 32);
    dst.data()[i] = keep ? src.data()[i] * keep_scale : 0.0f;
  }
}

void ReferenceBackend::dropout_backward(const Tensor& diff_dst, Tensor& diff_src, float rate, const Tensor& mask) {
  const std::size_t n = same_size(diff_dst, diff_src, "dropout_backward");
  const auto* bits = reinterpret_cast<const std::uint32_t*>(mask.data());
  const float keep_scale = 1.0f / (1.0f - rate);
  for (std::size_t i = 0; i < n; ++i)
    diff_src.data()[i] = (bits[i / 32] >> (i % 32)) & 1u ? diff_dst.data()[i] * keep_scale : 0.0f;
}

void ReferenceBackend::sum_per_item(const Tensor& src, Tensor& dst) {
  require_canonical(src, "sum_per_item", "src");
  const std::int64_t n = src.shape()[0], m = src.shape().item_numel();
  require_shape(dst, {n, 1}, "sum_per_item", "dst");
  for (std::int64_t i = 0; i < n; ++i) {
    double s = 0.0;
    for (std::int64_t j = 0; j < m; ++j) s += src.data()[i * m + j];
    dst.data()[i] = static_cast<float>(s);
  }
}

void ReferenceBackend::add_per_item(const Tensor& diff_dst, Tensor& diff_src) {
  require_canonical(diff_src, "add_per_item", "diff_src");
  const std::int64_t n = diff_src.shape()[0], m = diff_src.shape().item_numel();
  require_shape(diff_dst, {n, 1}, "add_per_item", "diff_dst");
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < m; ++j) diff_src.data()[i * m + j] += diff_dst.data()[i];
}

void ReferenceBackend::pow(const Tensor& src, float p, Tensor& dst) {
  const std::size_t n = same_size(src, dst, "pow");
  for (std::size_t i = 0; i < n; ++i) dst.data()[i] = std::pow(std::max(src.data()[i], 0.0f), p);
}

void ReferenceBackend::pow_backward_add(const Tensor& src, float p, const Tensor& diff_dst, Tensor& diff_src) {
  const std::size_t n = same_size(src, diff_src, "pow_backward_add");
  for (std::size_t i = 0; i < n; ++i) {
    const float x = src.data()[i];
    if (x > 0.0f) diff_src.data()[i] += p * std::pow(x, p - 1.0f) * diff_dst.data()[i];
  }
}

void ReferenceBackend::sgd_update(Tensor& w, const Tensor& g, Tensor& v, const SgdStep& s) {
  const std::size_t n = same_size(w, g, "sgd_update");
  for (std::size_t i = 0; i < n; ++i) {
    if (s.momentum == 0.0f) {
      w.data()[i] -= s.lr * g.data()[i];
      continue;
    }
    const float vel = s.momentum * v.data()[i] - s.lr * g.data()[i];
    v.data()[i] = vel;
    w.data()[i] += s.nesterov ? s.momentum * vel - s.lr * g.data()[i] : vel;
  }
  if (s.mirror != nullptr) copy(w, *s.mirror);
}

void ReferenceBackend::rmsprop_update(Tensor& w, const Tensor& g, Tensor& ms, const RmspropStep& s) {
  const std::size_t n = same_size(w, g, "rmsprop_update");
  for (std::size_t i = 0; i < n; ++i) {
    const float gi = g.data()[i];
    ms.data()[i] = s.rho * ms.data()[i] + (1.0f - s.rho) * gi * gi;
    w.data()[i] -= s.lr * gi / (std::sqrt(ms.data()[i]) + s.epsilon);
  }
  if (s.mirror != nullptr) copy(w, *s.mirror);
}

void ReferenceBackend::adam_update(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s) {
  const std::size_t n = same_size(w, g, "adam_update");
  for (std::size_t i = 0; i < n; ++i) {
    const float gi = g.data()[i];
    m.data()[i] = s.beta1 * m.data()[i] + (1.0f - s.beta1) * gi;
    v.data()[i] = s.beta2 * v.data()[i] + (1.0f - s.beta2) * gi * gi;
    w.data()[i] -= s.lr_t * m.data()[i] / (std::sqrt(v.data()[i]) + s.epsilon);
  }
  if (s.mirror != nullptr) copy(w, *s.mirror);
}

}  // namespace mpigan
