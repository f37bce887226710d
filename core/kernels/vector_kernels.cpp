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
#define MPIGAN_X86_DISPATCH 1  // AVX-512 paths picked at run time by __builtin_cpu_supports
#include <immintrin.h>
#else
#define MPIGAN_MULTIVERSION
#define MPIGAN_STREAMING_MIRROR 0
#define MPIGAN_X86_DISPATCH 0
#endif

namespace {
// 16 Philox4x32-10 blocks side by side (structure of arrays), so that each round is a loop the
// compiler turns into vector instructions (vpmuludq for the 32x32->64 products).
constexpr int kLanes = 16;
// Philox4x32's round multipliers and Weyl key increments (Random123; core/rng.cpp)
constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;

inline void philox_lanes(std::uint64_t first_block, std::uint64_t seed, std::uint64_t stream,
                         std::uint32_t out[4][kLanes]) {
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

namespace {
MPIGAN_MULTIVERSION
void dropout_range_generic(const float* x, float* y, std::uint32_t* bits, std::size_t begin, std::size_t end,
                           float rate, float scale, std::uint64_t seed, std::uint64_t stream) {
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
void dropout_backward_range_generic(const float* dy, float* dx, const std::uint32_t* bits, std::size_t begin,
                                    std::size_t end, float scale) {
#pragma GCC ivdep
  for (std::size_t i = begin; i < end; ++i) dx[i] = (bits[i / 32] >> (i % 32)) & 1u ? dy[i] * scale : 0.0f;
}

#if MPIGAN_X86_DISPATCH
#pragma GCC diagnostic push
// GCC 12 false positive inside avx512fintrin.h (the undefined pass-through operand of the shifts).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// AVX-512 (F and BW) dropout: the same bits as the generic loops. 16 Philox blocks per group, one
// per 32-bit lane; a 4x4 transpose of words and of 128-bit lanes puts each block's four words
// side by side, so that the vector's 32 16-bit halves are the uniforms of 32 consecutive elements
// and one unsigned compare gives their keep bits as a mask register. keep <=> h * 2^-16 >= rate
// <=> h >= ceil(rate * 2^16), exact in integers.
__attribute__((target("avx512f,avx512bw"))) inline __m512i mul_hi_lo(__m512i c, __m512i m, __m512i& lo) {
  const __m512i even = _mm512_mul_epu32(c, m);                        // 64-bit products of lanes 0, 2, ...
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(c, 32), m);  // of lanes 1, 3, ...
  lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
  return _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
}

__attribute__((target("avx512f,avx512bw"))) void dropout_range_avx512(const float* x, float* y, std::uint32_t* bits,
                                                                      std::size_t begin, std::size_t end, float rate,
                                                                      float scale, std::uint64_t seed,
                                                                      std::uint64_t stream) {
  constexpr std::size_t kGroup = 128;  // 16 blocks x 4 words x 2 halves
  // Fewer than one group, or block counters beyond 32 bits (past 2^35 elements): the generic loop.
  if (end - begin < kGroup || (end / 8 + 16) >> 32 != 0) {
    dropout_range_generic(x, y, bits, begin, end, rate, scale, seed, stream);
    return;
  }
  // rate <= 0: keep all; rate > 1 - 2^-16 or NaN: keep none (no 16-bit threshold), as the compare
  // of the generic loop decides.
  const double t = std::ceil(static_cast<double>(rate) * 65536.0);
  const bool none = !(t <= 65535.0);
  const auto thr = _mm512_set1_epi16(static_cast<short>(static_cast<std::uint16_t>(t > 0.0 && !none ? t : 0.0)));
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(kM0));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(kM1));
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i s_lo = _mm512_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(stream)));
  const __m512i s_hi = _mm512_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(stream >> 32)));
  const __m512 vscale = _mm512_set1_ps(scale);
  std::size_t i = begin;
  for (; i + kGroup <= end; i += kGroup) {
    // Block counters i / 8 + l: their high words are 0 (checked above).
    __m512i c0 = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(i / 8)), lane);
    __m512i c1 = _mm512_setzero_si512();
    __m512i c2 = s_lo, c3 = s_hi;
    std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
    for (int round = 0; round < 10; ++round) {
      __m512i lo0, lo1;
      const __m512i hi0 = mul_hi_lo(c0, m0, lo0);
      const __m512i hi1 = mul_hi_lo(c2, m1, lo1);
      const __m512i n0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32(static_cast<int>(k0)));
      const __m512i n2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32(static_cast<int>(k1)));
      c0 = n0;
      c1 = lo1;
      c2 = n2;
      c3 = lo0;
      k0 += kW0;
      k1 += kW1;
    }
    // Transpose: u_r holds block 4q + r's four words in 128-bit lane q; o_m blocks 4m .. 4m + 3.
    const __m512i t0 = _mm512_unpacklo_epi32(c0, c1), t1 = _mm512_unpackhi_epi32(c0, c1);
    const __m512i t2 = _mm512_unpacklo_epi32(c2, c3), t3 = _mm512_unpackhi_epi32(c2, c3);
    const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
    const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
    const __m512i v0 = _mm512_shuffle_i32x4(u0, u1, 0x44), v1 = _mm512_shuffle_i32x4(u0, u1, 0xEE);
    const __m512i v2 = _mm512_shuffle_i32x4(u2, u3, 0x44), v3 = _mm512_shuffle_i32x4(u2, u3, 0xEE);
    const __m512i o[4] = {_mm512_shuffle_i32x4(v0, v2, 0x88), _mm512_shuffle_i32x4(v0, v2, 0xDD),
                          _mm512_shuffle_i32x4(v1, v3, 0x88), _mm512_shuffle_i32x4(v1, v3, 0xDD)};
    for (std::size_t m = 0; m < 4; ++m) {
      const __mmask32 keep = none ? 0u : _mm512_cmp_epu16_mask(o[m], thr, _MM_CMPINT_NLT);
      const std::size_t e = i + 32 * m;
      bits[e / 32] = static_cast<std::uint32_t>(keep);
      _mm512_storeu_ps(y + e, _mm512_maskz_mul_ps(static_cast<__mmask16>(keep), _mm512_loadu_ps(x + e), vscale));
      _mm512_storeu_ps(y + e + 16,
                       _mm512_maskz_mul_ps(static_cast<__mmask16>(keep >> 16), _mm512_loadu_ps(x + e + 16), vscale));
    }
  }
  if (i < end) dropout_range_generic(x, y, bits, i, end, rate, scale, seed, stream);
}

__attribute__((target("avx512f,avx512bw"))) void dropout_backward_range_avx512(const float* dy, float* dx,
                                                                               const std::uint32_t* bits,
                                                                               std::size_t begin, std::size_t end,
                                                                               float scale) {
  std::size_t i = begin;
  const std::size_t head = std::min(end, (begin + 15) / 16 * 16);
  if (i < head) dropout_backward_range_generic(dy, dx, bits, i, head, scale);
  i = head;
  const __m512 vscale = _mm512_set1_ps(scale);
  for (; i + 16 <= end; i += 16) {
    const auto keep = static_cast<__mmask16>(bits[i / 32] >> (i % 32));
    _mm512_storeu_ps(dx + i, _mm512_maskz_mul_ps(keep, _mm512_loadu_ps(dy + i), vscale));
  }
  if (i < end) dropout_backward_range_generic(dy, dx, bits, i, end, scale);
}

#pragma GCC diagnostic pop

bool has_avx512bw() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  return yes;
}
#endif
}  // namespace

void dropout_range(const float* x, float* y, std::uint32_t* bits, std::size_t begin, std::size_t end, float rate,
                   float scale, std::uint64_t seed, std::uint64_t stream) {
#if MPIGAN_X86_DISPATCH
  if (has_avx512bw()) return dropout_range_avx512(x, y, bits, begin, end, rate, scale, seed, stream);
#endif
  dropout_range_generic(x, y, bits, begin, end, rate, scale, seed, stream);
}

void dropout_backward_range(const float* dy, float* dx, const std::uint32_t* bits, std::size_t begin, std::size_t end,
                            float scale) {
#if MPIGAN_X86_DISPATCH
  if (has_avx512bw()) return dropout_backward_range_avx512(dy, dx, bits, begin, end, scale);
#endif
  dropout_backward_range_generic(dy, dx, bits, begin, end, scale);
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
