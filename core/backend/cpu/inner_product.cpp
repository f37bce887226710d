// oneDNN inner product (dense layer). src/dst are canonical (N,IC)/(N,OC); the weights are
// reordered from canonical OI into oneDNN's preferred format at this edge.
#include "mpigan/backend/cpu/cpu_ops.hpp"
#include "mpigan/backend/cpu/dnnl_common.hpp"

#include <Eigen/Core>

namespace mpigan::cpu {
namespace {

using dnnl::prop_kind;

class CpuInnerProduct final : public InnerProductOp {
 public:
  CpuInnerProduct(const InnerProductDesc& d, DnnlContext& ctx) : m_desc(d), m_ctx(ctx) {}

  TensorDesc setup(const TensorDesc& src) override {
    MPIGAN_CHECK_SHAPE(src.canonical() && src.shape.rank() == 2 && src.shape[1] == m_desc.ic,
                       "inner_product {}: input expected canonical (N,{}), found {}", m_desc.to_string(), m_desc.ic,
                       src.to_string());
    m_n = src.shape[0];
    m_has_bwd_data = m_has_bwd_weights = false;
    dnnl_call("inner_product " + m_desc.to_string(), [&] {
      dnnl::inner_product_forward::desc d(prop_kind::forward_training, src_md(), any_md(w_shape()), bias_md(),
                                          dst_md());
      m_fwd_pd = dnnl::inner_product_forward::primitive_desc(d, m_ctx.attr(), m_ctx.engine);
      m_fwd = dnnl::inner_product_forward(m_fwd_pd);
      m_w_fwd = Staging(plain_md(w_shape()), m_fwd_pd.weights_desc(), m_ctx);
    });
    return {{m_n, m_desc.oc}, nullptr};
  }

  void forward(const Tensor& src, const Tensor& w, const Tensor& b, Tensor& dst) override {
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, make_memory(src_md(), m_ctx, src.data())},
                                               {DNNL_ARG_WEIGHTS, m_w_fwd.in(w.data(), m_ctx)},
                                               {DNNL_ARG_DST, make_memory(dst_md(), m_ctx, dst.data())}};
    if (m_desc.bias) args.insert({DNNL_ARG_BIAS, make_memory(bias_md(), m_ctx, b.data())});
    m_ctx.run(m_fwd, args);
  }

  void backward_data(const Tensor& diff_dst, const Tensor& w, Tensor& diff_src) override {
    if (!m_has_bwd_data) {
      dnnl_call("inner_product backward data " + m_desc.to_string(), [&] {
        dnnl::inner_product_backward_data::desc d(src_md(), any_md(w_shape()), dst_md());
        m_bwd_data_pd = dnnl::inner_product_backward_data::primitive_desc(d, m_ctx.attr(), m_ctx.engine, m_fwd_pd);
        m_bwd_data = dnnl::inner_product_backward_data(m_bwd_data_pd);
        m_w_bwd = Staging(plain_md(w_shape()), m_bwd_data_pd.weights_desc(), m_ctx);
      });
      m_has_bwd_data = true;
    }
    m_ctx.run(m_bwd_data, {{DNNL_ARG_DIFF_DST, make_memory(dst_md(), m_ctx, diff_dst.data())},
                           {DNNL_ARG_WEIGHTS, m_w_bwd.in(w.data(), m_ctx)},
                           {DNNL_ARG_DIFF_SRC, make_memory(src_md(), m_ctx, diff_src.data())}});
  }

  void backward_weights(const Tensor& src, const Tensor& diff_dst, Tensor& dw, Tensor& db) override {
    if (!m_has_bwd_weights) {
      dnnl_call("inner_product backward weights " + m_desc.to_string(), [&] {
        dnnl::inner_product_backward_weights::desc d(src_md(), any_md(w_shape()), bias_md(), dst_md());
        m_bwd_w_pd = dnnl::inner_product_backward_weights::primitive_desc(d, m_ctx.attr(), m_ctx.engine, m_fwd_pd);
        m_bwd_w = dnnl::inner_product_backward_weights(m_bwd_w_pd);
        m_dw_buffer = dnnl::memory(m_bwd_w_pd.diff_weights_desc(), m_ctx.engine);
        m_dw_acc = AccumulatingReorder(m_bwd_w_pd.diff_weights_desc(), plain_md(w_shape()), m_ctx);
        if (m_desc.bias) m_db_buffer = dnnl::memory(bias_md(), m_ctx.engine);
      });
      m_has_bwd_weights = true;
    }
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, make_memory(src_md(), m_ctx, src.data())},
                                               {DNNL_ARG_DIFF_DST, make_memory(dst_md(), m_ctx, diff_dst.data())},
                                               {DNNL_ARG_DIFF_WEIGHTS, m_dw_buffer}};
    if (m_desc.bias) args.insert({DNNL_ARG_DIFF_BIAS, m_db_buffer});
    m_ctx.run(m_bwd_w, args);
    m_dw_acc.run(m_dw_buffer, dw.data(), m_ctx);
    if (m_desc.bias && db.defined()) {
      Eigen::Map<Eigen::VectorXf>(db.data(), m_desc.oc) +=
          Eigen::Map<const Eigen::VectorXf>(static_cast<const float*>(m_db_buffer.get_data_handle()), m_desc.oc);
    }
  }

 private:
  Shape w_shape() const { return {m_desc.oc, m_desc.ic}; }
  dnnl::memory::desc src_md() const { return plain_md({m_n, m_desc.ic}); }
  dnnl::memory::desc dst_md() const { return plain_md({m_n, m_desc.oc}); }
  dnnl::memory::desc bias_md() const { return m_desc.bias ? plain_md({m_desc.oc}) : dnnl::memory::desc(); }

  InnerProductDesc m_desc;
  DnnlContext& m_ctx;
  std::int64_t m_n = 0;
  dnnl::inner_product_forward::primitive_desc m_fwd_pd;
  dnnl::inner_product_forward m_fwd;
  Staging m_w_fwd, m_w_bwd;
  bool m_has_bwd_data = false, m_has_bwd_weights = false;
  dnnl::inner_product_backward_data::primitive_desc m_bwd_data_pd;
  dnnl::inner_product_backward_data m_bwd_data;
  dnnl::inner_product_backward_weights::primitive_desc m_bwd_w_pd;
  dnnl::inner_product_backward_weights m_bwd_w;
  dnnl::memory m_dw_buffer, m_db_buffer;
  AccumulatingReorder m_dw_acc;
};

}  // namespace

std::unique_ptr<InnerProductOp> make_inner_product(const InnerProductDesc& d, DnnlContext& ctx) {
  return std::make_unique<CpuInnerProduct>(d, ctx);
}

}  // namespace mpigan::cpu
