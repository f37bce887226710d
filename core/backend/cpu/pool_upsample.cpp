// oneDNN average pooling and nearest-neighbour resampling (UpSampling3D). Both keep the layout
// of their input; the output format is chosen by oneDNN ('any') and returned to the next layer.
#include "mpigan/backend/cpu/cpu_ops.hpp"
#include "mpigan/backend/cpu/dnnl_common.hpp"

namespace mpigan::cpu {
namespace {

using dnnl::algorithm;
using dnnl::prop_kind;

class CpuAvgPool final : public AvgPoolOp {
 public:
  CpuAvgPool(const AvgPoolDesc& d, DnnlContext& ctx) : m_desc(d), m_ctx(ctx) {}

  TensorDesc setup(const TensorDesc& src) override {
    const Shape dst_shape = m_desc.output_shape(src.shape);
    m_src_md = md_of(src);
    m_bwd.reset();
    // No padding; oneDNN requires out = (in - k + pad_l + pad_r)/stride + 1 exactly, so a window
    // that does not fit at the end (23 -> 11 with k = s = 2) gets a negative right padding.
    dnnl::memory::dims pad_r(3);
    for (int i = 0; i < 3; ++i)
      pad_r[i] = (dst_shape[2 + i] - 1) * m_desc.stride[i] + m_desc.kernel[i] - src.shape[2 + i];
    m_pad_r = pad_r;
    dnnl_call("avg_pool " + m_desc.to_string() + " " + src.to_string(), [&] {
      dnnl::pooling_forward::desc d(prop_kind::forward_training, algorithm::pooling_avg_include_padding, m_src_md,
                                    any_md(dst_shape), to_dims(m_desc.stride), to_dims(m_desc.kernel), {0, 0, 0},
                                    m_pad_r);
      m_fwd_pd = dnnl::pooling_forward::primitive_desc(d, m_ctx.attr(), m_ctx.engine);
      m_fwd = dnnl::pooling_forward(m_fwd_pd);
    });
    m_dst = desc_of(dst_shape, m_fwd_pd.dst_desc());
    return m_dst;
  }

  void forward(const Tensor& src, Tensor& dst) override {
    m_ctx.run(m_fwd, {{DNNL_ARG_SRC, make_memory(m_src_md, m_ctx, src.data())},
                      {DNNL_ARG_DST, make_memory(m_dst, m_ctx, dst.data())}});
  }

  void backward(const Tensor& diff_dst, Tensor& diff_src) override {
    const auto& bwd = m_bwd.get("avg_pool backward", m_desc, [&] {
      dnnl::pooling_backward::desc d(algorithm::pooling_avg_include_padding, m_src_md, md_of(m_dst),
                                     to_dims(m_desc.stride), to_dims(m_desc.kernel), {0, 0, 0}, m_pad_r);
      return dnnl::pooling_backward::primitive_desc(d, m_ctx.attr(), m_ctx.engine, m_fwd_pd);
    });
    m_ctx.run(bwd, {{DNNL_ARG_DIFF_DST, make_memory(m_dst, m_ctx, diff_dst.data())},
                    {DNNL_ARG_DIFF_SRC, make_memory(m_src_md, m_ctx, diff_src.data())}});
  }

 private:
  AvgPoolDesc m_desc;
  DnnlContext& m_ctx;
  dnnl::memory::desc m_src_md;
  dnnl::memory::dims m_pad_r;
  TensorDesc m_dst;
  dnnl::pooling_forward::primitive_desc m_fwd_pd;
  dnnl::pooling_forward m_fwd;
  LazyPrimitive<dnnl::pooling_backward> m_bwd;
};

class CpuUpsample final : public UpsampleOp {
 public:
  CpuUpsample(const UpsampleDesc& d, DnnlContext& ctx) : m_desc(d), m_ctx(ctx) {}

  TensorDesc setup(const TensorDesc& src) override {
    const Shape dst_shape = m_desc.output_shape(src.shape);
    m_src_md = md_of(src);
    m_bwd.reset();
    // oneDNN nearest resampling maps output index o to input round((o + 0.5)/f - 0.5), which for
    // an integer factor f is floor(o / f): the same voxel repetition as Keras UpSampling3D.
    dnnl_call("upsample " + m_desc.to_string() + " " + src.to_string(), [&] {
      dnnl::resampling_forward::desc d(prop_kind::forward_training, algorithm::resampling_nearest, m_src_md,
                                       any_md(dst_shape));
      m_fwd_pd = dnnl::resampling_forward::primitive_desc(d, m_ctx.attr(), m_ctx.engine);
      m_fwd = dnnl::resampling_forward(m_fwd_pd);
    });
    m_dst = desc_of(dst_shape, m_fwd_pd.dst_desc());
    return m_dst;
  }

  void forward(const Tensor& src, Tensor& dst) override {
    m_ctx.run(m_fwd, {{DNNL_ARG_SRC, make_memory(m_src_md, m_ctx, src.data())},
                      {DNNL_ARG_DST, make_memory(m_dst, m_ctx, dst.data())}});
  }

  void backward(const Tensor& diff_dst, Tensor& diff_src) override {
    const auto& bwd = m_bwd.get("upsample backward", m_desc, [&] {
      dnnl::resampling_backward::desc d(algorithm::resampling_nearest, m_src_md, md_of(m_dst));
      return dnnl::resampling_backward::primitive_desc(d, m_ctx.attr(), m_ctx.engine, m_fwd_pd);
    });
    m_ctx.run(bwd, {{DNNL_ARG_DIFF_DST, make_memory(m_dst, m_ctx, diff_dst.data())},
                    {DNNL_ARG_DIFF_SRC, make_memory(m_src_md, m_ctx, diff_src.data())}});
  }

 private:
  UpsampleDesc m_desc;
  DnnlContext& m_ctx;
  dnnl::memory::desc m_src_md;
  TensorDesc m_dst;
  dnnl::resampling_forward::primitive_desc m_fwd_pd;
  dnnl::resampling_forward m_fwd;
  LazyPrimitive<dnnl::resampling_backward> m_bwd;
};

}  // namespace

std::unique_ptr<AvgPoolOp> make_avg_pool(const AvgPoolDesc& d, DnnlContext& ctx) {
  return std::make_unique<CpuAvgPool>(d, ctx);
}
std::unique_ptr<UpsampleOp> make_upsample(const UpsampleDesc& d, DnnlContext& ctx) {
  return std::make_unique<CpuUpsample>(d, ctx);
}

}  // namespace mpigan::cpu
