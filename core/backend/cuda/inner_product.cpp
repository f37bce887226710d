// Inner product (dense layer) with cuBLAS SGEMM; the bias with the kernels of inner_product.cu.
//
//   forward:          dst(N,OC)     = src(N,IC) * W(OC,IC)^T + bias(OC)
//   backward_data:    diff_src(N,IC) = diff_dst(N,OC) * W(OC,IC)                (overwrites, beta 0)
//   backward_weights: diff_W(OC,IC) += diff_dst(N,OC)^T * src(N,IC)              (accumulates, beta 1)
//                     diff_bias(OC) += column sums of diff_dst
//
// Convention conversion (the one place): cuBLAS is column-major, and a row-major (R,C) matrix is
// the column-major (C,R) matrix with leading dimension C, i.e. its transpose. So each row-major
// product A*B is computed as the column-major product B^T*A^T, which lands in memory as the
// row-major result:
//   dst^T(OC,N)     = op_T(W as (IC,OC)) * (src as (IC,N))          sgemm(T, N, OC, N, IC)
//   diff_src^T(IC,N) = (W as (IC,OC)) * (diff_dst as (OC,N))         sgemm(N, N, IC, N, OC)
//   diff_W^T(IC,OC)  = (src as (IC,N)) * op_T(diff_dst as (OC,N))    sgemm(N, T, IC, OC, N)
#include "mpigan/backend/cuda/cuda_ops.hpp"
#include "mpigan/backend/cuda/launchers.hpp"
#include "mpigan/core/error.hpp"

namespace mpigan::cuda {
namespace {

class CudaInnerProduct final : public InnerProductOp {
 public:
  CudaInnerProduct(const InnerProductDesc& d, Context& ctx) : m_desc(d), m_ctx(ctx) {
    MPIGAN_CHECK(d.ic >= 1 && d.oc >= 1, "cuda inner_product {}: ic and oc must be >= 1", d.to_string());
  }

  TensorDesc setup(const TensorDesc& src) override {
    require_canonical_desc(src, "inner_product");
    MPIGAN_CHECK_SHAPE(src.shape.rank() == 2 && src.shape[1] == m_desc.ic,
                       "cuda inner_product {}: input expected (N,{}), found {}", m_desc.to_string(), m_desc.ic,
                       src.to_string());
    m_n = src.shape[0];
    m_n_int = to_int(m_n, "inner_product batch");
    m_ic = to_int(m_desc.ic, "inner_product ic");
    m_oc = to_int(m_desc.oc, "inner_product oc");
    return {{m_n, m_desc.oc}, nullptr};
  }

  void forward(const Tensor& src, const Tensor& w, const Tensor& b, Tensor& dst) override {
    require_device(src, {m_n, m_desc.ic}, "inner_product", "src");
    require_device(w, {m_desc.oc, m_desc.ic}, "inner_product", "weights");
    require_device(dst, {m_n, m_desc.oc}, "inner_product", "dst");
    if (m_desc.bias) require_device(b, {m_desc.oc}, "inner_product", "bias");
    m_ctx.activate();
    if (m_n == 0) return;
    const float one = 1.0f, zero = 0.0f;
    MPIGAN_CUBLAS_CHECK(cublasSgemm(m_ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, m_oc, m_n_int, m_ic, &one, w.data(), m_ic,
                                    src.data(), m_ic, &zero, dst.data(), m_oc));
    if (m_desc.bias) kernels::add_bias_rows(m_ctx.stream(), dst.data(), b.data(), m_n, m_desc.oc);
  }

  void backward_data(const Tensor& diff_dst, const Tensor& w, Tensor& diff_src) override {
    require_device(diff_dst, {m_n, m_desc.oc}, "inner_product", "diff_dst");
    require_device(w, {m_desc.oc, m_desc.ic}, "inner_product", "weights");
    require_device(diff_src, {m_n, m_desc.ic}, "inner_product", "diff_src");
    m_ctx.activate();
    if (m_n == 0) return;
    const float one = 1.0f, zero = 0.0f;
    MPIGAN_CUBLAS_CHECK(cublasSgemm(m_ctx.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, m_ic, m_n_int, m_oc, &one, w.data(), m_ic,
                                    diff_dst.data(), m_oc, &zero, diff_src.data(), m_ic));
  }

  void backward_weights(const Tensor& src, const Tensor& diff_dst, Tensor& dw, Tensor& db) override {
    require_device(src, {m_n, m_desc.ic}, "inner_product", "src");
    require_device(diff_dst, {m_n, m_desc.oc}, "inner_product", "diff_dst");
    require_device(dw, {m_desc.oc, m_desc.ic}, "inner_product", "diff_weights");
    const bool with_bias = m_desc.bias && db.defined();
    if (with_bias) require_device(db, {m_desc.oc}, "inner_product", "diff_bias");
    m_ctx.activate();
    if (m_n == 0) return;
    const float one = 1.0f;
    MPIGAN_CUBLAS_CHECK(cublasSgemm(m_ctx.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, m_ic, m_oc, m_n_int, &one, src.data(),
                                    m_ic, diff_dst.data(), m_oc, &one, dw.data(), m_ic));
    if (with_bias) kernels::accumulate_bias_grad(m_ctx.stream(), diff_dst.data(), m_n, m_desc.oc, db.data());
  }

 private:
  InnerProductDesc m_desc;
  Context& m_ctx;
  std::int64_t m_n = 0;
  int m_n_int = 0, m_ic = 0, m_oc = 0;
};

}  // namespace

std::unique_ptr<InnerProductOp> make_inner_product(const InnerProductDesc& d, Context& ctx) {
  return std::make_unique<CudaInnerProduct>(d, ctx);
}

}  // namespace mpigan::cuda
