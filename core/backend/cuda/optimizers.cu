// Fused optimizer updates over flat parameter buffers (Backend::sgd_update, rmsprop_update,
// adam_update): one pass reads w, g and the state, writes w and the state.
//
// Invariants: the per-element formulas are device_math.hpp's sgd_step/rmsprop_step/adam_step, in
// the reference's evaluation order; with -fmad=false (set for every .cu of this target) an update
// is bit-identical to the reference backend's. The gap floats between ParameterSet segments are
// zero in w, g and the state and stay zero under every rule (g = 0, state = 0 -> no change).
#include "mpigan/backend/cuda/kernel_utils.cuh"
#include "mpigan/backend/cuda/launchers.hpp"

namespace mpigan::cuda::kernels {
namespace {

__global__ void sgd_kernel(float* w, const float* g, float* v, std::size_t n, float lr, float momentum, bool nesterov) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads()) {
    float wi = w[i];
    // v is not touched (may be undefined) without momentum, as in the reference.
    float vi = momentum == 0.0f ? 0.0f : v[i];
    sgd_step(wi, g[i], vi, lr, momentum, nesterov);
    w[i] = wi;
    if (momentum != 0.0f) v[i] = vi;
  }
}

__global__ void rmsprop_kernel(float* w, const float* g, float* ms, std::size_t n, float lr, float rho, float epsilon) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads()) {
    float wi = w[i], mi = ms[i];
    rmsprop_step(wi, g[i], mi, lr, rho, epsilon);
    w[i] = wi;
    ms[i] = mi;
  }
}

__global__ void adam_kernel(float* w, const float* g, float* m, float* v, std::size_t n, float lr_t, float beta1,
                            float beta2, float epsilon) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads()) {
    float wi = w[i], mi = m[i], vi = v[i];
    adam_step(wi, g[i], mi, vi, lr_t, beta1, beta2, epsilon);
    w[i] = wi;
    m[i] = mi;
    v[i] = vi;
  }
}

}  // namespace

void sgd_update(cudaStream_t stream, float* w, const float* g, float* v, std::size_t n, float lr, float momentum,
                bool nesterov) {
  if (n == 0) return;
  sgd_kernel<<<blocks_for(n), kThreads, 0, stream>>>(w, g, v, n, lr, momentum, nesterov);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void rmsprop_update(cudaStream_t stream, float* w, const float* g, float* ms, std::size_t n, float lr, float rho,
                    float epsilon) {
  if (n == 0) return;
  rmsprop_kernel<<<blocks_for(n), kThreads, 0, stream>>>(w, g, ms, n, lr, rho, epsilon);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void adam_update(cudaStream_t stream, float* w, const float* g, float* m, float* v, std::size_t n, float lr_t,
                 float beta1, float beta2, float epsilon) {
  if (n == 0) return;
  adam_kernel<<<blocks_for(n), kThreads, 0, stream>>>(w, g, m, v, n, lr_t, beta1, beta2, epsilon);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

}  // namespace mpigan::cuda::kernels
