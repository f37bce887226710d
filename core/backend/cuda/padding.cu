// Explicit zero padding for convolutions whose padding is asymmetric (TF 'same' with an even
// kernel: pad_l = (k-1)/2, pad_r = k/2), which cuDNN cannot express (conv3d_plan.hpp).
//
//   pad:  padded (NC, PD, PH, PW) = src (NC, D, H, W) at offset (LD, LH, LW), zeros elsewhere
//   crop: dst (NC, D, H, W) = the interior of padded (the backward of pad for diff_src)
//   swap01: dst (B, A, inner) = src (A, B, inner), or += (the weight gradient as a forward
//           convolution moves its operands and its result with it; conv3d_plan.hpp)
//
// Invariants: one thread per output element, index maps from device_math.hpp; every output
// element is written (pad writes the zeros too), so neither needs a prior fill.
#include "mpigan/backend/cuda/kernel_utils.cuh"
#include "mpigan/backend/cuda/launchers.hpp"

namespace mpigan::cuda::kernels {
namespace {

__global__ void pad_kernel(PadGeometry g, const float* src, float* padded, std::size_t n) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads())
    padded[i] = pad_element(g, src, static_cast<std::int64_t>(i));
}

__global__ void crop_kernel(PadGeometry g, const float* padded, float* dst, std::size_t n) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads())
    dst[i] = padded[crop_source_index(g, static_cast<std::int64_t>(i))];
}

__global__ void swap01_kernel(Swap01Geometry g, const float* src, float* dst, bool accumulate, std::size_t n) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads()) {
    const float v = src[swap01_source_index(g, static_cast<std::int64_t>(i))];
    dst[i] = accumulate ? dst[i] + v : v;
  }
}

}  // namespace

void pad(cudaStream_t stream, const PadGeometry& g, const float* src, float* padded) {
  const auto n = static_cast<std::size_t>(g.padded_numel());
  if (n == 0) return;
  pad_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, src, padded, n);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void crop(cudaStream_t stream, const PadGeometry& g, const float* padded, float* dst) {
  const auto n = static_cast<std::size_t>(g.src_numel());
  if (n == 0) return;
  crop_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, padded, dst, n);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void swap01(cudaStream_t stream, const Swap01Geometry& g, const float* src, float* dst, bool accumulate) {
  const auto n = static_cast<std::size_t>(g.numel());
  if (n == 0) return;
  swap01_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, src, dst, accumulate, n);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

}  // namespace mpigan::cuda::kernels
