// Nearest-neighbour upsampling by integer factors (Keras UpSampling3D), forward and backward.
//
//   forward:  dst (NC, D*FD, H*FH, W*FW), each src voxel repeated over an FD x FH x FW block
//   backward: diff_src (NC, D, H, W) = sum of diff_dst over the block (overwrites)
//
// Invariants: one thread per output element; the backward gathers (no atomics), accumulating in
// double in the reference's order, so it is deterministic and bit-identical to the reference.
#include "mpigan/backend/cuda/kernel_utils.cuh"
#include "mpigan/backend/cuda/launchers.hpp"

namespace mpigan::cuda::kernels {
namespace {

__global__ void upsample_forward_kernel(UpsampleGeometry g, const float* src, float* dst, std::size_t n) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads())
    dst[i] = src[upsample_source_index(g, static_cast<std::int64_t>(i))];
}

__global__ void upsample_backward_kernel(UpsampleGeometry g, const float* diff_dst, float* diff_src, std::size_t n) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads())
    diff_src[i] = upsample_backward_element(g, diff_dst, static_cast<std::int64_t>(i));
}

}  // namespace

void upsample_forward(cudaStream_t stream, const UpsampleGeometry& g, const float* src, float* dst) {
  const auto n = static_cast<std::size_t>(g.dst_numel());
  if (n == 0) return;
  upsample_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, src, dst, n);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void upsample_backward(cudaStream_t stream, const UpsampleGeometry& g, const float* diff_dst, float* diff_src) {
  const auto n = static_cast<std::size_t>(g.src_numel());
  if (n == 0) return;
  upsample_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, diff_dst, diff_src, n);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

}  // namespace mpigan::cuda::kernels
