// One checking macro per C API of the CUDA backend (style: ggml-cuda's CUDA_CHECK, kokkos'
// Kokkos_Cuda_Error.hpp):
//
//   MPIGAN_CUDA_CHECK(cudaMemcpyAsync(...));    // CUDA runtime, cudaError_t
//   MPIGAN_CUDA_CHECK_LAUNCH();                 // after every <<<...>>> launch
//   MPIGAN_CUDNN_CHECK(cudnnConvolutionForward(...));
//   MPIGAN_CUBLAS_CHECK(cublasSgemm(...));
//   MPIGAN_NCCL_CHECK(ncclAllReduce(...));
//
// Each failure records the expression, file:line and the current device. Policy:
//  - Sticky CUDA errors (illegal address, launch failure, hardware exceptions, ...) leave the
//    context unusable: every later call would fail with the same code, and unwinding would only
//    run destructors that call into the dead context. They print the message to stderr and
//    std::abort(); the job launcher then tears the other ranks down.
//  - Everything else (out of memory, bad arguments, unsupported configurations, NCCL errors)
//    throws mpigan::Error so the caller may report it with context.
//
// This header is included by .cu files, so it must not include the fmt-based mpigan headers
// (nvcc may be an older C++17 compiler); the failure handlers live in cuda_check.cpp.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

namespace mpigan::cuda {

[[noreturn]] void cuda_failed(cudaError_t status, const char* expr, const char* file, int line);
[[noreturn]] void cudnn_failed(cudnnStatus_t status, const char* expr, const char* file, int line);
[[noreturn]] void cublas_failed(cublasStatus_t status, const char* expr, const char* file, int line);
[[noreturn]] void nccl_failed(ncclResult_t status, const char* expr, const char* file, int line);

/// Whether @p status leaves the CUDA context unusable (the handler aborts on these).
bool is_sticky(cudaError_t status);

}  // namespace mpigan::cuda

#define MPIGAN_CUDA_CHECK(expr)                                                                                \
  do {                                                                                                         \
    const cudaError_t mpigan_status_ = (expr);                                                                 \
    if (mpigan_status_ != cudaSuccess) ::mpigan::cuda::cuda_failed(mpigan_status_, #expr, __FILE__, __LINE__); \
  } while (0)

/// Launch errors (bad configuration, no kernel image for this GPU) are reported by
/// cudaGetLastError(); faults inside the kernel surface at the next synchronising call.
/// Run with CUDA_LAUNCH_BLOCKING=1 to attribute them to the launch that caused them.
#define MPIGAN_CUDA_CHECK_LAUNCH() MPIGAN_CUDA_CHECK(cudaGetLastError())

#define MPIGAN_CUDNN_CHECK(expr)                                               \
  do {                                                                         \
    const cudnnStatus_t mpigan_status_ = (expr);                               \
    if (mpigan_status_ != CUDNN_STATUS_SUCCESS)                                \
      ::mpigan::cuda::cudnn_failed(mpigan_status_, #expr, __FILE__, __LINE__); \
  } while (0)

#define MPIGAN_CUBLAS_CHECK(expr)                                               \
  do {                                                                          \
    const cublasStatus_t mpigan_status_ = (expr);                               \
    if (mpigan_status_ != CUBLAS_STATUS_SUCCESS)                                \
      ::mpigan::cuda::cublas_failed(mpigan_status_, #expr, __FILE__, __LINE__); \
  } while (0)

#define MPIGAN_NCCL_CHECK(expr)                                                                                \
  do {                                                                                                         \
    const ncclResult_t mpigan_status_ = (expr);                                                                \
    if (mpigan_status_ != ncclSuccess) ::mpigan::cuda::nccl_failed(mpigan_status_, #expr, __FILE__, __LINE__); \
  } while (0)
