// Batch normalisation op (kernels in batch_norm.cu; see its header for the plan of each call).
// Statistics in the reference's conventions: batch mean and biased batch variance out of
// forward_training, back into backward; running statistics are the layer's business.
#include "mpigan/backend/cuda/cuda_ops.hpp"
#include "mpigan/backend/cuda/launchers.hpp"
#include "mpigan/core/error.hpp"

namespace mpigan::cuda {
namespace {

class CudaBatchNorm final : public BatchNormOp {
 public:
  CudaBatchNorm(const BatchNormDesc& d, Context& ctx) : m_desc(d), m_ctx(ctx) {
    MPIGAN_CHECK(d.channels >= 1 && d.epsilon > 0.0f, "cuda batch_norm {}: channels must be >= 1 and epsilon > 0",
                 d.to_string());
  }

  TensorDesc setup(const TensorDesc& src) override {
    require_canonical_desc(src, "batch_norm");
    MPIGAN_CHECK_SHAPE(src.shape.rank() >= 2 && src.shape[1] == m_desc.channels,
                       "cuda batch_norm {}: input expected {} channels (dim 1), found {}", m_desc.to_string(),
                       m_desc.channels, src.to_string());
    m_shape = src.shape;
    m_geometry.n = m_shape[0];
    m_geometry.c = m_shape[1];
    m_geometry.s = m_shape[0] * m_shape[1] == 0 ? 0 : m_shape.numel() / (m_shape[0] * m_shape[1]);
    m_geometry.splits = bn_splits(m_geometry.per_channel());
    // The partial-sum grid is (C, splits): gridDim.y is limited to 65535, splits to 1024.
    (void)to_int(m_geometry.c, "batch_norm channels");
    m_ctx.reserve_workspace(kernels::bn_scratch_bytes(m_geometry));
    return src;
  }

  void forward_training(const Tensor& src, const Tensor& gamma, const Tensor& beta, Tensor& dst, Tensor& batch_mean,
                        Tensor& batch_var) override {
    require_device(src, m_shape, "batch_norm", "src");
    require_device(dst, m_shape, "batch_norm", "dst");
    require_params(gamma, "gamma");
    require_params(beta, "beta");
    require_params(batch_mean, "batch_mean");
    require_params(batch_var, "batch_var");
    m_ctx.activate();
    kernels::bn_forward_training(m_ctx.stream(), m_geometry, m_desc.epsilon, src.data(), gamma.data(), beta.data(),
                                 dst.data(), batch_mean.data(), batch_var.data(), scratch());
  }

  void forward_inference(const Tensor& src, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                         const Tensor& var, Tensor& dst) override {
    require_device(src, m_shape, "batch_norm", "src");
    require_device(dst, m_shape, "batch_norm", "dst");
    require_params(gamma, "gamma");
    require_params(beta, "beta");
    require_params(mean, "mean");
    require_params(var, "var");
    m_ctx.activate();
    kernels::bn_forward_inference(m_ctx.stream(), m_geometry, m_desc.epsilon, src.data(), gamma.data(), beta.data(),
                                  mean.data(), var.data(), dst.data(), scratch());
  }

  void backward(const Tensor& src, const Tensor& diff_dst, const Tensor& gamma, const Tensor& batch_mean,
                const Tensor& batch_var, Tensor& diff_src, Tensor& diff_gamma, Tensor& diff_beta) override {
    require_device(src, m_shape, "batch_norm", "src");
    require_device(diff_dst, m_shape, "batch_norm", "diff_dst");
    require_device(diff_src, m_shape, "batch_norm", "diff_src");
    require_params(gamma, "gamma");
    require_params(batch_mean, "batch_mean");
    require_params(batch_var, "batch_var");
    if (diff_gamma.defined()) require_params(diff_gamma, "diff_gamma");
    if (diff_beta.defined()) require_params(diff_beta, "diff_beta");
    m_ctx.activate();
    kernels::bn_backward(m_ctx.stream(), m_geometry, m_desc.epsilon, src.data(), diff_dst.data(), gamma.data(),
                         batch_mean.data(), batch_var.data(), diff_src.data(),
                         diff_gamma.defined() ? diff_gamma.data() : nullptr,
                         diff_beta.defined() ? diff_beta.data() : nullptr, scratch());
  }

 private:
  void require_params(const Tensor& t, const char* role) const {
    require_device(t, "batch_norm", role);
    MPIGAN_CHECK_SHAPE(t.numel() == m_desc.channels, "cuda batch_norm {}: {} expected {} values, found shape {}",
                       m_desc.to_string(), role, m_desc.channels, t.shape());
  }
  void* scratch() { return m_ctx.workspace(kernels::bn_scratch_bytes(m_geometry)); }

  BatchNormDesc m_desc;
  Context& m_ctx;
  Shape m_shape;
  BnGeometry m_geometry;
};

}  // namespace

std::unique_ptr<BatchNormOp> make_batch_norm(const BatchNormDesc& d, Context& ctx) {
  return std::make_unique<CudaBatchNorm>(d, ctx);
}

}  // namespace mpigan::cuda
