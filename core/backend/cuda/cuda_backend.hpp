// The CUDA backend: cuDNN for 3D convolution and average pooling, cuBLAS for the inner product,
// own .cu kernels for everything else (padding, upsampling, batch norm, activations, flat math,
// optimizer updates, dropout). docs/cuda.md describes it in full.
//
// Invariants:
//  - Canonical layouts only (NCDHW is cuDNN's packed 5D layout): every TensorDesc an op returns
//    has layout nullptr, so tensors move between this backend and the host with plain copies.
//  - One GPU per backend, one stream per backend; all ops, copies and NCCL calls of the backend
//    are queued on it in call order. Host-visible results (to_host, sum_squares, ...) wait for it;
//    op calls return without waiting.
//  - Tensors of this backend have Device::cuda and live in memory from its caching allocator.
//  - Numerics: strict fp32 by default (cuDNN CUDNN_FMA_MATH, cuBLAS default math); TF32 with
//    MPIGAN_CUDA_TF32=1. describe() says which.
//
// This header includes no CUDA header, so code that only creates and passes the backend around
// (registry, the MPI layers above) compiles without the CUDA toolkit's include paths.
#pragma once

#include "mpigan/core/backend.hpp"

#include <cstddef>
#include <memory>
#include <string>

namespace mpigan {
namespace cuda {
class Context;
}

/// Number of CUDA devices visible to this process; 0 when there is none, no driver, or the
/// driver is too old. Never throws or aborts (it is what "is a GPU here?" checks call).
int cuda_device_count() noexcept;

/// Device selection for BackendOptions::device_id.
///  - requested >= 0: that ordinal (an Error when it is not below cuda_device_count()).
///  - requested == -1: the node-local rank modulo the device count, so that ranks sharing a node
///    spread over its GPUs. core/ does not depend on MPI, so the local rank is read from the
///    launcher's environment, first found of: MPI_LOCALRANKID (MPICH/Hydra, Intel MPI),
///    OMPI_COMM_WORLD_LOCAL_RANK (Open MPI), MV2_COMM_WORLD_LOCAL_RANK (MVAPICH2),
///    SLURM_LOCALID (srun), PALS_LOCAL_RANKID (Cray PALS). None set: device 0.
///    Callers that know the rank from MPI_COMM_TYPE_SHARED pass it as device_id instead.
/// @p reason receives one line on how the device was chosen.
int choose_cuda_device(int requested, std::string* reason = nullptr);

/// The backend for @p options (device per choose_cuda_device). Throws Error when no device is
/// visible or the chosen one cannot be initialised.
std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options);

/// Page-locked (pinned) host memory, Device::cpu, 64-byte aligned (page aligned in fact), freed
/// with cudaFreeHost. For the MPI staging buffers: device <-> pinned copies run at full PCIe/NVLink
/// speed and can be asynchronous. Throws Error when the driver cannot pin (no GPU).
std::shared_ptr<Storage> allocate_pinned_host(std::size_t bytes);
/// A canonical host tensor of @p shape in pinned memory (uninitialised).
Tensor pinned_host_tensor(const Shape& shape);

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const BackendOptions& options = {});
  ~CudaBackend() override;
  /// bf16 where asked for and the GPU has bf16 tensor cores (Settings::bf16), else fp32.
  Precision precision() const override;

  std::string name() const override { return "cuda"; }
  Device device() const override { return Device::cuda; }
  /// Device, compute capability, memory, library versions, math mode and how the device was chosen.
  std::string describe() const override;

  std::shared_ptr<Storage> allocate_storage(std::size_t bytes) override;
  /// Canonical layouts only, so a reorder is a copy (device <-> device, or across host/device).
  void reorder(const Tensor& src, Tensor& dst) override;
  /// A canonical host copy (pageable memory); waits for the copy.
  Tensor to_host(const Tensor& src) override;
  /// Copy a canonical host tensor into device tensor @p dst; returns when @p host may be reused.
  void from_host(const Tensor& host, Tensor& dst) override;
  void synchronize() override;

  /// Copy device tensor @p src into an existing host tensor (e.g. a pinned staging buffer) of the
  /// same element count. With @p wait false the copy is only queued: call synchronize() before
  /// reading @p host (overlaps the copy with queued work when @p host is pinned).
  void copy_to_host(const Tensor& src, Tensor& host, bool wait = true);
  /// Copy host tensor @p host into device tensor @p dst (same element count). With @p wait false
  /// the copy is queued; @p host must stay valid and unchanged until synchronize() (pinned
  /// memory; from pageable memory CUDA stages the data before returning anyway).
  void copy_from_host(const Tensor& host, Tensor& dst, bool wait = true);

  std::unique_ptr<Conv3dOp> make_conv3d(const Conv3dDesc& desc) override;
  std::unique_ptr<InnerProductOp> make_inner_product(const InnerProductDesc& desc) override;
  std::unique_ptr<EltwiseOp> make_eltwise(const EltwiseDesc& desc) override;
  std::unique_ptr<BatchNormOp> make_batch_norm(const BatchNormDesc& desc) override;
  std::unique_ptr<AvgPoolOp> make_avg_pool(const AvgPoolDesc& desc) override;
  std::unique_ptr<UpsampleOp> make_upsample(const UpsampleDesc& desc) override;

  void fill(Tensor& x, float value) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void axpby(float a, const Tensor& x, float b, Tensor& y) override;
  void mul(const Tensor& a, const Tensor& b, Tensor& out) override;
  double sum_squares(const Tensor& x) override;
  std::size_t count_nonfinite(const Tensor& x) override;
  void dropout(const Tensor& src, Tensor& dst, float rate, std::uint64_t seed, std::uint64_t stream,
               Tensor& mask) override;
  void dropout_backward(const Tensor& diff_dst, Tensor& diff_src, float rate, const Tensor& mask) override;
  void sum_per_item(const Tensor& src, Tensor& dst) override;
  void add_per_item(const Tensor& diff_dst, Tensor& diff_src) override;
  void pow(const Tensor& src, float p, Tensor& dst) override;
  void pow_backward_add(const Tensor& src, float p, const Tensor& diff_dst, Tensor& diff_src) override;

  void sgd_update(Tensor& w, const Tensor& g, Tensor& v, const SgdStep& s) override;
  void rmsprop_update(Tensor& w, const Tensor& g, Tensor& ms, const RmspropStep& s) override;
  void adam_update(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s) override;

  /// A NCCL communicator over the group (nccl_comm.hpp): rank 0 makes the unique id, @p broadcast_id
  /// hands it to the others, all join. average() = allreduce (sum) + scale by 1/group_size on this
  /// backend's stream, then a check for asynchronous NCCL errors. Never null.
  std::unique_ptr<GroupReducer> make_group_reducer(int group_rank, int group_size,
                                                   const IdBroadcast& broadcast_id) override;

  /// The CUDA device ordinal this backend runs on.
  int device_id() const;
  /// Bytes in use / cached by the caching allocator (for logs and leak checks).
  std::size_t memory_in_use() const;
  std::size_t memory_cached() const;
  std::size_t device_memory_peak() const override;
  void reset_device_memory_peak() override;
  /// Return cached device memory to the driver (e.g. before handing the GPU to another library).
  void empty_cache();

  /// The shared context (stream, handles). For code of this backend (ops, NCCL wrapper).
  cuda::Context& context() { return *m_ctx; }

 private:
  std::unique_ptr<cuda::Context> m_ctx;
};

}  // namespace mpigan
