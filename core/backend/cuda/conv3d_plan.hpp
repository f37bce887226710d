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
#include <optional>

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

/// The weight gradient of a stride-1 convolution as a forward convolution of the transposed
/// problem. cuDNN's legacy API has only slow algorithms for 3D weight gradients (0, 1, 3: no FFT,
/// no Winograd; docs/cuda.md, "Run on a GPU") but FFT-tiled ones for 3D forward convolutions. With
/// Xp the padded src (explicit zeros included) and sym cuDNN's symmetric padding:
///   dW[o, c, q] = sum_n sum_r Xp[n, c, q + r - sym] dY[n, o, r]
///               = conv_fwd(in = Xp as (C, N, ...), filter = dY as (O, N, dst spatial), pad sym)[c, o, q]
/// i.e. a forward convolution over N "input channels" with the batch of C "images", O filters as
/// large as dst, and an output of the kernel's extent ((P + 2 sym - (P + 2 sym - k + 1)) + 1 = k).
/// Its operands are Xp and dY with their two leading axes swapped, its result is dW with its two
/// leading axes swapped (kernels::swap01).
struct WgradAsForward {
  Shape in;         ///< (IC, N, PD, PH, PW): the padded src, axes 0 and 1 swapped
  Shape filter;     ///< (OC, N, OD, OH, OW): dY, axes 0 and 1 swapped
  Shape out;        ///< (IC, OC, KD, KH, KW): dW, axes 0 and 1 swapped
  Conv3dDesc desc;  ///< ic = N, oc = OC, kernel = dst spatial, stride 1, padding sym, no bias
  Swap01Geometry src_to_in() const { return {in[1], in[0], in[2] * in[3] * in[4]}; }
  Swap01Geometry dy_to_filter() const { return {filter[1], filter[0], filter[2] * filter[3] * filter[4]}; }
  Swap01Geometry out_to_dw() const { return {out[0], out[1], out[2] * out[3] * out[4]}; }
};

/// The transposed problem for @p d on @p p; none for strides > 1 (the filter would be dY dilated
/// by the stride).
inline std::optional<WgradAsForward> plan_wgrad_as_forward(const Conv3dDesc& d, const ConvPadPlan& p) {
  if (d.stride[0] != 1 || d.stride[1] != 1 || d.stride[2] != 1) return std::nullopt;
  WgradAsForward w;
  const Shape dst = p.cudnn_desc(d).output_shape(p.padded_src);
  const Shape& x = p.padded_src;
  w.in = {x[1], x[0], x[2], x[3], x[4]};
  w.filter = {dst[1], dst[0], dst[2], dst[3], dst[4]};
  w.out = {x[1], dst[1], d.kernel[0], d.kernel[1], d.kernel[2]};
  w.desc = d;
  w.desc.ic = x[0];
  w.desc.oc = dst[1];
  w.desc.kernel = {dst[2], dst[3], dst[4]};
  w.desc.pad_l = p.sym;
  w.desc.pad_r = p.sym;
  w.desc.bias = false;
  return w;
}

}  // namespace mpigan::cuda
