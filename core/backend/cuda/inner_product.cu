// The bias parts of the inner product (dense layer); the matrix products are cuBLAS calls in
// inner_product.cpp.
//
//   add_bias_rows:        dst(rows, cols) += bias(cols)
//   accumulate_bias_grad: diff_bias(cols) += sum over rows of diff_dst(rows, cols)
//
// Invariants: row-major (rows = batch N, cols = OC). The gradient is one thread per column summing
// its rows in double in row order (adjacent threads read adjacent columns: coalesced), so it is
// deterministic and follows the reference's accumulation contract (+=).
#include "mpigan/backend/cuda/kernel_utils.cuh"
#include "mpigan/backend/cuda/launchers.hpp"

namespace mpigan::cuda::kernels {
namespace {

__global__ void add_bias_rows_kernel(float* dst, const float* bias, std::int64_t cols, std::size_t n) {
  for (std::size_t i = global_thread(); i < n; i += grid_threads()) dst[i] += bias[static_cast<std::int64_t>(i) % cols];
}

__global__ void bias_grad_kernel(const float* diff_dst, std::int64_t rows, std::int64_t cols, float* diff_bias) {
  for (std::size_t o = global_thread(); o < static_cast<std::size_t>(cols); o += grid_threads()) {
    double acc = 0.0;
    const auto col = static_cast<std::int64_t>(o);
    for (std::int64_t r = 0; r < rows; ++r) acc += static_cast<double>(diff_dst[r * cols + col]);
    diff_bias[o] += static_cast<float>(acc);
  }
}

}  // namespace

void add_bias_rows(cudaStream_t stream, float* dst, const float* bias, std::int64_t rows, std::int64_t cols) {
  const auto n = static_cast<std::size_t>(rows * cols);
  if (n == 0) return;
  add_bias_rows_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dst, bias, cols, n);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

void accumulate_bias_grad(cudaStream_t stream, const float* diff_dst, std::int64_t rows, std::int64_t cols,
                          float* diff_bias) {
  if (cols == 0) return;
  bias_grad_kernel<<<blocks_for(static_cast<std::size_t>(cols)), kThreads, 0, stream>>>(diff_dst, rows, cols,
                                                                                        diff_bias);
  MPIGAN_CUDA_CHECK_LAUNCH();
}

}  // namespace mpigan::cuda::kernels
