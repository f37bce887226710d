// Reference 3D convolution: direct loops with double accumulation.
#include "mpigan/backend/reference/kernels.hpp"

#include <algorithm>
#include <vector>

namespace mpigan::ref {
namespace {
struct ConvGeometry {
  std::int64_t N, IC, ID, IH, IW, OC, OD, OH, OW, KD, KH, KW, SD, SH, SW, PD, PH, PW;
  ConvGeometry(const Conv3dDesc& d, const Shape& src) {
    const Shape dst = d.output_shape(src);
    N = src[0], IC = src[1], ID = src[2], IH = src[3], IW = src[4];
    OC = dst[1], OD = dst[2], OH = dst[3], OW = dst[4];
    KD = d.kernel.d, KH = d.kernel.h, KW = d.kernel.w;
    SD = d.stride.d, SH = d.stride.h, SW = d.stride.w;
    PD = d.pad_l.d, PH = d.pad_l.h, PW = d.pad_l.w;
  }
  std::int64_t src_at(std::int64_t n, std::int64_t c, std::int64_t id, std::int64_t ih, std::int64_t iw) const {
    return (((n * IC + c) * ID + id) * IH + ih) * IW + iw;
  }
  std::int64_t dst_at(std::int64_t n, std::int64_t c, std::int64_t od, std::int64_t oh, std::int64_t ow) const {
    return (((n * OC + c) * OD + od) * OH + oh) * OW + ow;
  }
  std::int64_t w_at(std::int64_t oc, std::int64_t ic, std::int64_t kd, std::int64_t kh, std::int64_t kw) const {
    return (((oc * IC + ic) * KD + kd) * KH + kh) * KW + kw;
  }
  /// Calls f(ow, iw) for each output column ow whose kernel tap kw lands inside the input row, on
  /// input column iw = ow * SW - PW + kw: the innermost walk of all three passes.
  template <class F>
  void for_each_column(std::int64_t kw, F&& f) const {
    for (std::int64_t ow = 0; ow < OW; ++ow) {
      const std::int64_t iw = ow * SW - PW + kw;
      if (iw >= 0 && iw < IW) f(ow, iw);
    }
  }
};

template <class T>
void store_row(const std::vector<double>& acc, T* out) {
  std::transform(acc.begin(), acc.end(), out, [](double v) { return static_cast<T>(v); });
}
}  // namespace

// Each output row (fixed n, channel, depth and height) is accumulated in doubles along its whole
// width at once, so the innermost loop is a long walk over a row with one index per row: the same
// products added to each element in the same order as the textbook nest (channel, then kernel
// depth, height and width), at a few integer operations per product instead of twenty (the
// sanitizer build runs these on the models' full shapes).
template <class T>
void conv3d_forward(const Conv3dDesc& desc, const Shape& src_shape, const T* src, const T* weights, const T* bias,
                    T* dst) {
  const ConvGeometry g(desc, src_shape);
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t n = 0; n < g.N; ++n)
    for (std::int64_t oc = 0; oc < g.OC; ++oc) {
      std::vector<double> acc(static_cast<std::size_t>(g.OW));
      for (std::int64_t od = 0; od < g.OD; ++od)
        for (std::int64_t oh = 0; oh < g.OH; ++oh) {
          std::fill(acc.begin(), acc.end(), bias ? static_cast<double>(bias[oc]) : 0.0);
          for (std::int64_t ic = 0; ic < g.IC; ++ic)
            for (std::int64_t kd = 0; kd < g.KD; ++kd) {
              const std::int64_t id = od * g.SD - g.PD + kd;
              if (id < 0 || id >= g.ID) continue;
              for (std::int64_t kh = 0; kh < g.KH; ++kh) {
                const std::int64_t ih = oh * g.SH - g.PH + kh;
                if (ih < 0 || ih >= g.IH) continue;
                const std::int64_t s = g.src_at(n, ic, id, ih, 0);
                for (std::int64_t kw = 0; kw < g.KW; ++kw) {
                  const double w = static_cast<double>(weights[g.w_at(oc, ic, kd, kh, kw)]);
                  g.for_each_column(kw, [&](std::int64_t ow, std::int64_t iw) {
                    acc[static_cast<std::size_t>(ow)] += static_cast<double>(src[s + iw]) * w;
                  });
                }
              }
            }
          store_row(acc, dst + g.dst_at(n, oc, od, oh, 0));
        }
    }
}

// The transpose, row by row as the forward pass: output position o reaches input i = o * S - P + k
// through tap k, so input depth id and height ih take the taps k = (i + P) mod S, + S, ... below K,
// from o = (i + P - k) / S downwards; along the width each tap scatters an output row into the
// input row.
template <class T>
void conv3d_backward_data(const Conv3dDesc& desc, const Shape& src_shape, const T* diff_dst, const T* weights,
                          T* diff_src) {
  const ConvGeometry g(desc, src_shape);
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t n = 0; n < g.N; ++n)
    for (std::int64_t ic = 0; ic < g.IC; ++ic) {
      std::vector<double> acc(static_cast<std::size_t>(g.IW));
      for (std::int64_t id = 0; id < g.ID; ++id)
        for (std::int64_t ih = 0; ih < g.IH; ++ih) {
          std::fill(acc.begin(), acc.end(), 0.0);
          for (std::int64_t oc = 0; oc < g.OC; ++oc)
            for (std::int64_t kd = (id + g.PD) % g.SD, od = (id + g.PD) / g.SD; kd < g.KD; kd += g.SD, --od) {
              if (od < 0 || od >= g.OD) continue;
              for (std::int64_t kh = (ih + g.PH) % g.SH, oh = (ih + g.PH) / g.SH; kh < g.KH; kh += g.SH, --oh) {
                if (oh < 0 || oh >= g.OH) continue;
                const std::int64_t d = g.dst_at(n, oc, od, oh, 0);
                for (std::int64_t kw = 0; kw < g.KW; ++kw) {
                  const double w = static_cast<double>(weights[g.w_at(oc, ic, kd, kh, kw)]);
                  g.for_each_column(kw, [&](std::int64_t ow, std::int64_t iw) {
                    acc[static_cast<std::size_t>(iw)] += static_cast<double>(diff_dst[d + ow]) * w;
                  });
                }
              }
            }
          store_row(acc, diff_src + g.src_at(n, ic, id, ih, 0));
        }
    }
}

template <class T>
void conv3d_backward_weights(const Conv3dDesc& desc, const Shape& src_shape, const T* src, const T* diff_dst,
                             T* diff_weights, T* diff_bias) {
  const ConvGeometry g(desc, src_shape);
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t oc = 0; oc < g.OC; ++oc)
    for (std::int64_t ic = 0; ic < g.IC; ++ic)
      for (std::int64_t kd = 0; kd < g.KD; ++kd)
        for (std::int64_t kh = 0; kh < g.KH; ++kh)
          for (std::int64_t kw = 0; kw < g.KW; ++kw) {
            double acc = 0.0;
            for (std::int64_t n = 0; n < g.N; ++n)
              for (std::int64_t od = 0; od < g.OD; ++od) {
                const std::int64_t id = od * g.SD - g.PD + kd;
                if (id < 0 || id >= g.ID) continue;
                for (std::int64_t oh = 0; oh < g.OH; ++oh) {
                  const std::int64_t ih = oh * g.SH - g.PH + kh;
                  if (ih < 0 || ih >= g.IH) continue;
                  const std::int64_t d = g.dst_at(n, oc, od, oh, 0), s = g.src_at(n, ic, id, ih, 0);
                  g.for_each_column(kw, [&](std::int64_t ow, std::int64_t iw) {
                    acc += static_cast<double>(diff_dst[d + ow]) * static_cast<double>(src[s + iw]);
                  });
                }
              }
            diff_weights[g.w_at(oc, ic, kd, kh, kw)] += static_cast<T>(acc);
          }
  if (diff_bias) {
    for (std::int64_t oc = 0; oc < g.OC; ++oc) {
      double acc = 0.0;
      for (std::int64_t n = 0; n < g.N; ++n)
        for (std::int64_t i = 0; i < g.OD * g.OH * g.OW; ++i)
          acc += static_cast<double>(diff_dst[(n * g.OC + oc) * g.OD * g.OH * g.OW + i]);
      diff_bias[oc] += static_cast<T>(acc);
    }
  }
}

#define MPIGAN_INSTANTIATE(T)                                                                         \
  template void conv3d_forward<T>(const Conv3dDesc&, const Shape&, const T*, const T*, const T*, T*); \
  template void conv3d_backward_data<T>(const Conv3dDesc&, const Shape&, const T*, const T*, T*);     \
  template void conv3d_backward_weights<T>(const Conv3dDesc&, const Shape&, const T*, const T*, T*, T*);
MPIGAN_INSTANTIATE(float)
MPIGAN_INSTANTIATE(double)
#undef MPIGAN_INSTANTIATE

}  // namespace mpigan::ref
