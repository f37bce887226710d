// Element-wise activations (relu, leaky_relu, sigmoid) forward and backward.
//
// Invariants: formulas are device_math.hpp's act_forward/act_backward (the reference's, incl.
// the kink conventions); the backward reads the forward OUTPUT. Each thread reads element i and
// writes element i only, so dst may alias src and diff_src may alias diff_dst.
// Own kernels rather than cudnnActivation*: cuDNN's legacy activations have no leaky ReLU and
// take x, not y, in the backward.
#include "mpigan/backend/cuda/kernel_utils.cuh"
#include "mpigan/backend/cuda/launchers.hpp"

namespace mpigan::cuda::kernels {
namespace {

__global__ void eltwise_forward_kernel(Act kind, float alpha, const float* src, float* dst, std::size_t n) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads()) dst[i] = act_forward(kind, alpha, src[i]);
}

__global__ void eltwise_backward_kernel(Act kind, float alpha, const float* dst, const float* diff_dst, float* diff_src,
                                        std::size_t n) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads())
    diff_src[i] = act_backward(kind, alpha, dst[i], diff_dst[i]);
}

}  // namespace

void eltwise_forward(cudaStream_t stream, Act kind, float alpha, const float* src, float* dst, std::size_t n) {
  if (n == 0) return;
  eltwise_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(kind, alpha, src, dst, n);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void eltwise_backward(cudaStream_t stream, Act kind, float alpha, const float* dst, const float* diff_dst,
                      float* diff_src, std::size_t n) {
  if (n == 0) return;
  eltwise_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(kind, alpha, dst, diff_dst, diff_src, n);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

}  // namespace mpigan::cuda::kernels
