// Element-wise math over flat buffers (Backend::fill, axpby, mul, pow, pow_backward_add, dropout,
// sum_per_item, add_per_item), the bf16 conversions of the convolutions' operands (to_bf16,
// from_bf16, and their channels-last forms, to_bf16_swap01 and from_swap01) and the two reductions (sum_squares,
// count_nonfinite).
//
// Invariants: formulas come from device_math.hpp (shared with the host tests); grid-stride loops
// over std::size_t indices; reductions accumulate in double (counts in 64-bit integers) with a
// fixed two-stage tree whose shape depends only on n, so results are reproducible bit for bit.
// dropout draws Philox word i/2 for element i, as the reference does (philox.hpp, core/rng.hpp).
#include "mpigan/backend/cuda/kernel_utils.cuh"
#include "mpigan/backend/cuda/launchers.hpp"

namespace mpigan::cuda::kernels {
namespace {

__global__ void fill_kernel(float* x, std::size_t n, float value) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads()) x[i] = value;
}

__global__ void axpby_kernel(float a, const float* x, float b, float* y, std::size_t n) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads()) y[i] = a * x[i] + (b == 0.0f ? 0.0f : b * y[i]);
}

__global__ void to_bf16_kernel(const float* src, std::uint16_t* dst, std::size_t n) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads()) dst[i] = float_to_bf16_bits(src[i]);
}

__global__ void from_bf16_kernel(const std::uint16_t* src, float* dst, std::size_t n, bool accumulate) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads())
    dst[i] = accumulate ? dst[i] + bf16_to_float(src[i]) : bf16_to_float(src[i]);
}

__global__ void to_bf16_swap01_kernel(Swap01Geometry g, const float* src, std::uint16_t* dst) {
  const auto n = static_cast<std::size_t>(g.numel());
  for (std::size_t i = global_thread(); i < n; i += grid_threads())
    dst[i] = float_to_bf16_bits(src[swap01_source_index(g, static_cast<std::int64_t>(i))]);
}

__global__ void from_swap01_kernel(Swap01Geometry g, const void* src, bool src_bf16, float* dst, bool accumulate) {
  const auto n = static_cast<std::size_t>(g.numel());
  for (std::size_t i = global_thread(); i < n; i += grid_threads()) {
    const auto k = static_cast<std::size_t>(swap01_source_index(g, static_cast<std::int64_t>(i)));
    const float v =
        src_bf16 ? bf16_to_float(static_cast<const std::uint16_t*>(src)[k]) : static_cast<const float*>(src)[k];
    dst[i] = accumulate ? dst[i] + v : v;
  }
}

__global__ void mul_kernel(const float* a, const float* b, float* out, std::size_t n) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads()) out[i] = a[i] * b[i];
}

__global__ void pow_kernel(const float* src, float p, float* dst, std::size_t n) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads()) dst[i] = pow_forward(src[i], p);
}

__global__ void pow_backward_add_kernel(const float* src, float p, const float* diff_dst, float* diff_src,
                                        std::size_t n) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads())
    diff_src[i] = mpigan::cuda::pow_backward_add(src[i], p, diff_dst[i], diff_src[i]);
}

/// One mask word per thread and step: elements 32w .. 32w+31 use Philox words 16w .. 16w+15, i.e.
/// blocks 4w .. 4w+3 (two elements per word, core/rng.hpp dropout_uniform).
__global__ void dropout_kernel(const float* src, float* dst, std::uint32_t* bits, std::size_t n, float rate,
                               float keep_scale, std::uint64_t seed, std::uint64_t stream_id) {
  const std::size_t words = (n + 31) / 32;
  for (std::size_t w = global_thread(); w < words; w += grid_threads()) {
    std::uint32_t mask = 0;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const PhiloxWords pw = philox_block(seed, stream_id, 4 * w + b);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const std::size_t i = 32 * w + 8 * b + k;
        if (i >= n) break;
        const bool keep = dropout_keep(pw.v[k / 2], i, rate);
        mask |= static_cast<std::uint32_t>(keep) << (8 * b + k);
        dst[i] = keep ? src[i] * keep_scale : 0.0f;
      }
    }
    bits[w] = mask;
  }
}

__global__ void dropout_backward_kernel(const float* diff_dst, float* diff_src, const std::uint32_t* bits,
                                        std::size_t n, float keep_scale) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads())
    diff_src[i] = (bits[i / 32] >> (i % 32)) & 1u ? diff_dst[i] * keep_scale : 0.0f;
}

__global__ void sum_per_item_kernel(const float* src, std::int64_t item_numel, float* dst) {
  const float* item = src + static_cast<std::int64_t>(blockIdx.x) * item_numel;
  double acc = 0.0;
  for (std::int64_t j = threadIdx.x; j < item_numel; j += blockDim.x) acc += static_cast<double>(item[j]);
  acc = block_reduce_sum(acc);
  if (threadIdx.x == 0) dst[blockIdx.x] = static_cast<float>(acc);
}

__global__ void add_per_item_kernel(const float* diff_dst, std::int64_t item_numel, float* diff_src, std::size_t n) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads())
    diff_src[i] += diff_dst[static_cast<std::int64_t>(i) / item_numel];
}

struct SquareOp {
  __device__ double operator()(float x) const { return static_cast<double>(x) * static_cast<double>(x); }
};
struct NonFiniteOp {
  __device__ unsigned long long operator()(float x) const { return is_finite(x) ? 0ull : 1ull; }
};

/// Stage 1: block b writes the sum of its grid-stride share to partials[b].
template <class T, class Op>
__global__ void reduce_partials_kernel(const float* x, std::size_t n, T* partials, Op op) {
  T acc = T(0);
  for (std::size_t i = global_thread(); i < n; i += grid_threads()) acc += op(x[i]);
  acc = block_reduce_sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

/// Stage 2: one block sums the partials in a fixed order.
template <class T>
__global__ void reduce_final_kernel(const T* partials, unsigned count, T* result) {
  T acc = T(0);
  for (unsigned i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
  acc = block_reduce_sum(acc);
  if (threadIdx.x == 0) *result = acc;
}

template <class T, class Op>
void reduce(cudaStream_t stream, const float* x, std::size_t n, void* scratch, T* result, Op op) {
  constexpr std::size_t kMaxPartials = kReduceScratchBytes / sizeof(double);
  static_assert(sizeof(T) <= sizeof(double));
  auto* partials = static_cast<T*>(scratch);
  // About 4 values per thread before the tree; the block count depends on n only.
  std::size_t blocks = (n + 4 * kThreads - 1) / (4 * kThreads);
  blocks = blocks < 1 ? 1 : (blocks > kMaxPartials ? kMaxPartials : blocks);
  reduce_partials_kernel<T, Op><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, n, partials, op);
  MPIGAN_CUDA_CHECK_LAUNCH();
  reduce_final_kernel<T><<<1, kThreads, 0, stream>>>(partials, static_cast<unsigned>(blocks), result);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void fill(cudaStream_t stream, float* x, std::size_t n, float value) {
  if (n == 0) return;
  fill_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, n, value);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void axpby(cudaStream_t stream, float a, const float* x, float b, float* y, std::size_t n) {
  if (n == 0) return;
  axpby_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, x, b, y, n);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void to_bf16(cudaStream_t stream, const float* src, std::uint16_t* dst, std::size_t n) {
  if (n == 0) return;
  to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, dst, n);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void from_bf16(cudaStream_t stream, const std::uint16_t* src, float* dst, std::size_t n, bool accumulate) {
  if (n == 0) return;
  from_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, dst, n, accumulate);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void to_bf16_swap01(cudaStream_t stream, const Swap01Geometry& g, const float* src, std::uint16_t* dst) {
  const auto n = static_cast<std::size_t>(g.numel());
  if (n == 0) return;
  to_bf16_swap01_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, src, dst);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void from_swap01(cudaStream_t stream, const Swap01Geometry& g, const void* src, bool src_bf16, float* dst,
                 bool accumulate) {
  const auto n = static_cast<std::size_t>(g.numel());
  if (n == 0) return;
  from_swap01_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, src, src_bf16, dst, accumulate);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void mul(cudaStream_t stream, const float* a, const float* b, float* out, std::size_t n) {
  if (n == 0) return;
  mul_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, out, n);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void pow(cudaStream_t stream, const float* src, float p, float* dst, std::size_t n) {
  if (n == 0) return;
  pow_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, p, dst, n);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void pow_backward_add(cudaStream_t stream, const float* src, float p, const float* diff_dst, float* diff_src,
                      std::size_t n) {
  if (n == 0) return;
  pow_backward_add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(src, p, diff_dst, diff_src, n);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void dropout(cudaStream_t stream, const float* src, float* dst, std::uint32_t* bits, std::size_t n, float rate,
             float keep_scale, std::uint64_t seed, std::uint64_t stream_id) {
  if (n == 0) return;
  dropout_kernel<<<blocks_for(n, 32), kThreads, 0, stream>>>(src, dst, bits, n, rate, keep_scale, seed, stream_id);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void dropout_backward(cudaStream_t stream, const float* diff_dst, float* diff_src, const std::uint32_t* bits,
                      std::size_t n, float keep_scale) {
  if (n == 0) return;
  dropout_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(diff_dst, diff_src, bits, n, keep_scale);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void sum_per_item(cudaStream_t stream, const float* src, std::int64_t items, std::int64_t item_numel, float* dst) {
  if (items == 0) return;
  if (item_numel == 0) {
    fill(stream, dst, static_cast<std::size_t>(items), 0.0f);
    return;
  }
  sum_per_item_kernel<<<static_cast<unsigned>(items), kThreads, 0, stream>>>(src, item_numel, dst);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void add_per_item(cudaStream_t stream, const float* diff_dst, std::int64_t items, std::int64_t item_numel,
                  float* diff_src) {
  const auto n = static_cast<std::size_t>(items * item_numel);
  if (n == 0) return;
  add_per_item_kernel<<<blocks_for(n), kThreads, 0, stream>>>(diff_dst, item_numel, diff_src, n);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void sum_squares(cudaStream_t stream, const float* x, std::size_t n, void* scratch, double* result) {
  reduce<double>(stream, x, n, scratch, result, SquareOp{});
}

void count_nonfinite(cudaStream_t stream, const float* x, std::size_t n, void* scratch, unsigned long long* result) {
  reduce<unsigned long long>(stream, x, n, scratch, result, NonFiniteOp{});
}

}  // namespace mpigan::cuda::kernels
