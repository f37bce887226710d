// Host-callable launchers of the CUDA backend's own kernels (the .cu files), one group per file.
//
// Plain pointers, sizes and the geometry structs of device_math.hpp only: the op classes (.cpp,
// host compiler, C++20, fmt) never see CUDA syntax, and the .cu files (nvcc, C++17) never see the
// fmt-based mpigan headers. Every launcher enqueues on @p stream, returns without waiting, checks
// the launch (MPIGAN_CUDA_CHECK_LAUNCH) and does nothing for empty inputs. Pointers are device
// pointers unless named otherwise.
#pragma once

#include "mpigan/backend/cuda/device_math.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace mpigan::cuda::kernels {

// --- flat_math.cu: element-wise math over flat buffers (n floats)
void fill(cudaStream_t stream, float* x, std::size_t n, float value);
void axpby(cudaStream_t stream, float a, const float* x, float b, float* y, std::size_t n);
void mul(cudaStream_t stream, const float* a, const float* b, float* out, std::size_t n);
void pow(cudaStream_t stream, const float* src, float p, float* dst, std::size_t n);
void pow_backward_add(cudaStream_t stream, const float* src, float p, const float* diff_dst, float* diff_src,
                      std::size_t n);
/// Dropout forward with keep bits (one 32-bit word per 32 elements) and its backward.
void dropout(cudaStream_t stream, const float* src, float* dst, std::uint32_t* bits, std::size_t n, float rate,
             float keep_scale, std::uint64_t seed, std::uint64_t stream_id);
void dropout_backward(cudaStream_t stream, const float* diff_dst, float* diff_src, const std::uint32_t* bits,
                      std::size_t n, float keep_scale);
/// dst[item] = sum of the item's values (double accumulation), one block per item.
void sum_per_item(cudaStream_t stream, const float* src, std::int64_t items, std::int64_t item_numel, float* dst);
/// diff_src[item, :] += diff_dst[item].
void add_per_item(cudaStream_t stream, const float* diff_dst, std::int64_t items, std::int64_t item_numel,
                  float* diff_src);

/// dst[i] = src[i] rounded to bfloat16 (float_to_bf16_bits: nearest, ties to even); n elements.
void to_bf16(cudaStream_t stream, const float* src, std::uint16_t* dst, std::size_t n);
/// dst[i] = src[i] widened to float32; accumulate: dst[i] += that.
void from_bf16(cudaStream_t stream, const std::uint16_t* src, float* dst, std::size_t n, bool accumulate);
/// dst (outer, B, A, inner) = src (outer, A, B, inner) rounded to bfloat16: with g = {C, S, 1, N},
/// the channels-last bf16 copy (N, S, C) of an operand (N, C, S).
void to_bf16_swap01(cudaStream_t stream, const Swap01Geometry& g, const float* src, std::uint16_t* dst);
/// dst (outer, B, A, inner) = src (outer, A, B, inner), bfloat16 (@p src_bf16) or float32, widened;
/// accumulate: dst += that. With g = {S, C, 1, N}: a channels-last result back to (N, C, S).
void from_swap01(cudaStream_t stream, const Swap01Geometry& g, const void* src, bool src_bf16, float* dst,
                 bool accumulate);

/// Device scratch a reduction needs (partials); results are written to a device scalar.
inline constexpr std::size_t kReduceScratchBytes = 1024 * sizeof(double);
/// *result = sum of x^2 in double, deterministic (fixed block count and order for a given n).
void sum_squares(cudaStream_t stream, const float* x, std::size_t n, void* scratch, double* result);
/// *result = number of NaN/Inf values.
void count_nonfinite(cudaStream_t stream, const float* x, std::size_t n, void* scratch, unsigned long long* result);

// --- optimizers.cu: fused updates over flat parameter buffers
void sgd_update(cudaStream_t stream, float* w, const float* g, float* v, std::size_t n, float lr, float momentum,
                bool nesterov);
void rmsprop_update(cudaStream_t stream, float* w, const float* g, float* ms, std::size_t n, float lr, float rho,
                    float epsilon);
void adam_update(cudaStream_t stream, float* w, const float* g, float* m, float* v, std::size_t n, float lr_t,
                 float beta1, float beta2, float epsilon);

// --- eltwise.cu
void eltwise_forward(cudaStream_t stream, Act kind, float alpha, const float* src, float* dst, std::size_t n);
void eltwise_backward(cudaStream_t stream, Act kind, float alpha, const float* dst, const float* diff_dst,
                      float* diff_src, std::size_t n);

// --- padding.cu: explicit zero padding around conv inputs, and the crop of their gradients
void pad(cudaStream_t stream, const PadGeometry& g, const float* src, float* padded);
void crop(cudaStream_t stream, const PadGeometry& g, const float* padded, float* dst);
/// dst (B, A, inner) = src (A, B, inner) with its two leading axes swapped; accumulate: dst += that.
void swap01(cudaStream_t stream, const Swap01Geometry& g, const float* src, float* dst, bool accumulate);

// --- upsample.cu
void upsample_forward(cudaStream_t stream, const UpsampleGeometry& g, const float* src, float* dst);
void upsample_backward(cudaStream_t stream, const UpsampleGeometry& g, const float* diff_dst, float* diff_src);

// --- batch_norm.cu (gamma, beta, mean, var: C floats; scratch: bn_scratch_bytes(g))
std::size_t bn_scratch_bytes(const BnGeometry& g);
void bn_forward_training(cudaStream_t stream, const BnGeometry& g, float epsilon, const float* src, const float* gamma,
                         const float* beta, float* dst, float* batch_mean, float* batch_var, void* scratch);
void bn_forward_inference(cudaStream_t stream, const BnGeometry& g, float epsilon, const float* src, const float* gamma,
                          const float* beta, const float* mean, const float* var, float* dst, void* scratch);
/// diff_src overwritten; diff_gamma / diff_beta (nullable) accumulated.
void bn_backward(cudaStream_t stream, const BnGeometry& g, float epsilon, const float* src, const float* diff_dst,
                 const float* gamma, const float* mean, const float* var, float* diff_src, float* diff_gamma,
                 float* diff_beta, void* scratch);

// --- inner_product.cu: the bias parts of the dense layer (the products are cuBLAS)
/// dst(rows, cols) += bias(cols) broadcast over rows.
void add_bias_rows(cudaStream_t stream, float* dst, const float* bias, std::int64_t rows, std::int64_t cols);
/// diff_bias(cols) += sum over rows of diff_dst(rows, cols) (double accumulation, deterministic).
void accumulate_bias_grad(cudaStream_t stream, const float* diff_dst, std::int64_t rows, std::int64_t cols,
                          float* diff_bias);

}  // namespace mpigan::cuda::kernels
