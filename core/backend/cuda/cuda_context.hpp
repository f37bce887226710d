// What every op of the CUDA backend shares: the device, the one stream all work is queued on,
// the cuDNN and cuBLAS handles bound to it, the allocator, a shared scratch workspace, and the
// settings read from the environment. Plus RAII wrappers of the cuDNN descriptors and the
// convention conversion (Shape -> cuDNN descriptors) in one place.
//
// Invariants:
//  - One stream per backend; cuDNN/cuBLAS handles are set to it; every kernel, copy and NCCL call
//    of the backend goes to it. Host-visible results (to_host, reductions) synchronise it.
//  - The workspace is shared by all ops of the backend: ops execute one at a time on one stream,
//    so one buffer as large as the largest request serves them all. An op asks for it at the start
//    of each call (workspace(bytes)) and never keeps the pointer across calls (it may grow).
//    setup() reserves what its executions will need, so forward/backward do not allocate.
//  - Ops hold a Context& and must not outlive their backend (as with the cpu backend).
#pragma once

#include "mpigan/backend/cuda/cuda_check.hpp"
#include "mpigan/backend/cuda/device_allocator.hpp"
#include "mpigan/core/shape.hpp"

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <type_traits>

namespace mpigan::cuda {

// ----------------------------------------------------------------------------------------------
// RAII for handles and descriptors: unique_ptr over the pointee of the C handle type.

template <class Handle, auto Destroy>
struct HandleDeleter {
  void operator()(Handle h) const noexcept {
    if (h) (void)Destroy(h);
  }
};
template <class Handle, auto Destroy>
using UniqueHandle = std::unique_ptr<std::remove_pointer_t<Handle>, HandleDeleter<Handle, Destroy>>;

using StreamPtr = UniqueHandle<cudaStream_t, cudaStreamDestroy>;
using CudnnPtr = UniqueHandle<cudnnHandle_t, cudnnDestroy>;
using CublasPtr = UniqueHandle<cublasHandle_t, cublasDestroy_v2>;
using TensorDescPtr = UniqueHandle<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDescPtr = UniqueHandle<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvDescPtr = UniqueHandle<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;
using PoolDescPtr = UniqueHandle<cudnnPoolingDescriptor_t, cudnnDestroyPoolingDescriptor>;

struct PinnedDeleter {
  void operator()(void* p) const noexcept {
    if (p) (void)cudaFreeHost(p);
  }
};
using PinnedPtr = std::unique_ptr<void, PinnedDeleter>;

// Convention conversion, in one place: our NCDHW / OIDHW are cuDNN's fully packed NCDHW tensors
// and NCHW-format 5D filters (strides computed from the dims, innermost W contiguous).
/// Packed float tensor descriptor of a canonical shape of rank 3..5 (rank < 3 is padded with 1s).
TensorDescPtr make_tensor_desc(const Shape& shape);
/// OIDHW float filter descriptor.
FilterDescPtr make_filter_desc(const Shape& oidhw);
/// A cuDNN int from an extent; throws naming @p what when it does not fit.
int to_int(std::int64_t v, const char* what);

// ----------------------------------------------------------------------------------------------

/// Settings read once from the environment (docs/cuda.md lists them).
struct Settings {
  enum class ConvAlgo { find, heuristic };
  /// How conv3d computes weight gradients (conv3d_plan.hpp, WgradAsForward): `measured` picks the
  /// faster of cuDNN's weight-gradient algorithms and a forward convolution of the transposed
  /// problem by what cudnnFind measures (the former with heuristics); the others force one. The
  /// default stays `legacy` until the forward form has run on a GPU (docs/cuda.md).
  enum class Wgrad { measured, legacy, forward };
  /// Which cuDNN API runs the convolutions (conv3d_graph.hpp): the legacy one; the graph API
  /// wherever one of its engines can run the problem (legacy otherwise); or, per direction and
  /// shape, the faster of the two as measured (with ConvAlgo::find; heuristics keep legacy). The
  /// default is `measured`; with TF32 without runtime-compiled engines (graph_runtime_compiled).
  enum class ConvApi { legacy, graph, measured };
  bool tf32 = false;                     ///< MPIGAN_CUDA_TF32=1: TF32 tensor-core math in cuDNN/cuBLAS
  ConvAlgo conv_algo = ConvAlgo::find;   ///< MPIGAN_CUDA_CONV_ALGO=find|heuristic
  Wgrad wgrad = Wgrad::measured;         ///< MPIGAN_CUDA_WGRAD=measured|legacy|forward
  ConvApi conv_api = ConvApi::measured;  ///< MPIGAN_CUDA_CONV_API=legacy|graph|measured
  bool deterministic = false;            ///< MPIGAN_CUDA_DETERMINISTIC=1: only deterministic conv algorithms
  bool graph_runtime_compiled = true;    ///< MPIGAN_CUDA_GRAPH_RTC=0: no runtime-compiled graph engines (TF32)
  std::size_t workspace_limit = std::size_t{1} << 30;  ///< MPIGAN_CUDA_WORKSPACE_MB (per conv algorithm)
  bool caching = true;                                 ///< MPIGAN_CUDA_CACHING=0 disables the caching allocator
  /// Precision::bf16 (BackendOptions, not the environment): the convolutions read their operands
  /// rounded to bfloat16 and accumulate in fp32, through the graph API (conv3d_graph.hpp); a
  /// direction no graph engine runs in bf16 stays fp32. Needs a GPU of compute capability 8.0 or
  /// newer (CudaBackend checks).
  bool bf16 = false;
  /// MPIGAN_CUDA_BF16_LAYOUT=channels_last|channels_first: the layout of the bf16 copies the
  /// convolutions run on (channels-last, NDHWC, is what cuDNN's bf16 tensor-core engines prefer;
  /// the copies transpose at this edge, the op's tensors stay NCDHW).
  bool bf16_channels_last = true;
  static Settings from_env();
  std::string to_string() const;
};

/// The device chosen for a backend and why (cuda_backend.hpp: choose_cuda_device).
struct DeviceChoice {
  int device = 0;
  std::string reason;
};

class GraphConv;  // conv3d_graph.hpp

class Context {
 public:
  Context(DeviceChoice choice, Settings settings);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int device() const { return m_choice.device; }
  const DeviceChoice& choice() const { return m_choice; }
  const Settings& settings() const { return m_settings; }
  const cudaDeviceProp& props() const { return m_props; }
  cudaStream_t stream() const { return m_stream.get(); }
  cudnnHandle_t cudnn() const { return m_cudnn.get(); }
  cublasHandle_t cublas() const { return m_cublas.get(); }
  const std::shared_ptr<DeviceAllocator>& allocator() const { return m_allocator; }

  /// Make this context's device current for the calling thread (a no-op when it is).
  void activate() const;
  /// Wait for all work queued on the stream.
  void sync() const;

  /// Make the next workspace() calls of up to @p bytes allocation-free.
  void reserve_workspace(std::size_t bytes);
  /// The shared scratch buffer, at least @p bytes (256-byte aligned); see the invariants above.
  void* workspace(std::size_t bytes);

  /// Pinned host buffer of kHostResultBytes for scalar results of reductions.
  static constexpr std::size_t kHostResultBytes = 64;
  void* host_result() const { return m_host_result.get(); }

  /// Plans of cuDNN's graph API by problem (conv3d_graph.hpp: GraphConvProblem::key); a null
  /// entry records that no engine can run the problem.
  std::map<std::string, std::shared_ptr<const GraphConv>>& graph_conv_plans() { return m_graph_conv_plans; }

 private:
  DeviceChoice m_choice;
  Settings m_settings;
  cudaDeviceProp m_props{};
  std::shared_ptr<DeviceAllocator> m_allocator;
  // Destroyed in reverse order: handles before the stream they are bound to.
  StreamPtr m_stream;
  CudnnPtr m_cudnn;
  CublasPtr m_cublas;
  std::map<std::string, std::shared_ptr<const GraphConv>> m_graph_conv_plans;  // before the handle dies
  std::shared_ptr<Storage> m_workspace;
  std::size_t m_workspace_bytes = 0;
  PinnedPtr m_host_result;
};

}  // namespace mpigan::cuda
