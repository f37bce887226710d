// Device-side helpers shared by the .cu files: launch geometry for grid-stride loops and a
// deterministic block reduction.
//
// Invariants: kernels are launched with kThreads threads per block (a multiple of the warp size,
// which block_reduce_sum relies on). Grid sizes depend only on the problem size, never on the GPU
// model, so reductions add in the same order on every device and every run.
#pragma once

#include "mpigan/backend/cuda/cuda_check.hpp"

#include <cstddef>
#include <cstdint>

namespace mpigan::cuda::kernels {

inline constexpr int kThreads = 256;
/// Upper bound of blocks of a grid-stride launch: enough to fill any current GPU many times.
inline constexpr std::size_t kMaxBlocks = 65535;

inline unsigned blocks_for(std::size_t n, std::size_t per_thread = 1) {
  const std::size_t threads = (n + per_thread - 1) / per_thread;
  const std::size_t blocks = (threads + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

/// Index of this thread in a 1D grid and the grid's total thread count (for grid-stride loops).
__device__ __forceinline__ std::size_t global_thread() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::size_t grid_threads() {
  return static_cast<std::size_t>(gridDim.x) * blockDim.x;
}

/// Sum of @p v over the block; the result is valid in thread 0 only. Deterministic: a fixed tree
/// of warp shuffles, then the warp sums in warp order. Contains __syncthreads(): every thread of
/// the block must call it, and two calls in one kernel are separated by the barrier inside.
template <class T>
__device__ T block_reduce_sum(T v) {
  __shared__ T warp_sums[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  __syncthreads();  // warp_sums may still be read by a previous call
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  const int warps = static_cast<int>((blockDim.x + 31) >> 5);
  v = threadIdx.x < static_cast<unsigned>(warps) ? warp_sums[threadIdx.x] : T(0);
  if (warp == 0)
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

}  // namespace mpigan::cuda::kernels
