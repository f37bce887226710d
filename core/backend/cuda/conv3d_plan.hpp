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
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

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

/// What an engine of cuDNN's graph API says about its numerics (its numerical notes), in the terms
/// the settings speak.
struct EngineNotes {
  bool tensor_core = false;        ///< runs on tensor cores: TF32 for float32 data
  bool down_convert = false;       ///< converts the inputs to a narrower type (fp16/bf16) first
  bool reduced_reduction = false;  ///< accumulates in a narrower type than the compute type
  bool nondeterministic = false;   ///< results may differ from run to run (atomics)
  bool runtime_compiled = false;   ///< a kernel compiled at run time (cuDNN's behaviour note)
};

/// Why the settings refuse an engine, or nothing when they accept it. Float32 convolutions never
/// take an engine that down-converts its inputs or reduces in less than fp32 (PyTorch's filter for
/// its cuDNN v8 path does the same); strict fp32 also refuses tensor cores (TF32), which
/// MPIGAN_CUDA_TF32=1 allows; MPIGAN_CUDA_DETERMINISTIC=1 refuses nondeterministic engines; and an
/// engine whose workspace exceeds the limit is refused like a legacy algorithm would be.
/// MPIGAN_CUDA_GRAPH_RTC=0 (@p runtime_compiled false) refuses engines whose kernels cuDNN compiles
/// at run time.
inline std::optional<std::string> engine_refusal(const EngineNotes& n, std::size_t workspace, bool tf32,
                                                 bool deterministic, std::size_t workspace_limit,
                                                 bool runtime_compiled = true) {
  if (n.down_convert) return std::string("converts the inputs to a narrower type");
  if (n.reduced_reduction) return std::string("reduces in less than fp32");
  if (n.tensor_core && !tf32) return std::string("tensor cores (TF32) in strict fp32");
  if (n.nondeterministic && deterministic) return std::string("nondeterministic");
  if (n.runtime_compiled && !runtime_compiled) return std::string("compiled at run time");
  if (workspace > workspace_limit)
    return "workspace " + std::to_string(workspace >> 20) + " MiB over the limit of " +
           std::to_string(workspace_limit >> 20) + " MiB";
  return std::nullopt;
}

/// Fully packed strides of a 5D (N, C, D, H, W) tensor, in elements: NCDHW (W contiguous) or, with
/// @p channels_last, NDHWC (C contiguous). cuDNN's graph API takes dimensions always in NCDHW order
/// and the memory layout from the strides.
inline std::array<std::int64_t, 5> packed_strides(const Shape& s, bool channels_last) {
  std::array<std::int64_t, 5> st{};
  if (channels_last) {
    st[1] = 1;
    st[4] = s[1];
    st[3] = s[4] * st[4];
    st[2] = s[3] * st[3];
    st[0] = s[2] * st[2];
  } else {
    st[4] = 1;
    for (int i = 3; i >= 0; --i) st[static_cast<std::size_t>(i)] = s[i + 1] * st[static_cast<std::size_t>(i) + 1];
  }
  return st;
}

/// The largest power of two, up to 256, that divides the address @p p: the byte alignment a graph
/// plan may assume of an operand.
inline std::size_t address_alignment(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::size_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

}  // namespace mpigan::cuda
