// The backend registry: names to constructors, compiled in per build (MPIGAN_HAVE_CUDA is 0 or 1).
#include "mpigan/backend/cpu/cpu_backend.hpp"
#include "mpigan/backend/reference/reference_backend.hpp"
#include "mpigan/core/backend.hpp"
#include "mpigan/core/error.hpp"

#include <spdlog/spdlog.h>

#include <omp.h>

#if MPIGAN_HAVE_CUDA
#include "mpigan/backend/cuda/cuda_backend.hpp"
#endif

namespace mpigan {

std::vector<std::string> backend_names() {
  std::vector<std::string> names{"reference", "cpu"};
#if MPIGAN_HAVE_CUDA
  names.push_back("cuda");
#endif
  return names;
}

std::vector<std::string> known_backend_names() {
  return {"reference", "cpu", "cuda"};
}

int host_threads() {
  return omp_get_max_threads();
}

void set_host_threads(int n) {
  if (n > 0) omp_set_num_threads(n);
}

int device_count(const std::string& name) {
#if MPIGAN_HAVE_CUDA
  if (name == "cuda") return cuda_device_count();
#endif
  (void)name;
  return 0;
}

bool backend_available(const std::string& name, std::string* why_not) {
  auto set = [&](std::string s) {
    if (why_not) *why_not = std::move(s);
    return false;
  };
  if (name == "reference" || name == "cpu") return true;
  if (name == "cuda") {
#if MPIGAN_HAVE_CUDA
    const int n = cuda_device_count();
    return n > 0 ? true : set("no CUDA device is visible (cudaGetDeviceCount returned 0 or failed)");
#else
    return set("this build has no CUDA backend (configured with MPIGAN_CUDA=OFF or no CUDA toolkit found)");
#endif
  }
  return set("unknown backend '" + name + "'");
}

const char* precision_name(Precision p) {
  return p == Precision::bf16 ? "bf16" : "fp32";
}

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::fp32;
  if (name == "bf16") return Precision::bf16;
  MPIGAN_FATAL("unknown precision '{}': expected fp32 or bf16", name);
}

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options) {
  if (options.precision != Precision::fp32 && name != "cpu" && name != "cuda")
    spdlog::warn("precision {}: the {} backend has no bf16 convolutions; running fp32",
                 precision_name(options.precision), name);
  if (name == "reference") return std::make_unique<ReferenceBackend>();
  if (name == "cpu") return std::make_unique<CpuBackend>(options);
#if MPIGAN_HAVE_CUDA
  if (name == "cuda") return make_cuda_backend(options);
#endif
  std::string known;
  for (const auto& n : backend_names()) known += (known.empty() ? "" : ", ") + n;
  MPIGAN_FATAL("unknown backend '{}': this build has {}", name, known);
}

}  // namespace mpigan
