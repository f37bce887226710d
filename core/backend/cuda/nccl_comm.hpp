// A NCCL communicator bound to one CudaBackend: allreduce (sum) and broadcast of device float
// buffers on the backend's stream, for the ranks of a worker group (batch parallelism) to sum
// their gradients GPU to GPU.
//
// Layers above core do not see this header: they get the same through the Backend interface,
// Backend::make_group_reducer (CudaBackend's makes a NcclComm as below; nccl_comm.cpp).
//
// Usage (the MPI part belongs to the caller: core/ does not depend on MPI):
//   NcclId id{};
//   if (group_rank == 0) id = nccl_new_id();
//   MPI_Bcast(id.data(), id.size(), MPI_BYTE, 0, group_comm);     // the caller's communicator
//   NcclComm comm(id, group_rank, group_size, backend);           // collective: all ranks call it
//   comm.allreduce_sum(gradients.flat());                          // queued on backend's stream
//
// Invariants:
//  - RAII: the ncclComm_t is destroyed with the object (ncclCommDestroy waits for its queued
//    operations); abort() tears it down without waiting, for error paths where peers are gone.
//  - Operations are queued on the backend's stream, ordered with its ops: the gradient kernels
//    that precede an allreduce finish before it starts, and ops after it see the sums. Nothing
//    waits on the host; backend.synchronize() or a to_host does.
//  - Every rank calls the same collectives in the same order with the same element counts.
//  - A NcclComm must not outlive its backend (it queues on the backend's stream).
//  - Errors: synchronous failures throw Error (MPIGAN_NCCL_CHECK); asynchronous ones (a peer
//    died, a network failure) are reported by check_async(), which throws.
// Header without nccl.h or CUDA headers.
#pragma once

#include "mpigan/core/tensor.hpp"

#include <array>
#include <cstddef>

struct ncclComm;  // NCCL's opaque communicator (ncclComm_t is ncclComm*)

namespace mpigan {

class CudaBackend;

/// NCCL_UNIQUE_ID_BYTES (static_assert'ed in nccl_comm.cpp).
inline constexpr std::size_t kNcclIdBytes = 128;
using NcclId = std::array<char, kNcclIdBytes>;

/// A fresh unique id (ncclGetUniqueId); made on one rank and sent to the others.
NcclId nccl_new_id();

class NcclComm {
 public:
  /// Join communicator @p id as @p rank of @p size on @p backend's device. Blocks until all
  /// @p size ranks have joined.
  NcclComm(const NcclId& id, int rank, int size, CudaBackend& backend);
  ~NcclComm();
  NcclComm(NcclComm&& other) noexcept;
  NcclComm& operator=(NcclComm&& other) noexcept;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  /// In place: @p buffer (device, float) becomes the element-wise sum over the ranks.
  void allreduce_sum(Tensor& buffer);
  /// @p recv = sum over the ranks of @p send (same element count; may be the same tensor).
  void allreduce_sum(const Tensor& send, Tensor& recv);
  /// @p buffer of rank @p root is copied to every rank's @p buffer.
  void broadcast(Tensor& buffer, int root);

  /// Throws Error if NCCL reported an asynchronous failure on this communicator.
  void check_async() const;
  /// Tear the communicator down without waiting for peers (error paths); the object is empty after.
  void abort() noexcept;

  int rank() const { return m_rank; }
  int size() const { return m_size; }

 private:
  void require_buffer(const Tensor& t, const char* what) const;

  ncclComm* m_comm = nullptr;
  CudaBackend* m_backend = nullptr;
  int m_rank = 0, m_size = 0;
};

}  // namespace mpigan
