// Average pooling with cuDNN (cudnnPoolingForward/Backward), 5D, no padding, floor:
// out = (in - k)/s + 1 (Keras AveragePooling3D 'valid'). Inputs whose extent is not covered by
// whole windows (23 -> 11 with k = s = 2) leave their last planes out; their gradient is 0.
//
// Conventions: CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING with zero padding divides by the full
// window size, as the reference does; NaN propagation off (cuDNN's default for averages, which
// propagate NaN arithmetically anyway). The backward overwrites diff_src (beta = 0).
//
// Interface note: cudnnPoolingBackward takes the forward's y and x, which average pooling does not
// read; our backward(diff_dst, diff_src) does not have them. diff_dst stands in for y (both are
// read-only inputs) and the shared workspace for x (reserved in setup), so that no input aliases
// the output diff_src.
#include "mpigan/backend/cuda/cuda_ops.hpp"
#include "mpigan/core/error.hpp"

namespace mpigan::cuda {
namespace {

class CudaAvgPool final : public AvgPoolOp {
 public:
  CudaAvgPool(const AvgPoolDesc& d, Context& ctx) : m_desc(d), m_ctx(ctx) {
    bool ok = true;
    for (int i = 0; i < 3; ++i) ok = ok && d.kernel[i] >= 1 && d.stride[i] >= 1;
    MPIGAN_CHECK(ok, "cuda avg_pool {}: kernel and stride must be >= 1", d.to_string());
  }

  TensorDesc setup(const TensorDesc& src) override {
    require_canonical_desc(src, "avg_pool");
    m_src = src.shape;
    m_dst = m_desc.output_shape(src.shape);
    m_ctx.activate();
    m_x = make_tensor_desc(m_src);
    m_y = make_tensor_desc(m_dst);
    int window[3], padding[3] = {0, 0, 0}, stride[3];
    for (int i = 0; i < 3; ++i) {
      window[i] = to_int(m_desc.kernel[i], "pool window");
      stride[i] = to_int(m_desc.stride[i], "pool stride");
    }
    cudnnPoolingDescriptor_t raw = nullptr;
    MPIGAN_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&raw));
    m_pool.reset(raw);
    MPIGAN_CUDNN_CHECK(cudnnSetPoolingNdDescriptor(raw, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
                                                   CUDNN_NOT_PROPAGATE_NAN, 3, window, padding, stride));
    int out[5];
    MPIGAN_CUDNN_CHECK(cudnnGetPoolingNdForwardOutputDim(raw, m_x.get(), 5, out));
    for (int i = 0; i < 5; ++i)
      MPIGAN_CHECK(out[i] == m_dst[i], "cuda avg_pool {}: cuDNN output dim {} is {}, expected {} (src {})",
                   m_desc.to_string(), i, out[i], m_dst[i], m_src);
    m_ctx.reserve_workspace(x_placeholder_bytes());
    return {m_dst, nullptr};
  }

  void forward(const Tensor& src, Tensor& dst) override {
    require_device(src, m_src, "avg_pool", "src");
    require_device(dst, m_dst, "avg_pool", "dst");
    m_ctx.activate();
    const float one = 1.0f, zero = 0.0f;
    MPIGAN_CUDNN_CHECK(
        cudnnPoolingForward(m_ctx.cudnn(), m_pool.get(), &one, m_x.get(), src.data(), &zero, m_y.get(), dst.data()));
  }

  void backward(const Tensor& diff_dst, Tensor& diff_src) override {
    require_device(diff_dst, m_dst, "avg_pool", "diff_dst");
    require_device(diff_src, m_src, "avg_pool", "diff_src");
    m_ctx.activate();
    const float one = 1.0f, zero = 0.0f;
    const void* x_placeholder = m_ctx.workspace(x_placeholder_bytes());
    MPIGAN_CUDNN_CHECK(cudnnPoolingBackward(m_ctx.cudnn(), m_pool.get(), &one, m_y.get(), diff_dst.data(), m_y.get(),
                                            diff_dst.data(), m_x.get(), x_placeholder, &zero, m_x.get(),
                                            diff_src.data()));
  }

 private:
  std::size_t x_placeholder_bytes() const { return static_cast<std::size_t>(m_src.numel()) * sizeof(float); }

  AvgPoolDesc m_desc;
  Context& m_ctx;
  Shape m_src, m_dst;
  TensorDescPtr m_x, m_y;
  PoolDescPtr m_pool;
};

}  // namespace

std::unique_ptr<AvgPoolOp> make_avg_pool(const AvgPoolDesc& d, Context& ctx) {
  return std::make_unique<CudaAvgPool>(d, ctx);
}

}  // namespace mpigan::cuda
