// Reference inner product, element-wise activations, pooling and upsampling.
#include "mpigan/backend/reference/kernels.hpp"

#include <cmath>

namespace mpigan::ref {

template <class T>
void inner_product_forward(std::int64_t n, const InnerProductDesc& d, const T* src, const T* weights, const T* bias,
                           T* dst) {
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t o = 0; o < d.oc; ++o) {
      double acc = bias ? static_cast<double>(bias[o]) : 0.0;
      for (std::int64_t c = 0; c < d.ic; ++c)
        acc += static_cast<double>(src[i * d.ic + c]) * static_cast<double>(weights[o * d.ic + c]);
      dst[i * d.oc + o] = static_cast<T>(acc);
    }
}

template <class T>
void inner_product_backward_data(std::int64_t n, const InnerProductDesc& d, const T* diff_dst, const T* weights,
                                 T* diff_src) {
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t c = 0; c < d.ic; ++c) {
      double acc = 0.0;
      for (std::int64_t o = 0; o < d.oc; ++o)
        acc += static_cast<double>(diff_dst[i * d.oc + o]) * static_cast<double>(weights[o * d.ic + c]);
      diff_src[i * d.ic + c] = static_cast<T>(acc);
    }
}

template <class T>
void inner_product_backward_weights(std::int64_t n, const InnerProductDesc& d, const T* src, const T* diff_dst,
                                    T* diff_weights, T* diff_bias) {
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t o = 0; o < d.oc; ++o)
    for (std::int64_t c = 0; c < d.ic; ++c) {
      double acc = 0.0;
      for (std::int64_t i = 0; i < n; ++i)
        acc += static_cast<double>(diff_dst[i * d.oc + o]) * static_cast<double>(src[i * d.ic + c]);
      diff_weights[o * d.ic + c] += static_cast<T>(acc);
    }
  if (diff_bias) {
    for (std::int64_t o = 0; o < d.oc; ++o) {
      double acc = 0.0;
      for (std::int64_t i = 0; i < n; ++i) acc += static_cast<double>(diff_dst[i * d.oc + o]);
      diff_bias[o] += static_cast<T>(acc);
    }
  }
}

template <class T>
void eltwise_forward(const EltwiseDesc& d, std::size_t count, const T* src, T* dst) {
  const T alpha = static_cast<T>(d.alpha);
  for (std::size_t i = 0; i < count; ++i) {
    const T x = src[i];
    switch (d.kind) {
      case EltwiseKind::relu:
        dst[i] = x > T(0) ? x : T(0);
        break;
      case EltwiseKind::leaky_relu:
        dst[i] = x > T(0) ? x : alpha * x;
        break;
      case EltwiseKind::sigmoid:
        dst[i] = T(1) / (T(1) + std::exp(-x));
        break;
    }
  }
}

template <class T>
void eltwise_backward(const EltwiseDesc& d, std::size_t count, const T* dst, const T* diff_dst, T* diff_src) {
  const T alpha = static_cast<T>(d.alpha);
  for (std::size_t i = 0; i < count; ++i) {
    const T y = dst[i];
    switch (d.kind) {
      case EltwiseKind::relu:
        diff_src[i] = y > T(0) ? diff_dst[i] : T(0);
        break;
      case EltwiseKind::leaky_relu:
        diff_src[i] = y > T(0) ? diff_dst[i] : alpha * diff_dst[i];
        break;
      case EltwiseKind::sigmoid:
        diff_src[i] = diff_dst[i] * y * (T(1) - y);
        break;
    }
  }
}

template <class T>
void avg_pool_forward(const AvgPoolDesc& d, const Shape& src_shape, const T* src, T* dst) {
  const Shape out = d.output_shape(src_shape);
  const std::int64_t NC = src_shape[0] * src_shape[1];
  const std::int64_t ID = src_shape[2], IH = src_shape[3], IW = src_shape[4];
  const std::int64_t OD = out[2], OH = out[3], OW = out[4];
  const double inv = 1.0 / static_cast<double>(d.kernel.product());
  for (std::int64_t nc = 0; nc < NC; ++nc)
    for (std::int64_t od = 0; od < OD; ++od)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          double acc = 0.0;
          for (std::int64_t kd = 0; kd < d.kernel.d; ++kd)
            for (std::int64_t kh = 0; kh < d.kernel.h; ++kh)
              for (std::int64_t kw = 0; kw < d.kernel.w; ++kw) {
                const std::int64_t id = od * d.stride.d + kd, ih = oh * d.stride.h + kh, iw = ow * d.stride.w + kw;
                acc += static_cast<double>(src[((nc * ID + id) * IH + ih) * IW + iw]);
              }
          dst[((nc * OD + od) * OH + oh) * OW + ow] = static_cast<T>(acc * inv);
        }
}

template <class T>
void avg_pool_backward(const AvgPoolDesc& d, const Shape& src_shape, const T* diff_dst, T* diff_src) {
  const Shape out = d.output_shape(src_shape);
  const std::int64_t NC = src_shape[0] * src_shape[1];
  const std::int64_t ID = src_shape[2], IH = src_shape[3], IW = src_shape[4];
  const std::int64_t OD = out[2], OH = out[3], OW = out[4];
  const T inv = static_cast<T>(1.0 / static_cast<double>(d.kernel.product()));
  for (std::int64_t i = 0; i < NC * ID * IH * IW; ++i) diff_src[i] = T(0);
  for (std::int64_t nc = 0; nc < NC; ++nc)
    for (std::int64_t od = 0; od < OD; ++od)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          const T g = diff_dst[((nc * OD + od) * OH + oh) * OW + ow] * inv;
          for (std::int64_t kd = 0; kd < d.kernel.d; ++kd)
            for (std::int64_t kh = 0; kh < d.kernel.h; ++kh)
              for (std::int64_t kw = 0; kw < d.kernel.w; ++kw) {
                const std::int64_t id = od * d.stride.d + kd, ih = oh * d.stride.h + kh, iw = ow * d.stride.w + kw;
                diff_src[((nc * ID + id) * IH + ih) * IW + iw] += g;
              }
        }
}

template <class T>
void upsample_forward(const UpsampleDesc& d, const Shape& src_shape, const T* src, T* dst) {
  const std::int64_t NC = src_shape[0] * src_shape[1];
  const std::int64_t ID = src_shape[2], IH = src_shape[3], IW = src_shape[4];
  const std::int64_t OD = ID * d.factor.d, OH = IH * d.factor.h, OW = IW * d.factor.w;
  for (std::int64_t nc = 0; nc < NC; ++nc)
    for (std::int64_t od = 0; od < OD; ++od)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow)
          dst[((nc * OD + od) * OH + oh) * OW + ow] =
              src[((nc * ID + od / d.factor.d) * IH + oh / d.factor.h) * IW + ow / d.factor.w];
}

template <class T>
void upsample_backward(const UpsampleDesc& d, const Shape& src_shape, const T* diff_dst, T* diff_src) {
  const std::int64_t NC = src_shape[0] * src_shape[1];
  const std::int64_t ID = src_shape[2], IH = src_shape[3], IW = src_shape[4];
  const std::int64_t OD = ID * d.factor.d, OH = IH * d.factor.h, OW = IW * d.factor.w;
  for (std::int64_t nc = 0; nc < NC; ++nc)
    for (std::int64_t id = 0; id < ID; ++id)
      for (std::int64_t ih = 0; ih < IH; ++ih)
        for (std::int64_t iw = 0; iw < IW; ++iw) {
          double acc = 0.0;
          for (std::int64_t a = 0; a < d.factor.d; ++a)
            for (std::int64_t b = 0; b < d.factor.h; ++b)
              for (std::int64_t c = 0; c < d.factor.w; ++c)
                acc += static_cast<double>(
                    diff_dst[((nc * OD + id * d.factor.d + a) * OH + ih * d.factor.h + b) * OW + iw * d.factor.w + c]);
          diff_src[((nc * ID + id) * IH + ih) * IW + iw] = static_cast<T>(acc);
        }
}

#define MPIGAN_INSTANTIATE(T)                                                                                         \
  template void inner_product_forward<T>(std::int64_t, const InnerProductDesc&, const T*, const T*, const T*, T*);    \
  template void inner_product_backward_data<T>(std::int64_t, const InnerProductDesc&, const T*, const T*, T*);        \
  template void inner_product_backward_weights<T>(std::int64_t, const InnerProductDesc&, const T*, const T*, T*, T*); \
  template void eltwise_forward<T>(const EltwiseDesc&, std::size_t, const T*, T*);                                    \
  template void eltwise_backward<T>(const EltwiseDesc&, std::size_t, const T*, const T*, T*);                         \
  template void avg_pool_forward<T>(const AvgPoolDesc&, const Shape&, const T*, T*);                                  \
  template void avg_pool_backward<T>(const AvgPoolDesc&, const Shape&, const T*, T*);                                 \
  template void upsample_forward<T>(const UpsampleDesc&, const Shape&, const T*, T*);                                 \
  template void upsample_backward<T>(const UpsampleDesc&, const Shape&, const T*, T*);
MPIGAN_INSTANTIATE(float)
MPIGAN_INSTANTIATE(double)
#undef MPIGAN_INSTANTIATE

}  // namespace mpigan::ref
