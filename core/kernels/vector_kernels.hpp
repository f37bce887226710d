// Host vector kernels over plain float arrays, compiled for several ISAs (function multi-versioning:
// AVX-512, AVX2, baseline) and picked at run time, so the portable binary still uses the wide units
// of the machine it runs on (oneDNN does its own dispatch). Target mpigan_kernels, included as
// "mpigan/kernels/vector_kernels.hpp": the CPU backend's element-wise and optimizer math, and the
// masters' update rules over host buffers (algos/, dist/, master/), which use them without a backend.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mpigan::cpu {

/// Dropout forward over elements [begin, end), begin a multiple of 32: y[i] = x[i] * scale when
/// dropout_uniform(i) >= rate (core/rng.hpp), else 0; keep bits into bits[begin/32 ...]. y may alias x.
void dropout_range(const float* x, float* y, std::uint32_t* bits, std::size_t begin, std::size_t end, float rate,
                   float scale, std::uint64_t seed, std::uint64_t stream);
/// Dropout backward over [begin, end) from the keep bits.
void dropout_backward_range(const float* dy, float* dx, const std::uint32_t* bits, std::size_t begin, std::size_t end,
                            float scale);

/// Optimizer updates over n elements (formulas in nn/optimizer.hpp; lr_t is Adam's bias-corrected
/// rate). @p mirror, when not null, receives the new weights too (n floats; may not alias w).
void sgd_range(float* w, const float* g, float* v, float* mirror, std::size_t n, float lr, float momentum,
               bool nesterov);
void rmsprop_range(float* w, const float* g, float* ms, float* mirror, std::size_t n, float lr, float rho,
                   float epsilon);
void adam_range(float* w, const float* g, float* m, float* v, float* mirror, std::size_t n, float lr_t, float beta1,
                float beta2, float epsilon);
/// Master-side updates that hand the worker its reply in the same pass (streaming stores where
/// the machine has AVX, as the optimizer mirrors): w[i] += scale * u[i], and mirror[i] = the new
/// w[i] when @p mirror is not null (gem, downpour's local mode, a tree's asynchronous root).
void add_scaled_range(float* w, const float* u, float scale, float* mirror, std::size_t n);
/// dst = src (n floats, no overlap) with streaming stores where the machine has AVX: a master's
/// reply, which it does not read again.
void stream_copy_range(const float* src, float* dst, std::size_t n);
/// Elastic averaging's centre move: before[i] = c[i], then c[i] += alpha * (x[i] - c[i]).
void elastic_range(float* c, const float* x, float alpha, float* before, std::size_t n);
/// Sum of x[i]^2 in double precision.
double sum_squares_range(const float* x, std::size_t n);
/// Copies src to dst (n floats, no overlap) and returns the sum of src[i]^2 in double precision,
/// in one pass (the same value as sum_squares_range(src, n)).
double copy_sum_squares_range(const float* src, float* dst, std::size_t n);

}  // namespace mpigan::cpu
