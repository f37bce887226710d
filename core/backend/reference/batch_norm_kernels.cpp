// Reference batch normalisation (training and inference) with double accumulation.
#include "mpigan/backend/reference/kernels.hpp"

#include <cmath>
#include <vector>

namespace mpigan::ref {
namespace {
struct BnGeometry {
  std::int64_t N, C, S;  // S = spatial elements per (n, c)
  explicit BnGeometry(const Shape& s) : N(s[0]), C(s[1]), S(s.numel() / (s[0] * s[1])) {}
  std::int64_t at(std::int64_t n, std::int64_t c, std::int64_t i) const { return (n * C + c) * S + i; }
};
}  // namespace

template <class T>
void batch_norm_forward_training(const Shape& shape, float epsilon, const T* src, const T* gamma, const T* beta, T* dst,
                                 T* mean, T* var) {
  const BnGeometry g(shape);
  const double M = static_cast<double>(g.N * g.S);
  for (std::int64_t c = 0; c < g.C; ++c) {
    double sum = 0.0;
    for (std::int64_t n = 0; n < g.N; ++n)
      for (std::int64_t i = 0; i < g.S; ++i) sum += static_cast<double>(src[g.at(n, c, i)]);
    const double mu = sum / M;
    double sq = 0.0;
    for (std::int64_t n = 0; n < g.N; ++n)
      for (std::int64_t i = 0; i < g.S; ++i) {
        const double d = static_cast<double>(src[g.at(n, c, i)]) - mu;
        sq += d * d;
      }
    const double v = sq / M;
    mean[c] = static_cast<T>(mu);
    var[c] = static_cast<T>(v);
    const double inv = 1.0 / std::sqrt(v + static_cast<double>(epsilon));
    for (std::int64_t n = 0; n < g.N; ++n)
      for (std::int64_t i = 0; i < g.S; ++i) {
        const double xhat = (static_cast<double>(src[g.at(n, c, i)]) - mu) * inv;
        dst[g.at(n, c, i)] = static_cast<T>(static_cast<double>(gamma[c]) * xhat + static_cast<double>(beta[c]));
      }
  }
}

template <class T>
void batch_norm_forward_inference(const Shape& shape, float epsilon, const T* src, const T* gamma, const T* beta,
                                  const T* mean, const T* var, T* dst) {
  const BnGeometry g(shape);
  for (std::int64_t c = 0; c < g.C; ++c) {
    const double inv = 1.0 / std::sqrt(static_cast<double>(var[c]) + static_cast<double>(epsilon));
    for (std::int64_t n = 0; n < g.N; ++n)
      for (std::int64_t i = 0; i < g.S; ++i) {
        const double xhat = (static_cast<double>(src[g.at(n, c, i)]) - static_cast<double>(mean[c])) * inv;
        dst[g.at(n, c, i)] = static_cast<T>(static_cast<double>(gamma[c]) * xhat + static_cast<double>(beta[c]));
      }
  }
}

template <class T>
void batch_norm_backward(const Shape& shape, float epsilon, const T* src, const T* diff_dst, const T* gamma,
                         const T* mean, const T* var, T* diff_src, T* diff_gamma, T* diff_beta) {
  const BnGeometry g(shape);
  const double M = static_cast<double>(g.N * g.S);
  for (std::int64_t c = 0; c < g.C; ++c) {
    const double mu = static_cast<double>(mean[c]);
    const double inv = 1.0 / std::sqrt(static_cast<double>(var[c]) + static_cast<double>(epsilon));
    double dgamma = 0.0, dbeta = 0.0;
    for (std::int64_t n = 0; n < g.N; ++n)
      for (std::int64_t i = 0; i < g.S; ++i) {
        const double dy = static_cast<double>(diff_dst[g.at(n, c, i)]);
        dgamma += dy * (static_cast<double>(src[g.at(n, c, i)]) - mu) * inv;
        dbeta += dy;
      }
    const double scale = static_cast<double>(gamma[c]) * inv;
    for (std::int64_t n = 0; n < g.N; ++n)
      for (std::int64_t i = 0; i < g.S; ++i) {
        const double xhat = (static_cast<double>(src[g.at(n, c, i)]) - mu) * inv;
        const double dy = static_cast<double>(diff_dst[g.at(n, c, i)]);
        diff_src[g.at(n, c, i)] = static_cast<T>(scale * (dy - dbeta / M - xhat * dgamma / M));
      }
    if (diff_gamma) diff_gamma[c] += static_cast<T>(dgamma);
    if (diff_beta) diff_beta[c] += static_cast<T>(dbeta);
  }
}

#define MPIGAN_INSTANTIATE(T)                                                                                          \
  template void batch_norm_forward_training<T>(const Shape&, float, const T*, const T*, const T*, T*, T*, T*);         \
  template void batch_norm_forward_inference<T>(const Shape&, float, const T*, const T*, const T*, const T*, const T*, \
                                                T*);                                                                   \
  template void batch_norm_backward<T>(const Shape&, float, const T*, const T*, const T*, const T*, const T*, T*, T*,  \
                                       T*);
MPIGAN_INSTANTIATE(float)
MPIGAN_INSTANTIATE(double)
#undef MPIGAN_INSTANTIATE

}  // namespace mpigan::ref
