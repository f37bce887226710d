// oneDNN element-wise activations and batch normalisation. Both work in whatever layout the
// previous op produced and keep it.
#include "mpigan/backend/cpu/cpu_ops.hpp"
#include "mpigan/backend/cpu/dnnl_common.hpp"

#include <algorithm>

namespace mpigan::cpu {
namespace {

using dnnl::algorithm;
using dnnl::prop_kind;
using flags = dnnl::normalization_flags;

// relu with negative slope alpha covers relu (alpha 0) and leaky_relu; logistic is sigmoid. The
// *_use_dst_for_bwd variants compute the backward from the forward output (backend.hpp contract).
algorithm to_dnnl(EltwiseKind k) {
  return k == EltwiseKind::sigmoid ? algorithm::eltwise_logistic_use_dst_for_bwd
                                   : algorithm::eltwise_relu_use_dst_for_bwd;
}

class CpuEltwise final : public EltwiseOp {
 public:
  CpuEltwise(const EltwiseDesc& d, DnnlContext& ctx) : m_desc(d), m_ctx(ctx) {}

  TensorDesc setup(const TensorDesc& src) override {
    m_src = src;
    m_md = md_of(src);
    m_bwd.reset();
    dnnl_call("eltwise " + m_desc.to_string() + " " + src.to_string(), [&] {
      dnnl::eltwise_forward::desc d(prop_kind::forward_training, to_dnnl(m_desc.kind), m_md, m_desc.alpha, 0.0f);
      m_fwd_pd = dnnl::eltwise_forward::primitive_desc(d, m_ctx.attr(), m_ctx.engine);
      m_fwd = dnnl::eltwise_forward(m_fwd_pd);
    });
    return src;
  }

  void forward(const Tensor& src, Tensor& dst) override {
    m_ctx.run(m_fwd, {{DNNL_ARG_SRC, make_memory(m_md, m_ctx, src.data())},
                      {DNNL_ARG_DST, make_memory(m_md, m_ctx, dst.data())}});
  }

  void backward(const Tensor& dst, const Tensor& diff_dst, Tensor& diff_src) override {
    const auto& bwd = m_bwd.get("eltwise backward", m_desc, [&] {
      dnnl::eltwise_backward::desc d(to_dnnl(m_desc.kind), m_md, m_md, m_desc.alpha, 0.0f);
      return dnnl::eltwise_backward::primitive_desc(d, m_ctx.attr(), m_ctx.engine, m_fwd_pd);
    });
    m_ctx.run(bwd, {{DNNL_ARG_DST, make_memory(m_md, m_ctx, dst.data())},
                    {DNNL_ARG_DIFF_DST, make_memory(m_md, m_ctx, diff_dst.data())},
                    {DNNL_ARG_DIFF_SRC, make_memory(m_md, m_ctx, diff_src.data())}});
  }

 private:
  EltwiseDesc m_desc;
  DnnlContext& m_ctx;
  TensorDesc m_src;
  dnnl::memory::desc m_md;
  dnnl::eltwise_forward::primitive_desc m_fwd_pd;
  dnnl::eltwise_forward m_fwd;
  LazyPrimitive<dnnl::eltwise_backward> m_bwd;
};

class CpuBatchNorm final : public BatchNormOp {
 public:
  CpuBatchNorm(const BatchNormDesc& d, DnnlContext& ctx) : m_desc(d), m_ctx(ctx) {}

  TensorDesc setup(const TensorDesc& src) override {
    MPIGAN_CHECK_SHAPE(src.shape.rank() >= 2 && src.shape[1] == m_desc.channels,
                       "batch_norm {}: input expected {} channels, found {}", m_desc.to_string(), m_desc.channels,
                       src.to_string());
    m_md = md_of(src);
    m_infer.reset();
    m_bwd.reset();
    dnnl_call("batch_norm " + m_desc.to_string() + " " + src.to_string(), [&] {
      dnnl::batch_normalization_forward::desc d(prop_kind::forward_training, m_md, m_desc.epsilon,
                                                flags::use_scale | flags::use_shift);
      m_train_pd = dnnl::batch_normalization_forward::primitive_desc(d, m_ctx.attr(), m_ctx.engine);
      m_train = dnnl::batch_normalization_forward(m_train_pd);
    });
    return src;
  }

  void forward_training(const Tensor& src, const Tensor& gamma, const Tensor& beta, Tensor& dst, Tensor& mean,
                        Tensor& var) override {
    m_ctx.run(m_train, {{DNNL_ARG_SRC, mem(src)},
                        {DNNL_ARG_SCALE, vec(gamma)},
                        {DNNL_ARG_SHIFT, vec(beta)},
                        {DNNL_ARG_DST, mem(dst)},
                        {DNNL_ARG_MEAN, vec(mean)},
                        {DNNL_ARG_VARIANCE, vec(var)}});
  }

  void forward_inference(const Tensor& src, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                         const Tensor& var, Tensor& dst) override {
    const auto& infer = m_infer.get("batch_norm inference", m_desc, [&] {
      dnnl::batch_normalization_forward::desc d(prop_kind::forward_inference, m_md, m_desc.epsilon,
                                                flags::use_global_stats | flags::use_scale | flags::use_shift);
      return dnnl::batch_normalization_forward::primitive_desc(d, m_ctx.attr(), m_ctx.engine);
    });
    m_ctx.run(infer, {{DNNL_ARG_SRC, mem(src)},
                      {DNNL_ARG_SCALE, vec(gamma)},
                      {DNNL_ARG_SHIFT, vec(beta)},
                      {DNNL_ARG_MEAN, vec(mean)},
                      {DNNL_ARG_VARIANCE, vec(var)},
                      {DNNL_ARG_DST, mem(dst)}});
  }

  void backward(const Tensor& src, const Tensor& diff_dst, const Tensor& gamma, const Tensor& mean, const Tensor& var,
                Tensor& diff_src, Tensor& dgamma, Tensor& dbeta) override {
    // oneDNN 2.6 has no backward_data implementation with scale/shift, so the full backward runs
    // and the parameter gradients go to scratch buffers, added to the caller's only when asked.
    // The shift is an input of the primitive even though the math does not use it.
    const auto& bwd = m_bwd.get("batch_norm backward", m_desc, [&] {
      dnnl::batch_normalization_backward::desc d(prop_kind::backward, m_md, m_md, m_desc.epsilon,
                                                 flags::use_scale | flags::use_shift);
      m_dscale = dnnl::memory(plain_md({m_desc.channels}), m_ctx.engine);
      m_dshift = dnnl::memory(plain_md({m_desc.channels}), m_ctx.engine);
      m_zero_shift = dnnl::memory(plain_md({m_desc.channels}), m_ctx.engine);
      std::fill_n(static_cast<float*>(m_zero_shift.get_data_handle()), m_desc.channels, 0.0f);
      return dnnl::batch_normalization_backward::primitive_desc(d, m_ctx.attr(), m_ctx.engine, m_train_pd);
    });
    m_ctx.run(bwd, {{DNNL_ARG_SRC, mem(src)},
                    {DNNL_ARG_DIFF_DST, mem(diff_dst)},
                    {DNNL_ARG_SCALE, vec(gamma)},
                    {DNNL_ARG_SHIFT, m_zero_shift},
                    {DNNL_ARG_MEAN, vec(mean)},
                    {DNNL_ARG_VARIANCE, vec(var)},
                    {DNNL_ARG_DIFF_SRC, mem(diff_src)},
                    {DNNL_ARG_DIFF_SCALE, m_dscale},
                    {DNNL_ARG_DIFF_SHIFT, m_dshift}});
    const auto* ds = static_cast<const float*>(m_dscale.get_data_handle());
    const auto* dh = static_cast<const float*>(m_dshift.get_data_handle());
    for (std::int64_t c = 0; c < m_desc.channels; ++c) {
      if (dgamma.defined()) dgamma.data()[c] += ds[c];
      if (dbeta.defined()) dbeta.data()[c] += dh[c];
    }
  }

 private:
  dnnl::memory mem(const Tensor& t) const { return make_memory(m_md, m_ctx, t.data()); }
  dnnl::memory vec(const Tensor& t) const { return make_memory(plain_md({m_desc.channels}), m_ctx, t.data()); }

  BatchNormDesc m_desc;
  DnnlContext& m_ctx;
  dnnl::memory::desc m_md;
  dnnl::batch_normalization_forward::primitive_desc m_train_pd;
  dnnl::batch_normalization_forward m_train;
  LazyPrimitive<dnnl::batch_normalization_forward> m_infer;
  LazyPrimitive<dnnl::batch_normalization_backward> m_bwd;
  dnnl::memory m_dscale, m_dshift, m_zero_shift;
};

}  // namespace

std::unique_ptr<EltwiseOp> make_eltwise(const EltwiseDesc& d, DnnlContext& ctx) {
  return std::make_unique<CpuEltwise>(d, ctx);
}
std::unique_ptr<BatchNormOp> make_batch_norm(const BatchNormDesc& d, DnnlContext& ctx) {
  return std::make_unique<CpuBatchNorm>(d, ctx);
}

}  // namespace mpigan::cpu
