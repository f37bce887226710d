// The NCCL communicator wrapper (see nccl_comm.hpp), and the cuda backend's GroupReducer on it.
#include "mpigan/backend/cuda/nccl_comm.hpp"

#include "mpigan/backend/cuda/cuda_backend.hpp"
#include "mpigan/backend/cuda/cuda_context.hpp"
#include "mpigan/core/error.hpp"

#include <cstring>
#include <memory>
#include <span>
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
    : m_comm(std::exchange(other.m_comm, nullptr)),
      m_backend(other.m_backend),
      m_rank(other.m_rank),
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

void NcclComm::allreduce_sum(Tensor& buffer) {
  allreduce_sum(buffer, buffer);
}

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

namespace {

/// Backend::make_group_reducer of the cuda backend: the mean over the group, on the device.
class NcclGroupReducer final : public GroupReducer {
 public:
  NcclGroupReducer(NcclComm comm, CudaBackend& backend) : m_comm(std::move(comm)), m_backend(backend) {}

  void average(Tensor& x) override {
    m_comm.allreduce_sum(x);
    m_backend.axpby(0.0f, x, 1.0f / static_cast<float>(m_comm.size()), x);
    m_comm.check_async();
  }

 private:
  NcclComm m_comm;
  CudaBackend& m_backend;
};

}  // namespace

std::unique_ptr<GroupReducer> CudaBackend::make_group_reducer(int group_rank, int group_size,
                                                              const IdBroadcast& broadcast_id) {
  MPIGAN_CHECK(group_size >= 1 && group_rank >= 0 && group_rank < group_size,
               "cuda make_group_reducer: rank {} of a group of {} is not a valid member", group_rank, group_size);
  MPIGAN_CHECK(static_cast<bool>(broadcast_id), "cuda make_group_reducer: no id broadcast given");
  NcclId id{};
  if (group_rank == 0) id = nccl_new_id();
  broadcast_id(std::as_writable_bytes(std::span<char>(id)));
  return std::make_unique<NcclGroupReducer>(NcclComm(id, group_rank, group_size, *this), *this);
}

}  // namespace mpigan
