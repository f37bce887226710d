// The CUDA backend's shared context: device, stream, library handles, workspace, settings.
#include "mpigan/backend/cuda/cuda_context.hpp"

#include "mpigan/core/env.hpp"
#include "mpigan/core/error.hpp"

#include <cstddef>
#include <cstdlib>
#include <string>

namespace mpigan::cuda {
namespace {

const EnvChoice<Settings::ConvAlgo> kConvAlgos[] = {
    {"find", "benchmark the cuDNN algorithms once per shape", Settings::ConvAlgo::find},
    {"heuristic", "cuDNN's heuristics, no benchmarking", Settings::ConvAlgo::heuristic}};
const EnvChoice<Settings::Wgrad> kWgrads[] = {
    {"measured", "the faster of cuDNN's weight-gradient algorithms and a forward convolution of the transposed problem",
     Settings::Wgrad::measured},
    {"legacy", "cuDNN's weight-gradient algorithms only", Settings::Wgrad::legacy},
    {"forward", "the forward convolution wherever the stride is 1", Settings::Wgrad::forward}};

const EnvChoice<Settings::ConvApi> kConvApis[] = {
    {"legacy", "cuDNN's legacy convolution API", Settings::ConvApi::legacy},
    {"graph", "cuDNN's graph API wherever an engine runs the problem", Settings::ConvApi::graph},
    {"measured", "the faster of the graph API and the legacy API, measured per direction and shape",
     Settings::ConvApi::measured}};

const EnvChoice<bool> kBf16Layouts[] = {{"channels_last", "bf16 copies of the convolutions' operands in NDHWC", true},
                                        {"channels_first", "bf16 copies in NCDHW, the op's own layout", false}};

}  // namespace

int to_int(std::int64_t v, const char* what) {
  MPIGAN_CHECK(v >= 0 && v <= 0x7fffffff, "cuda backend: {} = {} does not fit the int extents of cuDNN/cuBLAS", what,
               v);
  return static_cast<int>(v);
}

TensorDescPtr make_tensor_desc(const Shape& shape) {
  MPIGAN_CHECK(shape.rank() >= 1 && shape.rank() <= 5, "cuda backend: no cuDNN descriptor for shape {}", shape);
  // cuDNN's Nd tensors have at least 3 dims; trailing 1s do not change a packed layout.
  const int rank = std::max(shape.rank(), 3);
  int dims[5] = {1, 1, 1, 1, 1}, strides[5] = {1, 1, 1, 1, 1};
  for (int i = 0; i < shape.rank(); ++i) dims[i] = to_int(shape[i], "tensor extent");
  for (int i = rank - 2; i >= 0; --i) strides[i] = strides[i + 1] * dims[i + 1];
  cudnnTensorDescriptor_t raw = nullptr;
  MPIGAN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&raw));
  TensorDescPtr desc(raw);
  MPIGAN_CUDNN_CHECK(cudnnSetTensorNdDescriptor(raw, CUDNN_DATA_FLOAT, rank, dims, strides));
  return desc;
}

FilterDescPtr make_filter_desc(const Shape& oidhw) {
  MPIGAN_CHECK(oidhw.rank() == 5, "cuda backend: conv weights must be OIDHW, got {}", oidhw);
  int dims[5];
  for (int i = 0; i < 5; ++i) dims[i] = to_int(oidhw[i], "filter extent");
  cudnnFilterDescriptor_t raw = nullptr;
  MPIGAN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&raw));
  FilterDescPtr desc(raw);
  MPIGAN_CUDNN_CHECK(cudnnSetFilterNdDescriptor(raw, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 5, dims));
  return desc;
}

Settings Settings::from_env() {
  Settings s;
  s.tf32 = env_flag("MPIGAN_CUDA_TF32", false);
  s.deterministic = env_flag("MPIGAN_CUDA_DETERMINISTIC", false);
  s.caching = env_flag("MPIGAN_CUDA_CACHING", true);
  s.conv_algo = env_choice("MPIGAN_CUDA_CONV_ALGO", kConvAlgos, s.conv_algo);
  s.wgrad = env_choice("MPIGAN_CUDA_WGRAD", kWgrads, s.wgrad);
  // The graph API's engines, by measurement (all op tests pass through them on an H200). With TF32
  // one of the engines whose kernels cuDNN compiles at run time wrote misaligned on a test shape
  // there, and every test passed without those engines: TF32 refuses them unless asked otherwise
  // (docs/cuda.md).
  s.graph_runtime_compiled = env_flag("MPIGAN_CUDA_GRAPH_RTC", !s.tf32);
  s.conv_api = env_choice("MPIGAN_CUDA_CONV_API", kConvApis, s.conv_api);
  s.bf16_channels_last = env_choice("MPIGAN_CUDA_BF16_LAYOUT", kBf16Layouts, s.bf16_channels_last);
  if (const char* v = env_value("MPIGAN_CUDA_WORKSPACE_MB")) {
    char* end = nullptr;
    const long long mb = std::strtoll(v, &end, 10);
    MPIGAN_CHECK(end && *end == '\0' && mb >= 0,
                 "environment variable MPIGAN_CUDA_WORKSPACE_MB='{}' must be a non-negative integer (MiB)", v);
    s.workspace_limit = static_cast<std::size_t>(mb) << 20;
  }
  return s;
}

std::string Settings::to_string() const {
  return fmt::format(
      "math {}, conv API {}{}, conv algorithms {}{}, weight gradients {}, workspace limit {} MiB, allocator {}",
      bf16   ? (bf16_channels_last ? "bf16 convolutions (fp32 accumulation, channels-last copies)"
                                   : "bf16 convolutions (fp32 accumulation, channels-first copies)")
      : tf32 ? "TF32 tensor cores (MPIGAN_CUDA_TF32=1)"
             : "strict fp32",
      env_choice_name(kConvApis, conv_api), graph_runtime_compiled ? "" : " (no runtime-compiled engines)",
      env_choice_name(kConvAlgos, conv_algo), deterministic ? " (deterministic only)" : "",
      env_choice_name(kWgrads, wgrad), workspace_limit >> 20, caching ? "caching" : "plain cudaMalloc");
}

Context::Context(DeviceChoice choice, Settings settings) : m_choice(std::move(choice)), m_settings(settings) {
  const int device = m_choice.device;
  MPIGAN_CUDA_CHECK(cudaSetDevice(device));
  MPIGAN_CUDA_CHECK(cudaGetDeviceProperties(&m_props, device));
  m_allocator = std::make_shared<DeviceAllocator>(device, m_settings.caching);

  // A blocking stream (not cudaStreamNonBlocking): work that a library or the user queues on the
  // legacy default stream is then ordered with ours instead of racing it.
  cudaStream_t stream = nullptr;
  MPIGAN_CUDA_CHECK(cudaStreamCreate(&stream));
  m_stream.reset(stream);

  cudnnHandle_t cudnn = nullptr;
  MPIGAN_CUDNN_CHECK(cudnnCreate(&cudnn));
  m_cudnn.reset(cudnn);
  MPIGAN_CUDNN_CHECK(cudnnSetStream(cudnn, stream));

  cublasHandle_t cublas = nullptr;
  MPIGAN_CUBLAS_CHECK(cublasCreate(&cublas));
  m_cublas.reset(cublas);
  MPIGAN_CUBLAS_CHECK(cublasSetStream(cublas, stream));
  MPIGAN_CUBLAS_CHECK(cublasSetPointerMode(cublas, CUBLAS_POINTER_MODE_HOST));
  // CUBLAS_DEFAULT_MATH keeps fp32 GEMMs in fp32 (TF32 only when asked for, or when the user sets
  // NVIDIA_TF32_OVERRIDE, which this backend does not touch).
  MPIGAN_CUBLAS_CHECK(cublasSetMathMode(cublas, m_settings.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));

  void* host = nullptr;
  MPIGAN_CUDA_CHECK(cudaHostAlloc(&host, kHostResultBytes, cudaHostAllocDefault));
  m_host_result.reset(host);
}

Context::~Context() {
  // Let queued work finish before its buffers and handles go; errors cannot be reported here.
  if (m_stream && cudaStreamSynchronize(m_stream.get()) != cudaSuccess) (void)cudaGetLastError();
}

void Context::activate() const {
  int current = -1;
  MPIGAN_CUDA_CHECK(cudaGetDevice(&current));
  if (current != m_choice.device) MPIGAN_CUDA_CHECK(cudaSetDevice(m_choice.device));
}

void Context::sync() const {
  MPIGAN_CUDA_CHECK(cudaStreamSynchronize(m_stream.get()));
}

void Context::reserve_workspace(std::size_t bytes) {
  (void)workspace(bytes);
}

void* Context::workspace(std::size_t bytes) {
  if (bytes > m_workspace_bytes) {
    // Round up to whole MiB so a sequence of slightly growing requests does not reallocate each
    // time. The old block returns to the allocator; stream order protects queued work using it.
    const std::size_t rounded = (bytes + (std::size_t{1} << 20) - 1) >> 20 << 20;
    m_workspace.reset();
    m_workspace = device_storage(m_allocator, rounded);
    m_workspace_bytes = rounded;
  }
  return m_workspace ? m_workspace->data() : nullptr;
}

}  // namespace mpigan::cuda
