// Element-wise activation op (kernels in eltwise.cu). Works on the physical buffer; the backward
// takes the forward OUTPUT (backend.hpp), so forward may run in place over its input.
#include "mpigan/backend/cuda/cuda_ops.hpp"
#include "mpigan/backend/cuda/launchers.hpp"
#include "mpigan/core/error.hpp"

namespace mpigan::cuda {
namespace {

/// The one conversion from the API's kinds to the kernels' codes.
Act to_act(EltwiseKind k) {
  switch (k) {
    case EltwiseKind::relu:
      return Act::relu;
    case EltwiseKind::leaky_relu:
      return Act::leaky_relu;
    case EltwiseKind::sigmoid:
      return Act::sigmoid;
  }
  MPIGAN_FATAL("cuda eltwise: unknown kind {}", static_cast<int>(k));
}

class CudaEltwise final : public EltwiseOp {
 public:
  CudaEltwise(const EltwiseDesc& d, Context& ctx) : m_desc(d), m_act(to_act(d.kind)), m_ctx(ctx) {
    // The backward from y needs y > 0 exactly where x > 0, which a negative slope would break.
    MPIGAN_CHECK(d.kind != EltwiseKind::leaky_relu || d.alpha >= 0.0f,
                 "cuda eltwise {}: alpha must be >= 0 (the backward is computed from the output)", d.to_string());
  }

  TensorDesc setup(const TensorDesc& src) override {
    require_canonical_desc(src, "eltwise");
    m_shape = src.shape;
    return src;
  }

  void forward(const Tensor& src, Tensor& dst) override {
    require_device(src, m_shape, "eltwise", "src");
    require_device(dst, m_shape, "eltwise", "dst");
    m_ctx.activate();
    kernels::eltwise_forward(m_ctx.stream(), m_act, m_desc.alpha, src.data(), dst.data(), src.physical_elems());
  }

  void backward(const Tensor& dst, const Tensor& diff_dst, Tensor& diff_src) override {
    require_device(dst, m_shape, "eltwise", "dst");
    require_device(diff_dst, m_shape, "eltwise", "diff_dst");
    require_device(diff_src, m_shape, "eltwise", "diff_src");
    m_ctx.activate();
    kernels::eltwise_backward(m_ctx.stream(), m_act, m_desc.alpha, dst.data(), diff_dst.data(), diff_src.data(),
                              dst.physical_elems());
  }

 private:
  EltwiseDesc m_desc;
  Act m_act;
  Context& m_ctx;
  Shape m_shape;
};

}  // namespace

std::unique_ptr<EltwiseOp> make_eltwise(const EltwiseDesc& d, Context& ctx) {
  return std::make_unique<CudaEltwise>(d, ctx);
}

}  // namespace mpigan::cuda
