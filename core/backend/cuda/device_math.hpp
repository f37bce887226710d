// Element formulas and index maps shared by the CUDA kernels and their host-side tests.
//
// Why a shared header: every kernel of this backend is "for each index i: out[i] = f(i, ...)"
// (plus a reduction for a few). The f's live here as MPIGAN_HD functions, so
// tests/unit/core/test_cuda_backend.cpp runs exactly these functions over every index on the host
// and compares with the reference backend. That checks the index arithmetic and the formulas on
// machines without a GPU; the kernels add only grid-stride loops and block reductions.
//
// Conventions (those of core/backend/reference, operation for operation):
//  - Canonical layouts: NCDHW activations, row-major (N, features) for dense tensors.
//  - eltwise backward takes the forward OUTPUT y; relu'(0) = 0; leaky_relu' = 1 where y > 0,
//    else alpha (alpha >= 0); sigmoid' = y (1 - y).
//  - Expressions are written in the reference's evaluation order. The .cu files are compiled
//    with -fmad=false (no FMA contraction; the host compiler in ISO C++ mode does not contract
//    either), so +, -, *, / and sqrtf give bit-identical results on host and device; expf and
//    powf differ by up to 2 ulp (CUDA's are not correctly rounded).
//  - Index arithmetic in std::int64_t: 3D GAN batches exceed 2^31 elements only in flat buffers,
//    but the cost of 64-bit indices is negligible next to the memory traffic.
#pragma once

#include "mpigan/backend/cuda/philox.hpp"

#include <math.h>
#include <cstdint>
#include <cstring>

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

namespace mpigan::cuda {

// ----------------------------------------------------------------------------------------------
// Element-wise activations (EltwiseKind mapped in eltwise.cpp)

enum class Act : int { relu = 0, leaky_relu = 1, sigmoid = 2 };

MPIGAN_HD float act_forward(Act kind, float alpha, float x) {
  switch (kind) {
    case Act::relu:
      return x > 0.0f ? x : 0.0f;
    case Act::leaky_relu:
      return x > 0.0f ? x : alpha * x;
    default:
      return 1.0f / (1.0f + expf(-x));
  }
}

/// f'(x) * dy from the forward output y.
MPIGAN_HD float act_backward(Act kind, float alpha, float y, float dy) {
  switch (kind) {
    case Act::relu:
      return y > 0.0f ? dy : 0.0f;
    case Act::leaky_relu:
      return y > 0.0f ? dy : alpha * dy;
    default:
      return dy * y * (1.0f - y);
  }
}

// ----------------------------------------------------------------------------------------------
// Flat math

MPIGAN_HD bool is_finite(float x) {
#if defined(__CUDA_ARCH__)
  return isfinite(x);
#else
  return std::isfinite(x);
#endif
}

/// The bits of @p x rounded to the nearest bfloat16, ties to even (what oneDNN's f32 -> bf16 reorder
/// and CUDA's __float2bfloat16_rn do); a NaN stays a (quiet) NaN. The high 16 bits of a float32 are
/// a bfloat16, so widening back is a shift (bf16_to_float).
MPIGAN_HD std::uint16_t float_to_bf16_bits(float x) {
  std::uint32_t u = 0;
  memcpy(&u, &x, sizeof u);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0u)
    return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

MPIGAN_HD float bf16_to_float(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float x = 0.0f;
  memcpy(&x, &u, sizeof x);
  return x;
}

/// max(x, 0)^p with the reference's std::max semantics (a NaN x stays NaN).
MPIGAN_HD float pow_forward(float x, float p) {
  return powf(x < 0.0f ? 0.0f : x, p);
}

/// diff_src + p x^(p-1) diff_dst where x > 0, else diff_src unchanged.
MPIGAN_HD float pow_backward_add(float x, float p, float diff_dst, float diff_src) {
  return x > 0.0f ? diff_src + p * powf(x, p - 1.0f) * diff_dst : diff_src;
}

/// Whether dropout keeps element i given Philox word i / 2 (core/rng.hpp dropout_uniform: the
/// 16-bit half, low half for even i, scaled by 2^-16).
MPIGAN_HD bool dropout_keep(std::uint32_t word_of_i_half, std::uint64_t i, float rate) {
  const std::uint32_t h = (i & 1) ? word_of_i_half >> 16 : word_of_i_half & 0xFFFFu;
  return static_cast<float>(h) * (1.0f / 65536.0f) >= rate;
}

// ----------------------------------------------------------------------------------------------
// Optimizer steps (Keras formulas; backend.hpp)

MPIGAN_HD void sgd_step(float& w, float g, float& v, float lr, float momentum, bool nesterov) {
  if (momentum == 0.0f) {
    w -= lr * g;
    return;
  }
  const float vel = momentum * v - lr * g;
  v = vel;
  w += nesterov ? momentum * vel - lr * g : vel;
}

MPIGAN_HD void rmsprop_step(float& w, float g, float& ms, float lr, float rho, float epsilon) {
  ms = rho * ms + (1.0f - rho) * g * g;
  w -= lr * g / (sqrtf(ms) + epsilon);
}

MPIGAN_HD void adam_step(float& w, float g, float& m, float& v, float lr_t, float beta1, float beta2, float epsilon) {
  m = beta1 * m + (1.0f - beta1) * g;
  v = beta2 * v + (1.0f - beta2) * g * g;
  w -= lr_t * m / (sqrtf(v) + epsilon);
}

// ----------------------------------------------------------------------------------------------
// Explicit zero padding for convolutions with pad_l != pad_r (conv3d_plan.hpp).

/// src (NC, D, H, W) placed at offset (LD, LH, LW) inside padded (NC, PD, PH, PW), zeros around.
struct PadGeometry {
  std::int64_t nc = 0;
  std::int64_t d = 0, h = 0, w = 0;     ///< src spatial dims
  std::int64_t pd = 0, ph = 0, pw = 0;  ///< padded spatial dims
  std::int64_t ld = 0, lh = 0, lw = 0;  ///< zeros before src in each dim
  MPIGAN_HD std::int64_t src_numel() const { return nc * d * h * w; }
  MPIGAN_HD std::int64_t padded_numel() const { return nc * pd * ph * pw; }
};

/// Value of padded element @p i (index into padded).
MPIGAN_HD float pad_element(const PadGeometry& g, const float* src, std::int64_t i) {
  const std::int64_t x = i % g.pw;
  std::int64_t r = i / g.pw;
  const std::int64_t y = r % g.ph;
  r /= g.ph;
  const std::int64_t z = r % g.pd;
  const std::int64_t nc = r / g.pd;
  const std::int64_t sz = z - g.ld, sy = y - g.lh, sx = x - g.lw;
  if (sz < 0 || sz >= g.d || sy < 0 || sy >= g.h || sx < 0 || sx >= g.w) return 0.0f;
  return src[((nc * g.d + sz) * g.h + sy) * g.w + sx];
}

/// Index into padded of src element @p i (the crop that undoes pad_element).
MPIGAN_HD std::int64_t crop_source_index(const PadGeometry& g, std::int64_t i) {
  const std::int64_t x = i % g.w;
  std::int64_t r = i / g.w;
  const std::int64_t y = r % g.h;
  r /= g.h;
  const std::int64_t z = r % g.d;
  const std::int64_t nc = r / g.d;
  return ((nc * g.pd + z + g.ld) * g.ph + y + g.lh) * g.pw + x + g.lw;
}

// ----------------------------------------------------------------------------------------------
// Swap of two adjacent axes, src (outer, A, B, inner) -> dst (outer, B, A, inner). With outer 1:
// the operands of the weight gradient computed as a forward convolution (conv3d_plan.hpp,
// WgradAsForward); with inner 1: the channels-last copies of the bf16 convolutions' operands,
// (N, C, S) -> (N, S, C), S the spatial extent (for weights N = O, S = KD*KH*KW).

struct Swap01Geometry {
  std::int64_t a = 0, b = 0, inner = 0, outer = 1;
  MPIGAN_HD std::int64_t numel() const { return outer * a * b * inner; }
};

/// Index into src of dst element @p i.
MPIGAN_HD std::int64_t swap01_source_index(const Swap01Geometry& g, std::int64_t i) {
  const std::int64_t block = g.a * g.b * g.inner;
  const std::int64_t o = i / block, j = i % block;
  const std::int64_t s = j % g.inner;
  const std::int64_t r = j / g.inner;  // = b_index * A + a_index
  return o * block + ((r % g.a) * g.b + r / g.a) * g.inner + s;
}

// ----------------------------------------------------------------------------------------------
// Nearest-neighbour upsampling by integer factors (Keras UpSampling3D).

/// src (NC, D, H, W) -> dst (NC, D*FD, H*FH, W*FW).
struct UpsampleGeometry {
  std::int64_t nc = 0;
  std::int64_t d = 0, h = 0, w = 0;
  std::int64_t fd = 1, fh = 1, fw = 1;
  MPIGAN_HD std::int64_t src_numel() const { return nc * d * h * w; }
  MPIGAN_HD std::int64_t dst_numel() const { return nc * d * fd * h * fh * w * fw; }
};

/// Index into src of dst element @p i.
MPIGAN_HD std::int64_t upsample_source_index(const UpsampleGeometry& g, std::int64_t i) {
  const std::int64_t OW = g.w * g.fw, OH = g.h * g.fh, OD = g.d * g.fd;
  const std::int64_t ox = i % OW;
  std::int64_t r = i / OW;
  const std::int64_t oy = r % OH;
  r /= OH;
  const std::int64_t oz = r % OD;
  const std::int64_t nc = r / OD;
  return ((nc * g.d + oz / g.fd) * g.h + oy / g.fh) * g.w + ox / g.fw;
}

/// diff_src element @p i: the sum of diff_dst over its FD x FH x FW block, in double and in the
/// reference's order (bit-identical to it).
MPIGAN_HD float upsample_backward_element(const UpsampleGeometry& g, const float* diff_dst, std::int64_t i) {
  const std::int64_t OW = g.w * g.fw, OH = g.h * g.fh, OD = g.d * g.fd;
  const std::int64_t x = i % g.w;
  std::int64_t r = i / g.w;
  const std::int64_t y = r % g.h;
  r /= g.h;
  const std::int64_t z = r % g.d;
  const std::int64_t nc = r / g.d;
  double acc = 0.0;
  for (std::int64_t a = 0; a < g.fd; ++a)
    for (std::int64_t b = 0; b < g.fh; ++b)
      for (std::int64_t c = 0; c < g.fw; ++c)
        acc += static_cast<double>(diff_dst[((nc * OD + z * g.fd + a) * OH + y * g.fh + b) * OW + x * g.fw + c]);
  return static_cast<float>(acc);
}

// ----------------------------------------------------------------------------------------------
// Batch normalisation (per channel over N and the spatial dims; biased variance).

/// src (N, C, S) with S the spatial size; each channel's M = N*S values are reduced by
/// `splits` blocks (bn_splits), independent of the GPU so results are reproducible across GPUs.
struct BnGeometry {
  std::int64_t n = 0, c = 0, s = 0;
  std::int64_t splits = 1;
  MPIGAN_HD std::int64_t per_channel() const { return n * s; }
  MPIGAN_HD std::int64_t numel() const { return n * c * s; }
};

/// Blocks per channel: about 4096 values each, at most 1024.
inline std::int64_t bn_splits(std::int64_t per_channel) {
  const std::int64_t p = (per_channel + 4095) / 4096;
  return p < 1 ? 1 : (p > 1024 ? 1024 : p);
}

/// Index of the j-th value (0 <= j < N*S) of channel @p c.
MPIGAN_HD std::int64_t bn_channel_element(const BnGeometry& g, std::int64_t c, std::int64_t j) {
  const std::int64_t n = j / g.s;
  return (n * g.c + c) * g.s + (j - n * g.s);
}

MPIGAN_HD std::int64_t bn_channel_of(const BnGeometry& g, std::int64_t i) {
  return (i / g.s) % g.c;
}

/// dst = (x - mean) * scale + shift with scale = gamma / sqrt(var + eps), shift = beta.
struct BnForwardCoef {
  float mean, scale, shift;
};

MPIGAN_HD BnForwardCoef bn_forward_coef(double mean, double var, float epsilon, float gamma, float beta) {
  const double inv = 1.0 / sqrt(var + static_cast<double>(epsilon));
  return {static_cast<float>(mean), static_cast<float>(static_cast<double>(gamma) * inv), beta};
}

MPIGAN_HD float bn_forward_apply(const BnForwardCoef& k, float x) {
  return (x - k.mean) * k.scale + k.shift;
}

/// diff_src = a * (dy - b - (x - mean) * k): the reference's
///   gamma*inv * (dy - dbeta/M - xhat*dgamma/M), xhat = (x - mean)*inv, dgamma = inv * sum dy (x - mean)
/// with a = gamma*inv, b = dbeta/M, k = dgamma*inv/M.
struct BnBackwardCoef {
  float mean, a, b, k;
};

/// From the channel sums sum_dy = sum dy and sum_dy_xmu = sum dy (x - mean); writes dgamma, dbeta.
MPIGAN_HD BnBackwardCoef bn_backward_coef(double sum_dy, double sum_dy_xmu, double count, float mean, float var,
                                          float epsilon, float gamma, double* dgamma, double* dbeta) {
  const double inv = 1.0 / sqrt(static_cast<double>(var) + static_cast<double>(epsilon));
  *dgamma = sum_dy_xmu * inv;
  *dbeta = sum_dy;
  return {mean, static_cast<float>(static_cast<double>(gamma) * inv), static_cast<float>(sum_dy / count),
          static_cast<float>(*dgamma * inv / count)};
}

MPIGAN_HD float bn_backward_apply(const BnBackwardCoef& k, float x, float dy) {
  return k.a * (dy - k.b - (x - k.mean) * k.k);
}

}  // namespace mpigan::cuda
