// The NCCL communicator wrapper (see nccl_comm.hpp).
#include "mpigan/core/backend/cuda/nccl_comm.hpp"

#include "mpigan/core/backend/cuda/cuda_backend.hpp"
#include "mpigan/core/backend/cuda/cuda_context.hpp"
#include "mpigan/core/error.hpp"

#include <cstring>
#include <utility>

namespace mpigan {

static_assert(kNcclIdBytes == NCCL_UNIQUE_ID_BYTES, "NcclId must hold exactly an ncclUniqueId");
static_assert(sizeof(ncclUniqueId) == kNcclIdBytes);

NcclId nccl_new_id() {
  ncclUniqueId raw;
  MPIGAN_NCCL_CHECK(ncclGetUniqueId(&raw));
  NcclId id;
  std::memcpy(id.data(), &raw, kNcclIdBytes);
  return id;
}

NcclComm::NcclComm(const NcclId& id, int rank, int size, CudaBackend& backend)
    : m_backend(&backend), m_rank(rank), m_size(size) {
  MPIGAN_CHECK(size >= 1 && rank >= 0 && rank < size, "NcclComm: rank {} of size {} is not a valid member", rank, size);
  backend.context().activate();  // NCCL binds the communicator to the current device
  ncclUniqueId raw;
  std::memcpy(&raw, id.data(), kNcclIdBytes);
  ncclComm_t comm = nullptr;
  MPIGAN_NCCL_CHECK(ncclCommInitRank(&comm, size, raw, rank));
  m_comm = comm;
}

NcclComm::~NcclComm() {
  if (m_comm) (void)ncclCommDestroy(m_comm);
}

NcclComm::NcclComm(NcclComm&& other) noexcept
    : m_comm(std::exchange(other.m_comm, nullptr)), m_backend(other.m_backend), m_rank(other.m_rank),
      m_size(other.m_size) {}

NcclComm& NcclComm::operator=(NcclComm&& other) noexcept {
  if (this != &other) {
    if (m_comm) (void)ncclCommDestroy(m_comm);
    m_comm = std::exchange(other.m_comm, nullptr);
    m_backend = other.m_backend;
    m_rank = other.m_rank;
    m_size = other.m_size;
  }
  return *this;
}

void NcclComm::require_buffer(const Tensor& t, const char* what) const {
  MPIGAN_CHECK(m_comm != nullptr, "NcclComm::{}: the communicator was aborted or moved from", what);
  MPIGAN_CHECK(t.defined() && t.device() == Device::cuda && t.canonical(),
               "NcclComm::{}: buffer must be a canonical GPU tensor, got {} on {}", what, t.desc().to_string(),
               to_string(t.device()));
}

void NcclComm::allreduce_sum(Tensor& buffer) { allreduce_sum(buffer, buffer); }

void NcclComm::allreduce_sum(const Tensor& send, Tensor& recv) {
  require_buffer(send, "allreduce_sum");
  require_buffer(recv, "allreduce_sum");
  MPIGAN_CHECK(send.numel() == recv.numel(), "NcclComm::allreduce_sum: send has {} elements, recv {}", send.numel(),
               recv.numel());
  auto& ctx = m_backend->context();
  ctx.activate();
  MPIGAN_NCCL_CHECK(ncclAllReduce(send.data(), recv.data(), static_cast<std::size_t>(send.numel()), ncclFloat, ncclSum,
                                  m_comm, ctx.stream()));
}

void NcclComm::broadcast(Tensor& buffer, int root) {
  require_buffer(buffer, "broadcast");
  MPIGAN_CHECK(root >= 0 && root < m_size, "NcclComm::broadcast: root {} out of range (size {})", root, m_size);
  auto& ctx = m_backend->context();
  ctx.activate();
  MPIGAN_NCCL_CHECK(ncclBroadcast(buffer.data(), buffer.data(), static_cast<std::size_t>(buffer.numel()), ncclFloat,
                                  root, m_comm, ctx.stream()));
}

void NcclComm::check_async() const {
  if (!m_comm) return;
  ncclResult_t async = ncclSuccess;
  MPIGAN_NCCL_CHECK(ncclCommGetAsyncError(m_comm, &async));
  MPIGAN_CHECK(async == ncclSuccess, "NcclComm (rank {} of {}): asynchronous NCCL error {} ({})", m_rank, m_size,
               ncclGetErrorString(async), static_cast<int>(async));
}

void NcclComm::abort() noexcept {
  if (m_comm) (void)ncclCommAbort(m_comm);
  m_comm = nullptr;
}

}  // namespace mpigan
