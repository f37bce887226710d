// Descriptor arithmetic and the backend-independent parts of Backend.
#include "mpigan/core/backend.hpp"

#include "mpigan/core/error.hpp"

#include <cstring>

namespace mpigan {

Shape Conv3dDesc::output_shape(const Shape& src) const {
  MPIGAN_CHECK_SHAPE(src.rank() == 5, "conv3d {}: input must be NCDHW (rank 5), got {}", to_string(), src);
  MPIGAN_CHECK_SHAPE(src[1] == ic, "conv3d {}: input channels expected {}, found {} (input {})", to_string(), ic,
                     src[1], src);
  std::int64_t out[3];
  for (int i = 0; i < 3; ++i) {
    const std::int64_t padded = src[2 + i] + pad_l[i] + pad_r[i];
    MPIGAN_CHECK_SHAPE(stride[i] >= 1, "conv3d {}: stride must be >= 1", to_string());
    MPIGAN_CHECK_SHAPE(padded >= kernel[i],
                       "conv3d {}: padded input {} smaller than kernel {} in spatial dim {} (input {})", to_string(),
                       padded, kernel[i], i, src);
    out[i] = (padded - kernel[i]) / stride[i] + 1;
  }
  return {src[0], oc, out[0], out[1], out[2]};
}

std::string Conv3dDesc::to_string() const {
  return fmt::format("[ic={} oc={} k={} s={} pad_l={} pad_r={}{}]", ic, oc, kernel, stride, pad_l, pad_r,
                     bias ? "" : " no-bias");
}

std::string EltwiseDesc::to_string() const {
  switch (kind) {
    case EltwiseKind::relu:
      return "relu";
    case EltwiseKind::leaky_relu:
      return fmt::format("leaky_relu(alpha={})", alpha);
    case EltwiseKind::sigmoid:
      return "sigmoid";
  }
  return "?";
}

std::string BatchNormDesc::to_string() const {
  return fmt::format("[channels={} eps={}]", channels, epsilon);
}

Shape AvgPoolDesc::output_shape(const Shape& src) const {
  MPIGAN_CHECK_SHAPE(src.rank() == 5, "avg_pool {}: input must be NCDHW, got {}", to_string(), src);
  std::int64_t out[3];
  for (int i = 0; i < 3; ++i) {
    MPIGAN_CHECK_SHAPE(src[2 + i] >= kernel[i], "avg_pool {}: input {} smaller than the window in dim {}", to_string(),
                       src, i);
    out[i] = (src[2 + i] - kernel[i]) / stride[i] + 1;
  }
  return {src[0], src[1], out[0], out[1], out[2]};
}

std::string AvgPoolDesc::to_string() const {
  return fmt::format("[k={} s={}]", kernel, stride);
}

Shape UpsampleDesc::output_shape(const Shape& src) const {
  MPIGAN_CHECK_SHAPE(src.rank() == 5, "upsample {}: input must be NCDHW, got {}", to_string(), src);
  return {src[0], src[1], src[2] * factor.d, src[3] * factor.h, src[4] * factor.w};
}

std::string UpsampleDesc::to_string() const {
  return fmt::format("[factor={}]", factor);
}

std::string InnerProductDesc::to_string() const {
  return fmt::format("[ic={} oc={}{}]", ic, oc, bias ? "" : " no-bias");
}

Tensor Backend::allocate(const TensorDesc& desc) {
  return Tensor::in_storage(desc, allocate_storage(desc.physical_elems() * sizeof(float)));
}

Tensor Backend::zeros(const Shape& shape) {
  Tensor t = allocate(shape);
  fill(t, 0.0f);
  return t;
}

Tensor Backend::to_canonical(const Tensor& src) {
  if (src.canonical()) return src;
  Tensor dst = allocate(src.shape());
  reorder(src, dst);
  return dst;
}

Tensor Backend::to_host(const Tensor& src) {
  MPIGAN_CHECK(src.device() == Device::cpu, "backend '{}': to_host of a {} tensor needs a device backend", name(),
               to_string(src.device()));
  Tensor canon = to_canonical(src);
  return canon.clone();
}

std::unique_ptr<GroupReducer> Backend::make_group_reducer(int, int, const IdBroadcast&) {
  return nullptr;
}

void Backend::from_host(const Tensor& host, Tensor& dst) {
  MPIGAN_CHECK_SHAPE(host.shape() == dst.shape(), "from_host: shapes differ ({} vs {})", host.shape(), dst.shape());
  if (dst.canonical()) {
    std::memcpy(dst.data(), host.data(), static_cast<std::size_t>(host.numel()) * sizeof(float));
  } else {
    reorder(host, dst);
  }
}

}  // namespace mpigan
