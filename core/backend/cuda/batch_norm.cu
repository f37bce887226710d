// Batch normalisation kernels (per channel over N and the spatial dims), training, inference and
// backward, in the reference's conventions: batch mean and BIASED batch variance come out of the
// training forward and go back into the backward; any epsilon > 0 (the AngleGAN uses 1e-6, below
// cuDNN's CUDNN_BN_MIN_EPSILON), which is why these are own kernels rather than
// cudnnBatchNormalization* (that would also hand back inverse std, not the variance).
//
// Plan of one call (src (N, C, S), M = N*S values per channel, P = bn_splits(M) blocks each):
//   training:  partial sums (C x P blocks) -> mean (C blocks) -> partial squared deviations from
//              the mean -> variance and per-channel coefficients -> apply (grid-stride)
//   inference: coefficients from the given mean/var -> apply
//   backward:  partial sums of dy and dy*(x - mean) -> dgamma, dbeta (accumulated) and the
//              coefficients of diff_src -> apply
// Invariants: two-pass statistics in double like the reference; every reduction has a fixed shape
// (P depends on M only) and order, so results are deterministic and identical across GPU models;
// no atomics. Scratch (bn_scratch_bytes) is the caller's: partials, double means, coefficients.
#include "mpigan/backend/cuda/kernel_utils.cuh"
#include "mpigan/backend/cuda/launchers.hpp"

namespace mpigan::cuda::kernels {
namespace {

constexpr std::size_t align256(std::size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

struct BnScratch {
  double* partials;  // C * P * 2
  double* mean;      // C
  void* coef;        // C BnForwardCoef or BnBackwardCoef
};

BnScratch carve(const BnGeometry& g, void* scratch) {
  auto* base = static_cast<char*>(scratch);
  const auto C = static_cast<std::size_t>(g.c), P = static_cast<std::size_t>(g.splits);
  const std::size_t partial_bytes = align256(C * P * 2 * sizeof(double));
  const std::size_t mean_bytes = align256(C * sizeof(double));
  return {reinterpret_cast<double*>(base), reinterpret_cast<double*>(base + partial_bytes),
          base + partial_bytes + mean_bytes};
}

/// Block (c, p): sum over its share of channel c of x (center == nullptr) or of (x - center[c])^2.
__global__ void bn_partial_kernel(BnGeometry g, const float* x, const double* center, double* partials) {
  const std::int64_t c = blockIdx.x, p = blockIdx.y, M = g.per_channel();
  const std::int64_t stride = g.splits * blockDim.x;
  const double shift = center ? center[c] : 0.0;
  double acc = 0.0;
  for (std::int64_t j = p * blockDim.x + threadIdx.x; j < M; j += stride) {
    const double v = static_cast<double>(x[bn_channel_element(g, c, j)]);
    if (center) {
      const double d = v - shift;
      acc += d * d;
    } else {
      acc += v;
    }
  }
  acc = block_reduce_sum(acc);
  if (threadIdx.x == 0) partials[c * g.splits + p] = acc;
}

/// Sum of the P partials of channel blockIdx.x with stride @p width (fixed order).
__device__ double sum_partials(const double* partials, std::int64_t P, int width, int which) {
  double acc = 0.0;
  for (std::int64_t p = threadIdx.x; p < P; p += blockDim.x) acc += partials[(blockIdx.x * P + p) * width + which];
  return block_reduce_sum(acc);
}

__global__ void bn_mean_kernel(BnGeometry g, const double* partials, double* mean_d, float* batch_mean) {
  const double sum = sum_partials(partials, g.splits, 1, 0);
  if (threadIdx.x == 0) {
    const double mean = sum / static_cast<double>(g.per_channel());
    mean_d[blockIdx.x] = mean;
    batch_mean[blockIdx.x] = static_cast<float>(mean);
  }
}

__global__ void bn_var_kernel(BnGeometry g, float epsilon, const double* partials, const double* mean_d,
                              const float* gamma, const float* beta, float* batch_var, BnForwardCoef* coef) {
  const double sq = sum_partials(partials, g.splits, 1, 0);
  if (threadIdx.x == 0) {
    const unsigned c = blockIdx.x;
    const double var = sq / static_cast<double>(g.per_channel());
    batch_var[c] = static_cast<float>(var);
    coef[c] = bn_forward_coef(mean_d[c], var, epsilon, gamma[c], beta[c]);
  }
}

__global__ void bn_inference_coef_kernel(std::int64_t channels, float epsilon, const float* gamma, const float* beta,
                                         const float* mean, const float* var, BnForwardCoef* coef) {
  for (std::size_t c = global_thread(); c < static_cast<std::size_t>(channels); c += grid_threads())
    coef[c] = bn_forward_coef(static_cast<double>(mean[c]), static_cast<double>(var[c]), epsilon, gamma[c], beta[c]);
}

__global__ void bn_apply_forward_kernel(BnGeometry g, const float* x, const BnForwardCoef* coef, float* dst,
                                        std::size_t n) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads()) {
    const auto ii = static_cast<std::int64_t>(i);
    dst[i] = bn_forward_apply(coef[bn_channel_of(g, ii)], x[i]);
  }
}

/// Block (c, p): partial sums of dy and dy * (x - mean[c]) -> partials[(c*P + p)*2 + {0, 1}].
__global__ void bn_partial_backward_kernel(BnGeometry g, const float* x, const float* dy, const float* mean,
                                           double* partials) {
  const std::int64_t c = blockIdx.x, p = blockIdx.y, M = g.per_channel();
  const std::int64_t stride = g.splits * blockDim.x;
  const double mu = static_cast<double>(mean[c]);
  double acc_dy = 0.0, acc_dy_xmu = 0.0;
  for (std::int64_t j = p * blockDim.x + threadIdx.x; j < M; j += stride) {
    const std::int64_t i = bn_channel_element(g, c, j);
    const double d = static_cast<double>(dy[i]);
    acc_dy += d;
    acc_dy_xmu += d * (static_cast<double>(x[i]) - mu);
  }
  acc_dy = block_reduce_sum(acc_dy);
  acc_dy_xmu = block_reduce_sum(acc_dy_xmu);
  if (threadIdx.x == 0) {
    partials[(c * g.splits + p) * 2 + 0] = acc_dy;
    partials[(c * g.splits + p) * 2 + 1] = acc_dy_xmu;
  }
}

__global__ void bn_backward_coef_kernel(BnGeometry g, float epsilon, const double* partials, const float* gamma,
                                        const float* mean, const float* var, float* diff_gamma, float* diff_beta,
                                        BnBackwardCoef* coef) {
  const double sum_dy = sum_partials(partials, g.splits, 2, 0);
  const double sum_dy_xmu = sum_partials(partials, g.splits, 2, 1);
  if (threadIdx.x == 0) {
    const unsigned c = blockIdx.x;
    double dgamma = 0.0, dbeta = 0.0;
    coef[c] = bn_backward_coef(sum_dy, sum_dy_xmu, static_cast<double>(g.per_channel()), mean[c], var[c], epsilon,
                               gamma[c], &dgamma, &dbeta);
    if (diff_gamma) diff_gamma[c] += static_cast<float>(dgamma);
    if (diff_beta) diff_beta[c] += static_cast<float>(dbeta);
  }
}

__global__ void bn_apply_backward_kernel(BnGeometry g, const float* x, const float* dy, const BnBackwardCoef* coef,
                                         float* dx, std::size_t n) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads()) {
    const auto ii = static_cast<std::int64_t>(i);
    dx[i] = bn_backward_apply(coef[bn_channel_of(g, ii)], x[i], dy[i]);
  }
}

dim3 partial_grid(const BnGeometry& g) {
  return dim3(static_cast<unsigned>(g.c), static_cast<unsigned>(g.splits));
}

}  // namespace

std::size_t bn_scratch_bytes(const BnGeometry& g) {
  const auto C = static_cast<std::size_t>(g.c), P = static_cast<std::size_t>(g.splits);
  return align256(C * P * 2 * sizeof(double)) + align256(C * sizeof(double)) + align256(C * sizeof(BnBackwardCoef));
}

void bn_forward_training(cudaStream_t stream, const BnGeometry& g, float epsilon, const float* src, const float* gamma,
                         const float* beta, float* dst, float* batch_mean, float* batch_var, void* scratch) {
  if (g.numel() == 0) return;
  const BnScratch s = carve(g, scratch);
  auto* coef = static_cast<BnForwardCoef*>(s.coef);
  const auto C = static_cast<unsigned>(g.c);
  bn_partial_kernel<<<partial_grid(g), kThreads, 0, stream>>>(g, src, nullptr, s.partials);
  MPIGAN_CUDA_CHECK_LAUNCH();
  bn_mean_kernel<<<C, kThreads, 0, stream>>>(g, s.partials, s.mean, batch_mean);
  MPIGAN_CUDA_CHECK_LAUNCH();
  bn_partial_kernel<<<partial_grid(g), kThreads, 0, stream>>>(g, src, s.mean, s.partials);
  MPIGAN_CUDA_CHECK_LAUNCH();
  bn_var_kernel<<<C, kThreads, 0, stream>>>(g, epsilon, s.partials, s.mean, gamma, beta, batch_var, coef);
  MPIGAN_CUDA_CHECK_LAUNCH();
  const auto n = static_cast<std::size_t>(g.numel());
  bn_apply_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, src, coef, dst, n);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void bn_forward_inference(cudaStream_t stream, const BnGeometry& g, float epsilon, const float* src, const float* gamma,
                          const float* beta, const float* mean, const float* var, float* dst, void* scratch) {
  if (g.numel() == 0) return;
  auto* coef = static_cast<BnForwardCoef*>(carve(g, scratch).coef);
  bn_inference_coef_kernel<<<blocks_for(static_cast<std::size_t>(g.c)), kThreads, 0, stream>>>(g.c, epsilon, gamma,
                                                                                               beta, mean, var, coef);
  MPIGAN_CUDA_CHECK_LAUNCH();
  const auto n = static_cast<std::size_t>(g.numel());
  bn_apply_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, src, coef, dst, n);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void bn_backward(cudaStream_t stream, const BnGeometry& g, float epsilon, const float* src, const float* diff_dst,
                 const float* gamma, const float* mean, const float* var, float* diff_src, float* diff_gamma,
                 float* diff_beta, void* scratch) {
  if (g.numel() == 0) return;
  const BnScratch s = carve(g, scratch);
  auto* coef = static_cast<BnBackwardCoef*>(s.coef);
  bn_partial_backward_kernel<<<partial_grid(g), kThreads, 0, stream>>>(g, src, diff_dst, mean, s.partials);
  MPIGAN_CUDA_CHECK_LAUNCH();
  bn_backward_coef_kernel<<<static_cast<unsigned>(g.c), kThreads, 0, stream>>>(g, epsilon, s.partials, gamma, mean, var,
                                                                               diff_gamma, diff_beta, coef);
  MPIGAN_CUDA_CHECK_LAUNCH();
  const auto n = static_cast<std::size_t>(g.numel());
  bn_apply_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, src, diff_dst, coef, diff_src, n);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

}  // namespace mpigan::cuda::kernels
