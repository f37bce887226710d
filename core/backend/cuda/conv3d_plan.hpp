// How a Conv3dDesc maps onto cuDNN, which only knows symmetric padding.
//
// Per spatial dim i: sym[i] = min(pad_l[i], pad_r[i]) goes to cuDNN as its (symmetric) padding;
// the rest, extra_l = pad_l - sym and extra_r = pad_r - sym (at most one of them non-zero), is
// added as explicit zeros by the pad kernel (padding.cu) into a workspace buffer of shape
// padded_src. Then:
//   forward:          dst = cudnn_conv(pad(src), sym)                   (same dst as the desc's)
//   backward_data:    diff_src = crop(cudnn_conv_bwd_data(diff_dst, sym))   (crop drops the
//                     gradient of the explicit zeros, which are constants)
//   backward_weights: diff_w += cudnn_conv_bwd_filter(pad(src), diff_dst, sym)
// Output extent: (in + extra_l + extra_r + 2 sym - k)/s + 1 = (in + pad_l + pad_r - k)/s + 1.
// Symmetric descs (the common case) need no explicit padding and no extra buffer.
//
// Plain C++ without CUDA headers: tests/unit/core/test_cuda_backend.cpp checks this decomposition
// on the host against the reference convolution (bit-exact: the added zeros add exact zeros).
#pragma once

#include "mpigan/backend/cuda/device_math.hpp"
#include "mpigan/core/backend.hpp"

#include <algorithm>

namespace mpigan::cuda {

struct ConvPadPlan {
  Dims3 sym{0, 0, 0};      ///< symmetric padding handed to cuDNN
  Dims3 extra_l{0, 0, 0};  ///< explicit zeros before src
  Dims3 extra_r{0, 0, 0};  ///< explicit zeros after src
  Shape src;               ///< the op's input (N, IC, D, H, W)
  Shape padded_src;        ///< what cuDNN sees: src with the explicit zeros (== src if none)
  bool explicit_padding = false;

  /// The descriptor cuDNN runs: same kernel and stride, symmetric padding sym.
  Conv3dDesc cudnn_desc(const Conv3dDesc& d) const {
    Conv3dDesc c = d;
    c.pad_l = sym;
    c.pad_r = sym;
    return c;
  }

  /// Geometry of the pad / crop kernels.
  PadGeometry pad_geometry() const {
    PadGeometry g;
    g.nc = src[0] * src[1];
    g.d = src[2], g.h = src[3], g.w = src[4];
    g.pd = padded_src[2], g.ph = padded_src[3], g.pw = padded_src[4];
    g.ld = extra_l.d, g.lh = extra_l.h, g.lw = extra_l.w;
    return g;
  }
};

/// The plan for @p desc on input @p src (NCDHW); validates the shapes (desc.output_shape throws).
inline ConvPadPlan plan_conv_padding(const Conv3dDesc& desc, const Shape& src) {
  (void)desc.output_shape(src);  // throws ShapeError naming what does not fit
  ConvPadPlan p;
  std::int64_t sym[3], el[3], er[3];
  for (int i = 0; i < 3; ++i) {
    sym[i] = std::min(desc.pad_l[i], desc.pad_r[i]);
    el[i] = desc.pad_l[i] - sym[i];
    er[i] = desc.pad_r[i] - sym[i];
    if (el[i] != 0 || er[i] != 0) p.explicit_padding = true;
  }
  p.sym = {sym[0], sym[1], sym[2]};
  p.extra_l = {el[0], el[1], el[2]};
  p.extra_r = {er[0], er[1], er[2]};
  p.src = src;
  p.padded_src = {src[0], src[1], src[2] + el[0] + er[0], src[3] + el[1] + er[1], src[4] + el[2] + er[2]};
  return p;
}

}  // namespace mpigan::cuda
