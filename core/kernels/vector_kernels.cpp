// Multi-versioned host vector kernels (vector_kernels.hpp): dropout, optimizer updates, master-side updates.
#include "mpigan/kernels/vector_kernels.hpp"

#include "mpigan/core/rng.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace mpigan::cpu {

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define MPIGAN_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#define MPIGAN_STREAMING_MIRROR 1
#include <immintrin.h>
#else
#define MPIGAN_MULTIVERSION
#define MPIGAN_STREAMING_MIRROR 0
#endif

namespace {
// 16 Philox4x32-10 blocks side by side (structure of arrays), so that each round is a loop the
// compiler turns into vector instructions (vpmuludq for the 32x32->64 products).
constexpr int kLanes = 16;

inline void philox_lanes(std::uint64_t first_block, std::uint64_t seed, std::uint64_t stream,
                         std::uint32_t out[4][kLanes]) {
  constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  std::uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    const std::uint64_t b = first_block + static_cast<std::uint64_t>(l);
    c0[l] = static_cast<std::uint32_t>(b);
    c1[l] = static_cast<std::uint32_t>(b >> 32);
    c2[l] = static_cast<std::uint32_t>(stream);
    c3[l] = static_cast<std::uint32_t>(stream >> 32);
  }
  std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
#pragma GCC ivdep
    for (int l = 0; l < kLanes; ++l) {
      const std::uint64_t p0 = std::uint64_t{kM0} * c0[l];
      const std::uint64_t p1 = std::uint64_t{kM1} * c2[l];
      const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
      const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
      const std::uint32_t n0 = hi1 ^ c1[l] ^ k0, n2 = hi0 ^ c3[l] ^ k1;
      c0[l] = n0;
      c1[l] = lo1;
      c2[l] = n2;
      c3[l] = lo0;
    }
    k0 += kW0;
    k1 += kW1;
  }
  for (int l = 0; l < kLanes; ++l) {
    out[0][l] = c0[l];
    out[1][l] = c1[l];
    out[2][l] = c2[l];
    out[3][l] = c3[l];
  }
}
}  // namespace

MPIGAN_MULTIVERSION
void dropout_range(const float* x, float* y, std::uint32_t* bits, std::size_t begin, std::size_t end, float rate,
                   float scale, std::uint64_t seed, std::uint64_t stream) {
  // 16 blocks = 64 words = 128 elements = 4 mask words per group.
  constexpr std::size_t kGroup = 8 * kLanes;
  std::size_t i = begin;
  std::uint32_t w[4][kLanes];
  for (; i + kGroup <= end; i += kGroup) {
    philox_lanes(i / 8, seed, stream, w);
    // Word k of block (i/8 + l) is word 4l + k of the group; it covers elements 2(4l + k) and +1.
    std::uint32_t keep[kGroup];
    for (int k = 0; k < 4; ++k)
#pragma GCC ivdep
      for (int l = 0; l < kLanes; ++l) {
        const std::size_t e = 2 * (4 * static_cast<std::size_t>(l) + static_cast<std::size_t>(k));
        const std::uint32_t word = w[k][l];
        const bool k0 = static_cast<float>(word & 0xFFFFu) * (1.0f / 65536.0f) >= rate;
        const bool k1 = static_cast<float>(word >> 16) * (1.0f / 65536.0f) >= rate;
        keep[e] = k0;
        keep[e + 1] = k1;
        y[i + e] = k0 ? x[i + e] * scale : 0.0f;
        y[i + e + 1] = k1 ? x[i + e + 1] * scale : 0.0f;
      }
    for (std::size_t m = 0; m < kGroup / 32; ++m) {
      std::uint32_t b = 0;
      for (std::size_t j = 0; j < 32; ++j) b |= keep[32 * m + j] << j;
      bits[i / 32 + m] = b;
    }
  }
  // Tail (fewer than 128 elements left): one word at a time.
  for (; i < end; i += 32) {
    std::uint32_t b = 0;
    for (std::size_t j = 0; j < 32 && i + j < end; ++j) {
      const std::size_t e = i + j;
      const bool k = dropout_uniform(philox_word(seed, stream, e / 2), e) >= rate;
      b |= static_cast<std::uint32_t>(k) << j;
      y[e] = k ? x[e] * scale : 0.0f;
    }
    bits[i / 32] = b;
  }
}

MPIGAN_MULTIVERSION
void dropout_backward_range(const float* dy, float* dx, const std::uint32_t* bits, std::size_t begin, std::size_t end,
                            float scale) {
#pragma GCC ivdep
  for (std::size_t i = begin; i < end; ++i) dx[i] = (bits[i / 32] >> (i % 32)) & 1u ? dy[i] * scale : 0.0f;
}

// Optimizer updates: the same expression order in every ISA version and no FMA contraction
// (the file is built with -ffp-contract=off), so every machine computes the same bits. Each loop
// is written twice, with and without the mirror (a second destination of the new weights), so
// that neither carries a branch per element.
namespace {
template <bool kMirror>
inline __attribute__((always_inline)) void sgd_loop(float* w, const float* g, float* v, float* mirror, std::size_t n,
                                                    float lr, float momentum, bool nesterov) {
  if (momentum == 0.0f) {
#pragma GCC ivdep
    for (std::size_t i = 0; i < n; ++i) {
      const float nw = w[i] - lr * g[i];
      w[i] = nw;
      if constexpr (kMirror) mirror[i] = nw;
    }
    return;
  }
#pragma GCC ivdep
  for (std::size_t i = 0; i < n; ++i) {
    const float vel = momentum * v[i] - lr * g[i];
    v[i] = vel;
    const float nw = w[i] + (nesterov ? momentum * vel - lr * g[i] : vel);
    w[i] = nw;
    if constexpr (kMirror) mirror[i] = nw;
  }
}

template <bool kMirror>
inline __attribute__((always_inline)) void rmsprop_loop(float* w, const float* g, float* ms, float* mirror,
                                                        std::size_t n, float lr, float rho, float epsilon) {
  const float one_minus_rho = 1.0f - rho;
#pragma GCC ivdep
  for (std::size_t i = 0; i < n; ++i) {
    const float m = rho * ms[i] + one_minus_rho * (g[i] * g[i]);
    ms[i] = m;
    const float nw = w[i] - lr * g[i] / (std::sqrt(m) + epsilon);
    w[i] = nw;
    if constexpr (kMirror) mirror[i] = nw;
  }
}

template <bool kMirror>
inline __attribute__((always_inline)) void adam_loop(float* w, const float* g, float* m, float* v, float* mirror,
                                                     std::size_t n, float lr_t, float beta1, float beta2,
                                                     float epsilon) {
  const float c1 = 1.0f - beta1, c2 = 1.0f - beta2;
#pragma GCC ivdep
  for (std::size_t i = 0; i < n; ++i) {
    const float mi = beta1 * m[i] + c1 * g[i];
    const float vi = beta2 * v[i] + c2 * (g[i] * g[i]);
    m[i] = mi;
    v[i] = vi;
    const float nw = w[i] - lr_t * mi / (std::sqrt(vi) + epsilon);
    w[i] = nw;
    if constexpr (kMirror) mirror[i] = nw;
  }
}

template <bool kMirror>
inline __attribute__((always_inline)) void add_scaled_loop(float* w, const float* u, float scale, float* mirror,
                                                           std::size_t n) {
#pragma GCC ivdep
  for (std::size_t i = 0; i < n; ++i) {
    const float nw = w[i] + scale * u[i];
    w[i] = nw;
    if constexpr (kMirror) mirror[i] = nw;
  }
}

inline __attribute__((always_inline)) void elastic_loop(float* c, const float* x, float alpha, float* before,
                                                        std::size_t n) {
#pragma GCC ivdep
  for (std::size_t i = 0; i < n; ++i) {
    const float ci = c[i];
    before[i] = ci;
    c[i] = ci + alpha * (x[i] - ci);
  }
}

// 16 double lanes, combined in a fixed order: the result does not depend on the ISA version.
template <bool kCopy>
inline __attribute__((always_inline)) double sum_squares_loop(const float* x, float* dst, std::size_t n) {
  constexpr std::size_t kLanes = 16;
  double acc[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (std::size_t l = 0; l < kLanes; ++l) {
      const float xf = x[i + l];
      if constexpr (kCopy) dst[i + l] = xf;
      const double xi = xf;
      acc[l] += xi * xi;
    }
  for (std::size_t l = 0; i < n; ++i, ++l) {
    const float xf = x[i];
    if constexpr (kCopy) dst[i] = xf;
    const double xi = xf;
    acc[l] += xi * xi;
  }
  double total = 0.0;
  for (double a : acc) total += a;
  return total;
}
}  // namespace

namespace {
MPIGAN_MULTIVERSION
void sgd_plain(float* w, const float* g, float* v, float* mirror, std::size_t n, float lr, float momentum,
               bool nesterov) {
  if (mirror != nullptr)
    sgd_loop<true>(w, g, v, mirror, n, lr, momentum, nesterov);
  else
    sgd_loop<false>(w, g, v, mirror, n, lr, momentum, nesterov);
}

MPIGAN_MULTIVERSION
void rmsprop_plain(float* w, const float* g, float* ms, float* mirror, std::size_t n, float lr, float rho,
                   float epsilon) {
  if (mirror != nullptr)
    rmsprop_loop<true>(w, g, ms, mirror, n, lr, rho, epsilon);
  else
    rmsprop_loop<false>(w, g, ms, mirror, n, lr, rho, epsilon);
}

MPIGAN_MULTIVERSION
void adam_plain(float* w, const float* g, float* m, float* v, float* mirror, std::size_t n, float lr_t, float beta1,
                float beta2, float epsilon) {
  if (mirror != nullptr)
    adam_loop<true>(w, g, m, v, mirror, n, lr_t, beta1, beta2, epsilon);
  else
    adam_loop<false>(w, g, m, v, mirror, n, lr_t, beta1, beta2, epsilon);
}

MPIGAN_MULTIVERSION
void add_scaled_plain(float* w, const float* u, float scale, float* mirror, std::size_t n) {
  if (mirror != nullptr)
    add_scaled_loop<true>(w, u, scale, mirror, n);
  else
    add_scaled_loop<false>(w, u, scale, mirror, n);
}

MPIGAN_MULTIVERSION
void elastic_plain(float* c, const float* x, float alpha, float* before, std::size_t n) {
  elastic_loop(c, x, alpha, before, n);
}
}  // namespace

#if MPIGAN_STREAMING_MIRROR
#pragma GCC push_options
#pragma GCC target("avx512f")
#pragma GCC diagnostic push
// GCC 12 false positive inside avx512fintrin.h (_mm512_sqrt_ps's undefined pass-through operand).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define MPIGAN_MIRROR_NS avx512
#define MPIGAN_MIRROR_BITS 512
#include "mirror_kernels.inc"
#undef MPIGAN_MIRROR_NS
#undef MPIGAN_MIRROR_BITS
#pragma GCC diagnostic pop
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx")
#define MPIGAN_MIRROR_NS avx
#define MPIGAN_MIRROR_BITS 256
#include "mirror_kernels.inc"
#undef MPIGAN_MIRROR_NS
#undef MPIGAN_MIRROR_BITS
#pragma GCC pop_options

// With a mirror (the destination of streaming stores): the widest unit the machine has runs
// mirror_kernels.inc's version and the function returns; without one, it goes on to the plain loop.
#define MPIGAN_DISPATCH_MIRROR(mirror, kernel, ...)               \
  if ((mirror) != nullptr && __builtin_cpu_supports("avx512f")) { \
    avx512::kernel(__VA_ARGS__);                                  \
    return;                                                       \
  }                                                               \
  if ((mirror) != nullptr && __builtin_cpu_supports("avx")) {     \
    avx::kernel(__VA_ARGS__);                                     \
    return;                                                       \
  }
#else
#define MPIGAN_DISPATCH_MIRROR(mirror, kernel, ...)
#endif

void sgd_range(float* w, const float* g, float* v, float* mirror, std::size_t n, float lr, float momentum,
               bool nesterov) {
  MPIGAN_DISPATCH_MIRROR(mirror, sgd, w, g, v, mirror, n, lr, momentum, nesterov)
  sgd_plain(w, g, v, mirror, n, lr, momentum, nesterov);
}

void rmsprop_range(float* w, const float* g, float* ms, float* mirror, std::size_t n, float lr, float rho,
                   float epsilon) {
  MPIGAN_DISPATCH_MIRROR(mirror, rmsprop, w, g, ms, mirror, n, lr, rho, epsilon)
  rmsprop_plain(w, g, ms, mirror, n, lr, rho, epsilon);
}

void adam_range(float* w, const float* g, float* m, float* v, float* mirror, std::size_t n, float lr_t, float beta1,
                float beta2, float epsilon) {
  MPIGAN_DISPATCH_MIRROR(mirror, adam, w, g, m, v, mirror, n, lr_t, beta1, beta2, epsilon)
  adam_plain(w, g, m, v, mirror, n, lr_t, beta1, beta2, epsilon);
}

void add_scaled_range(float* w, const float* u, float scale, float* mirror, std::size_t n) {
  MPIGAN_DISPATCH_MIRROR(mirror, add_scaled, w, u, scale, mirror, n)
  add_scaled_plain(w, u, scale, mirror, n);
}

void stream_copy_range(const float* src, float* dst, std::size_t n) {
  MPIGAN_DISPATCH_MIRROR(dst, copy, src, dst, n)
  std::copy(src, src + n, dst);
}

void elastic_range(float* c, const float* x, float alpha, float* before, std::size_t n) {
  MPIGAN_DISPATCH_MIRROR(before, elastic, c, x, alpha, before, n)
  elastic_plain(c, x, alpha, before, n);
}

MPIGAN_MULTIVERSION
double sum_squares_range(const float* x, std::size_t n) {
  return sum_squares_loop<false>(x, nullptr, n);
}

MPIGAN_MULTIVERSION
double copy_sum_squares_range(const float* src, float* dst, std::size_t n) {
  return sum_squares_loop<true>(src, dst, n);
}

}  // namespace mpigan::cpu
