// Nearest-neighbour upsampling op (kernels in upsample.cu): integer factors per spatial dim.
#include "mpigan/backend/cuda/cuda_ops.hpp"
#include "mpigan/backend/cuda/launchers.hpp"
#include "mpigan/core/error.hpp"

namespace mpigan::cuda {
namespace {

class CudaUpsample final : public UpsampleOp {
 public:
  CudaUpsample(const UpsampleDesc& d, Context& ctx) : m_desc(d), m_ctx(ctx) {
    MPIGAN_CHECK(d.factor.d >= 1 && d.factor.h >= 1 && d.factor.w >= 1, "cuda upsample {}: factors must be >= 1",
                 d.to_string());
  }

  TensorDesc setup(const TensorDesc& src) override {
    require_canonical_desc(src, "upsample");
    m_src = src.shape;
    m_dst = m_desc.output_shape(src.shape);
    m_geometry.nc = m_src[0] * m_src[1];
    m_geometry.d = m_src[2], m_geometry.h = m_src[3], m_geometry.w = m_src[4];
    m_geometry.fd = m_desc.factor.d, m_geometry.fh = m_desc.factor.h, m_geometry.fw = m_desc.factor.w;
    return {m_dst, nullptr};
  }

  void forward(const Tensor& src, Tensor& dst) override {
    require_device(src, m_src, "upsample", "src");
    require_device(dst, m_dst, "upsample", "dst");
    m_ctx.activate();
    kernels::upsample_forward(m_ctx.stream(), m_geometry, src.data(), dst.data());
  }

  void backward(const Tensor& diff_dst, Tensor& diff_src) override {
    require_device(diff_dst, m_dst, "upsample", "diff_dst");
    require_device(diff_src, m_src, "upsample", "diff_src");
    m_ctx.activate();
    kernels::upsample_backward(m_ctx.stream(), m_geometry, diff_dst.data(), diff_src.data());
  }

 private:
  UpsampleDesc m_desc;
  Context& m_ctx;
  Shape m_src, m_dst;
  UpsampleGeometry m_geometry;
};

}  // namespace

std::unique_ptr<UpsampleOp> make_upsample(const UpsampleDesc& d, Context& ctx) {
  return std::make_unique<CudaUpsample>(d, ctx);
}

}  // namespace mpigan::cuda
