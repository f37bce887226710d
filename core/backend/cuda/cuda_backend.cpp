// CudaBackend: device choice, memory and copies, op factories, and the flat-buffer math (whose
// kernels are in flat_math.cu and optimizers.cu).
#include "mpigan/backend/cuda/cuda_backend.hpp"

#include "mpigan/backend/cuda/cuda_context.hpp"
#include "mpigan/backend/cuda/cuda_ops.hpp"
#include "mpigan/backend/cuda/launchers.hpp"
#include "mpigan/core/env.hpp"
#include "mpigan/core/error.hpp"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>

namespace mpigan {

using cuda::Context;
namespace kernels = cuda::kernels;

namespace cuda {

void require_device(const Tensor& t, const char* op, const char* role) {
  MPIGAN_CHECK(t.defined(), "cuda {}: {} is undefined", op, role);
  MPIGAN_CHECK(t.device() == Device::cuda && t.canonical(), "cuda {}: {} must be a canonical GPU tensor, got {} on {}",
               op, role, t.desc().to_string(), to_string(t.device()));
}

void require_device(const Tensor& t, const Shape& want, const char* op, const char* role) {
  require_device(t, op, role);
  MPIGAN_CHECK_SHAPE(t.shape() == want, "cuda {}: {} shape expected {}, found {}", op, role, want, t.shape());
}

void require_canonical_desc(const TensorDesc& src, const char* op) {
  MPIGAN_CHECK(src.canonical(), "cuda {}: input layout must be canonical (this backend has no other), got {}", op,
               src.to_string());
}

}  // namespace cuda

namespace {

std::size_t same_size(const Tensor& a, const Tensor& b, const char* op) {
  cuda::require_device(a, op, "first operand");
  cuda::require_device(b, op, "second operand");
  MPIGAN_CHECK(a.physical_elems() == b.physical_elems(), "cuda {}: sizes differ ({} vs {})", op, a.desc().to_string(),
               b.desc().to_string());
  return a.physical_elems();
}

/// The node-local rank from the launcher's environment (see choose_cuda_device), or -1.
int local_rank_from_env(std::string* variable) {
  static const char* const kVariables[] = {"MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK",
                                           "SLURM_LOCALID", "PALS_LOCAL_RANKID"};
  for (const char* name : kVariables) {
    const char* v = env_value(name);
    if (!v) continue;
    char* end = nullptr;
    const long rank = std::strtol(v, &end, 10);
    MPIGAN_CHECK(end && *end == '\0' && rank >= 0, "environment variable {}='{}' is not a node-local rank", name, v);
    *variable = name;
    return static_cast<int>(rank);
  }
  return -1;
}

std::string version_string(std::size_t cudnn) {
  // cuDNN 9 encodes major*10000 + minor*100 + patch, cuDNN 8 major*1000 + minor*100 + patch.
  return cudnn >= 90000 ? fmt::format("{}.{}.{}", cudnn / 10000, cudnn / 100 % 100, cudnn % 100)
                        : fmt::format("{}.{}.{}", cudnn / 1000, cudnn / 100 % 10, cudnn % 100);
}

}  // namespace

int cuda_device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

int choose_cuda_device(int requested, std::string* reason) {
  std::string why;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    MPIGAN_FATAL(
        "cuda backend: no usable CUDA device: cudaGetDeviceCount failed with {} ({}); "
        "CUDA_VISIBLE_DEVICES={}",
        cudaGetErrorName(status), cudaGetErrorString(status), visible ? visible : "(unset)");
  }
  MPIGAN_CHECK(count > 0, "cuda backend: no CUDA device is visible (CUDA_VISIBLE_DEVICES={})",
               std::getenv("CUDA_VISIBLE_DEVICES") ? std::getenv("CUDA_VISIBLE_DEVICES") : "(unset)");
  int device = 0;
  if (requested >= 0) {
    MPIGAN_CHECK(requested < count, "cuda backend: device_id {} requested but only {} device{} visible", requested,
                 count, count == 1 ? " is" : "s are");
    device = requested;
    why = fmt::format("device_id {} from the backend options", requested);
  } else {
    MPIGAN_CHECK(requested == -1, "cuda backend: device_id must be >= 0, or -1 for the node-local rank; got {}",
                 requested);
    std::string variable;
    const int local = local_rank_from_env(&variable);
    if (local >= 0) {
      device = local % count;
      why = fmt::format("node-local rank {} ({}) modulo {} visible device{}", local, variable, count,
                        count == 1 ? "" : "s");
    } else {
      why = "no node-local rank in the environment: device 0";
    }
  }
  if (reason) *reason = why;
  return device;
}

std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options) {
  return std::make_unique<CudaBackend>(options);
}

std::shared_ptr<Storage> allocate_pinned_host(std::size_t bytes) {
  void* p = nullptr;
  // Portable: pinned for every CUDA context of the process, not only the current device's.
  MPIGAN_CUDA_CHECK(cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocPortable));
  return std::make_shared<Storage>(p, bytes, Device::cpu, [](void* q) {
    if (cudaFreeHost(q) != cudaSuccess) (void)cudaGetLastError();
  });
}

Tensor pinned_host_tensor(const Shape& shape) {
  const std::size_t bytes = static_cast<std::size_t>(shape.numel()) * sizeof(float);
  return Tensor::in_storage({shape, nullptr}, allocate_pinned_host(bytes));
}

// ----------------------------------------------------------------------------------------------

CudaBackend::CudaBackend(const BackendOptions& options) {
  cuda::DeviceChoice choice;
  choice.device = choose_cuda_device(options.device_id, &choice.reason);
  cuda::Settings settings = cuda::Settings::from_env();
  if (options.precision == Precision::bf16) {
    int major = 0, minor = 0;
    MPIGAN_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, choice.device));
    MPIGAN_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, choice.device));
    if (major < 8)
      spdlog::warn("precision bf16: GPU {} is sm_{}{}; bf16 tensor cores need sm_80 or newer; running fp32",
                   choice.device, major, minor);
    else if (settings.conv_api == cuda::Settings::ConvApi::legacy)
      spdlog::warn(
          "precision bf16: the cuda backend runs bf16 convolutions through cuDNN's graph API, which "
          "MPIGAN_CUDA_CONV_API=legacy turns off; running fp32");
    else
      settings.bf16 = true;
  }
  m_ctx = std::make_unique<Context>(std::move(choice), settings);
}

Precision CudaBackend::precision() const {
  return m_ctx->settings().bf16 ? Precision::bf16 : Precision::fp32;
}

CudaBackend::~CudaBackend() = default;

std::string CudaBackend::describe() const {
  const auto& p = m_ctx->props();
  int runtime = 0, driver = 0, cublas = 0, nccl = 0;
  (void)cudaRuntimeGetVersion(&runtime);
  (void)cudaDriverGetVersion(&driver);
  (void)cublasGetVersion(m_ctx->cublas(), &cublas);
  (void)ncclGetVersion(&nccl);
  return fmt::format(
      "cuda (device {}: {}, sm_{}{}, {} SMs, {:.1f} GiB; CUDA runtime {}.{}, driver {}.{}, cuDNN {}, cuBLAS {}.{}.{}, "
      "NCCL {}.{}.{}; {}; device chosen by {})",
      m_ctx->device(), p.name, p.major, p.minor, p.multiProcessorCount,
      static_cast<double>(p.totalGlobalMem) / (1 << 30), runtime / 1000, runtime % 1000 / 10, driver / 1000,
      driver % 1000 / 10, version_string(cudnnGetVersion()), cublas / 10000, cublas / 100 % 100, cublas % 100,
      nccl / 10000, nccl / 100 % 100, nccl % 100, m_ctx->settings().to_string(), m_ctx->choice().reason);
}

int CudaBackend::device_id() const {
  return m_ctx->device();
}
std::size_t CudaBackend::memory_in_use() const {
  return m_ctx->allocator()->stats().in_use;
}
std::size_t CudaBackend::memory_cached() const {
  return m_ctx->allocator()->stats().cached;
}
std::size_t CudaBackend::device_memory_peak() const {
  return m_ctx->allocator()->stats().peak_in_use;
}
void CudaBackend::reset_device_memory_peak() {
  m_ctx->allocator()->reset_peak();
}
void CudaBackend::empty_cache() {
  m_ctx->allocator()->empty_cache();
}

std::shared_ptr<Storage> CudaBackend::allocate_storage(std::size_t bytes) {
  m_ctx->activate();
  return cuda::device_storage(m_ctx->allocator(), bytes);
}

void CudaBackend::reorder(const Tensor& src, Tensor& dst) {
  MPIGAN_CHECK_SHAPE(src.shape() == dst.shape(), "cuda reorder: shapes differ ({} vs {})", src.shape(), dst.shape());
  MPIGAN_CHECK(src.canonical() && dst.canonical(), "cuda reorder: only canonical layouts exist here ({} -> {})",
               src.desc().to_string(), dst.desc().to_string());
  m_ctx->activate();
  const std::size_t bytes = static_cast<std::size_t>(src.numel()) * sizeof(float);
  if (bytes == 0) return;
  // cudaMemcpyDefault: unified addressing tells the direction (device/device, host/device).
  MPIGAN_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDefault, m_ctx->stream()));
  if (src.device() == Device::cpu || dst.device() == Device::cpu) m_ctx->sync();
}

Tensor CudaBackend::to_host(const Tensor& src) {
  if (src.device() == Device::cpu) return src.clone();
  Tensor host = Tensor::empty(src.shape());
  copy_to_host(src, host, true);
  return host;
}

void CudaBackend::from_host(const Tensor& host, Tensor& dst) {
  MPIGAN_CHECK_SHAPE(host.shape() == dst.shape(), "cuda from_host: shapes differ ({} vs {})", host.shape(),
                     dst.shape());
  copy_from_host(host, dst, true);
}

void CudaBackend::copy_to_host(const Tensor& src, Tensor& host, bool wait) {
  cuda::require_device(src, "copy_to_host", "src");
  MPIGAN_CHECK(host.defined() && host.device() == Device::cpu && host.canonical(),
               "cuda copy_to_host: destination must be a canonical host tensor, got {}", host.desc().to_string());
  MPIGAN_CHECK_SHAPE(host.numel() == src.numel(), "cuda copy_to_host: {} elements into {}", src.numel(), host.numel());
  m_ctx->activate();
  const std::size_t bytes = static_cast<std::size_t>(src.numel()) * sizeof(float);
  if (bytes > 0)
    MPIGAN_CUDA_CHECK(cudaMemcpyAsync(host.data(), src.data(), bytes, cudaMemcpyDeviceToHost, m_ctx->stream()));
  if (wait) m_ctx->sync();
}

void CudaBackend::copy_from_host(const Tensor& host, Tensor& dst, bool wait) {
  cuda::require_device(dst, "copy_from_host", "dst");
  MPIGAN_CHECK(host.defined() && host.device() == Device::cpu && host.canonical(),
               "cuda copy_from_host: source must be a canonical host tensor, got {}", host.desc().to_string());
  MPIGAN_CHECK_SHAPE(host.numel() == dst.numel(), "cuda copy_from_host: {} elements into {}", host.numel(),
                     dst.numel());
  m_ctx->activate();
  const std::size_t bytes = static_cast<std::size_t>(dst.numel()) * sizeof(float);
  if (bytes > 0)
    MPIGAN_CUDA_CHECK(cudaMemcpyAsync(dst.data(), host.data(), bytes, cudaMemcpyHostToDevice, m_ctx->stream()));
  if (wait) m_ctx->sync();
}

void CudaBackend::synchronize() {
  m_ctx->activate();
  m_ctx->sync();
}

std::unique_ptr<Conv3dOp> CudaBackend::make_conv3d(const Conv3dDesc& d) {
  return cuda::make_conv3d(d, *m_ctx);
}
std::unique_ptr<InnerProductOp> CudaBackend::make_inner_product(const InnerProductDesc& d) {
  return cuda::make_inner_product(d, *m_ctx);
}
std::unique_ptr<EltwiseOp> CudaBackend::make_eltwise(const EltwiseDesc& d) {
  return cuda::make_eltwise(d, *m_ctx);
}
std::unique_ptr<BatchNormOp> CudaBackend::make_batch_norm(const BatchNormDesc& d) {
  return cuda::make_batch_norm(d, *m_ctx);
}
std::unique_ptr<AvgPoolOp> CudaBackend::make_avg_pool(const AvgPoolDesc& d) {
  return cuda::make_avg_pool(d, *m_ctx);
}
std::unique_ptr<UpsampleOp> CudaBackend::make_upsample(const UpsampleDesc& d) {
  return cuda::make_upsample(d, *m_ctx);
}

// ----------------------------------------------------------------------------------------------
// Flat math

void CudaBackend::fill(Tensor& x, float value) {
  cuda::require_device(x, "fill", "x");
  m_ctx->activate();
  kernels::fill(m_ctx->stream(), x.data(), x.physical_elems(), value);
}

void CudaBackend::copy(const Tensor& src, Tensor& dst) {
  const std::size_t n = same_size(src, dst, "copy");
  m_ctx->activate();
  if (n > 0 && src.data() != dst.data())
    MPIGAN_CUDA_CHECK(
        cudaMemcpyAsync(dst.data(), src.data(), n * sizeof(float), cudaMemcpyDeviceToDevice, m_ctx->stream()));
}

void CudaBackend::axpby(float a, const Tensor& x, float b, Tensor& y) {
  const std::size_t n = same_size(x, y, "axpby");
  m_ctx->activate();
  kernels::axpby(m_ctx->stream(), a, x.data(), b, y.data(), n);
}

void CudaBackend::mul(const Tensor& a, const Tensor& b, Tensor& out) {
  const std::size_t n = same_size(a, b, "mul");
  same_size(a, out, "mul");
  m_ctx->activate();
  kernels::mul(m_ctx->stream(), a.data(), b.data(), out.data(), n);
}

double CudaBackend::sum_squares(const Tensor& x) {
  cuda::require_device(x, "sum_squares", "x");
  m_ctx->activate();
  auto* scratch = static_cast<char*>(m_ctx->workspace(kernels::kReduceScratchBytes + sizeof(double)));
  auto* result = reinterpret_cast<double*>(scratch + kernels::kReduceScratchBytes);
  kernels::sum_squares(m_ctx->stream(), x.data(), x.physical_elems(), scratch, result);
  MPIGAN_CUDA_CHECK(
      cudaMemcpyAsync(m_ctx->host_result(), result, sizeof(double), cudaMemcpyDeviceToHost, m_ctx->stream()));
  m_ctx->sync();
  double value = 0.0;
  std::memcpy(&value, m_ctx->host_result(), sizeof value);
  return value;
}

std::size_t CudaBackend::count_nonfinite(const Tensor& x) {
  cuda::require_device(x, "count_nonfinite", "x");
  m_ctx->activate();
  auto* scratch = static_cast<char*>(m_ctx->workspace(kernels::kReduceScratchBytes + sizeof(unsigned long long)));
  auto* result = reinterpret_cast<unsigned long long*>(scratch + kernels::kReduceScratchBytes);
  kernels::count_nonfinite(m_ctx->stream(), x.data(), x.physical_elems(), scratch, result);
  MPIGAN_CUDA_CHECK(cudaMemcpyAsync(m_ctx->host_result(), result, sizeof(unsigned long long), cudaMemcpyDeviceToHost,
                                    m_ctx->stream()));
  m_ctx->sync();
  unsigned long long value = 0;
  std::memcpy(&value, m_ctx->host_result(), sizeof value);
  return static_cast<std::size_t>(value);
}

void CudaBackend::dropout(const Tensor& src, Tensor& dst, float rate, std::uint64_t seed, std::uint64_t stream,
                          Tensor& mask) {
  const std::size_t n = same_size(src, dst, "dropout");
  MPIGAN_CHECK(rate >= 0.0f && rate < 1.0f, "cuda dropout: rate must be in [0, 1), got {}", rate);
  MPIGAN_CHECK(mask.physical_elems() >= dropout_mask_floats(n), "cuda dropout: mask of {} floats for {} elements",
               mask.physical_elems(), n);
  cuda::require_device(mask, "dropout", "mask");
  m_ctx->activate();
  // The scale is computed here, in float, exactly as the reference computes it.
  const float keep_scale = 1.0f / (1.0f - rate);
  kernels::dropout(m_ctx->stream(), src.data(), dst.data(), reinterpret_cast<std::uint32_t*>(mask.data()), n, rate,
                   keep_scale, seed, stream);
}

void CudaBackend::dropout_backward(const Tensor& diff_dst, Tensor& diff_src, float rate, const Tensor& mask) {
  const std::size_t n = same_size(diff_dst, diff_src, "dropout_backward");
  cuda::require_device(mask, "dropout_backward", "mask");
  m_ctx->activate();
  const float keep_scale = 1.0f / (1.0f - rate);
  kernels::dropout_backward(m_ctx->stream(), diff_dst.data(), diff_src.data(),
                            reinterpret_cast<const std::uint32_t*>(mask.data()), n, keep_scale);
}

void CudaBackend::sum_per_item(const Tensor& src, Tensor& dst) {
  cuda::require_device(src, "sum_per_item", "src");
  MPIGAN_CHECK_SHAPE(src.shape().rank() >= 1, "cuda sum_per_item: src needs a batch dimension, got {}", src.shape());
  const std::int64_t n = src.shape()[0], m = src.shape().item_numel();
  cuda::require_device(dst, {n, 1}, "sum_per_item", "dst");
  m_ctx->activate();
  kernels::sum_per_item(m_ctx->stream(), src.data(), n, m, dst.data());
}

void CudaBackend::add_per_item(const Tensor& diff_dst, Tensor& diff_src) {
  cuda::require_device(diff_src, "add_per_item", "diff_src");
  MPIGAN_CHECK_SHAPE(diff_src.shape().rank() >= 1, "cuda add_per_item: diff_src needs a batch dimension, got {}",
                     diff_src.shape());
  const std::int64_t n = diff_src.shape()[0], m = diff_src.shape().item_numel();
  cuda::require_device(diff_dst, {n, 1}, "add_per_item", "diff_dst");
  m_ctx->activate();
  kernels::add_per_item(m_ctx->stream(), diff_dst.data(), n, m, diff_src.data());
}

void CudaBackend::pow(const Tensor& src, float p, Tensor& dst) {
  const std::size_t n = same_size(src, dst, "pow");
  m_ctx->activate();
  kernels::pow(m_ctx->stream(), src.data(), p, dst.data(), n);
}

void CudaBackend::pow_backward_add(const Tensor& src, float p, const Tensor& diff_dst, Tensor& diff_src) {
  same_size(src, diff_dst, "pow_backward_add");
  const std::size_t n = same_size(src, diff_src, "pow_backward_add");
  m_ctx->activate();
  kernels::pow_backward_add(m_ctx->stream(), src.data(), p, diff_dst.data(), diff_src.data(), n);
}

void CudaBackend::sgd_update(Tensor& w, const Tensor& g, Tensor& v, const SgdStep& s) {
  const std::size_t n = same_size(w, g, "sgd_update");
  if (s.momentum != 0.0f) same_size(w, v, "sgd_update (velocity)");
  if (s.mirror != nullptr) same_size(w, *s.mirror, "sgd_update (mirror)");  // before w changes
  m_ctx->activate();
  kernels::sgd_update(m_ctx->stream(), w.data(), g.data(), s.momentum != 0.0f ? v.data() : nullptr, n, s.lr, s.momentum,
                      s.nesterov);
  if (s.mirror != nullptr) copy(w, *s.mirror);
}

void CudaBackend::rmsprop_update(Tensor& w, const Tensor& g, Tensor& ms, const RmspropStep& s) {
  const std::size_t n = same_size(w, g, "rmsprop_update");
  same_size(w, ms, "rmsprop_update (mean square)");
  if (s.mirror != nullptr) same_size(w, *s.mirror, "rmsprop_update (mirror)");
  m_ctx->activate();
  kernels::rmsprop_update(m_ctx->stream(), w.data(), g.data(), ms.data(), n, s.lr, s.rho, s.epsilon);
  if (s.mirror != nullptr) copy(w, *s.mirror);
}

void CudaBackend::adam_update(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s) {
  const std::size_t n = same_size(w, g, "adam_update");
  same_size(w, m, "adam_update (first moment)");
  same_size(w, v, "adam_update (second moment)");
  if (s.mirror != nullptr) same_size(w, *s.mirror, "adam_update (mirror)");
  m_ctx->activate();
  kernels::adam_update(m_ctx->stream(), w.data(), g.data(), m.data(), v.data(), n, s.lr_t, s.beta1, s.beta2, s.epsilon);
  if (s.mirror != nullptr) copy(w, *s.mirror);
}

}  // namespace mpigan
