// Failure handlers of the checking macros (cuda_check.hpp): compose one message with the API's
// status name and text, the failed expression, file:line and the device; abort on sticky CUDA
// errors, throw mpigan::Error otherwise.
#include "mpigan/backend/cuda/cuda_check.hpp"

#include "mpigan/core/error.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace mpigan::cuda {
namespace {

std::string device_label() {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) return "device ?";
  return "device " + std::to_string(device);
}

[[noreturn]] void fail(const char* file, int line, std::string message, bool abort_process) {
  Error error(detail::source_location(file, line), std::move(message));
  if (abort_process) {
    std::fprintf(stderr, "%s\n(sticky CUDA error: the context is unusable, aborting)\n", error.what());
    std::fflush(stderr);
    std::abort();
  }
  throw error;
}

/// A library call may fail because an earlier kernel hit a sticky error; abort in that case too.
bool context_is_dead() {
  return is_sticky(cudaPeekAtLastError());
}

}  // namespace

bool is_sticky(cudaError_t status) {
  switch (status) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
    case cudaErrorNvlinkUncorrectable:
      return true;
    default:
      return false;
  }
}

void cuda_failed(cudaError_t status, const char* expr, const char* file, int line) {
  const bool sticky = is_sticky(status);
  // Clear a non-sticky error so the next launch check does not report it again.
  if (!sticky) (void)cudaGetLastError();
  fail(file, line,
       fmt::format("CUDA error {} ({}): {} in `{}` on {}", cudaGetErrorName(status), static_cast<int>(status),
                   cudaGetErrorString(status), expr, device_label()),
       sticky);
}

void cudnn_failed(cudnnStatus_t status, const char* expr, const char* file, int line) {
  std::string detail;
#if CUDNN_MAJOR >= 9
  char buffer[1024] = {};
  cudnnGetLastErrorString(buffer, sizeof buffer);
  if (buffer[0] != '\0') detail = std::string(" [") + buffer + "]";
#endif
  fail(file, line,
       fmt::format("cuDNN error {} ({}){} in `{}` on {}", cudnnGetErrorString(status), static_cast<int>(status), detail,
                   expr, device_label()),
       context_is_dead());
}

void cublas_failed(cublasStatus_t status, const char* expr, const char* file, int line) {
#if CUBLAS_VERSION >= 11600
  const std::string name = std::string(cublasGetStatusName(status)) + ": " + cublasGetStatusString(status);
#else
  const std::string name = "status";
#endif
  fail(file, line,
       fmt::format("cuBLAS error {} ({}) in `{}` on {}", name, static_cast<int>(status), expr, device_label()),
       context_is_dead());
}

void nccl_failed(ncclResult_t status, const char* expr, const char* file, int line) {
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
  const char* last = ncclGetLastError(nullptr);
#else
  const char* last = nullptr;
#endif
  fail(file, line,
       fmt::format("NCCL error {} ({}){}{} in `{}` on {}", ncclGetErrorString(status), static_cast<int>(status),
                   last && *last ? ": " : "", last ? last : "", expr, device_label()),
       context_is_dead());
}

}  // namespace mpigan::cuda
