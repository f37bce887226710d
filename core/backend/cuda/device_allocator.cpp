// The caching device allocator (see device_allocator.hpp for the invariants).
#include "mpigan/backend/cuda/device_allocator.hpp"

#include "mpigan/backend/cuda/cuda_check.hpp"
#include "mpigan/core/error.hpp"

namespace mpigan::cuda {
namespace {

constexpr std::size_t kSmallLimit = std::size_t{1} << 20;  // 1 MiB
constexpr std::size_t kSmallRound = 512;
constexpr std::size_t kLargeRound = std::size_t{2} << 20;  // 2 MiB

/// Makes @p device current for the scope and restores the previous one (allocations and frees
/// may come from threads whose current device is another one).
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&m_previous) != cudaSuccess) {
      (void)cudaGetLastError();
      m_previous = -1;
    }
    if (m_previous != device) m_switched = cudaSetDevice(device) == cudaSuccess;
  }
  ~DeviceScope() {
    if (m_switched && m_previous >= 0) (void)cudaSetDevice(m_previous);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int m_previous = -1;
  bool m_switched = false;
};

std::string mib(std::size_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

}  // namespace

DeviceAllocator::DeviceAllocator(int device, bool caching) : m_device(device), m_caching(caching) {}

DeviceAllocator::~DeviceAllocator() {
  std::lock_guard lock(m_mutex);
  free_cached_locked();
}

std::size_t DeviceAllocator::round_size(std::size_t bytes) {
  const std::size_t unit = bytes < kSmallLimit ? kSmallRound : kLargeRound;
  return (bytes + unit - 1) / unit * unit;
}

void* DeviceAllocator::allocate(std::size_t bytes, std::size_t* block_bytes) {
  *block_bytes = 0;
  if (bytes == 0) return nullptr;
  const std::size_t rounded = round_size(bytes);
  std::lock_guard lock(m_mutex);
  if (m_caching) {
    auto it = m_free.lower_bound(rounded);
    if (it != m_free.end() && it->first / 5 * 4 <= rounded) {
      void* p = it->second;
      *block_bytes = it->first;
      m_stats.cached -= it->first;
      m_free.erase(it);
      m_stats.in_use += *block_bytes;
      m_stats.peak_in_use = std::max(m_stats.peak_in_use, m_stats.in_use);
      return p;
    }
  }
  DeviceScope scope(m_device);
  void* p = nullptr;
  cudaError_t status = cudaMalloc(&p, rounded);
  if (status == cudaErrorMemoryAllocation && !m_free.empty()) {
    (void)cudaGetLastError();
    free_cached_locked();
    status = cudaMalloc(&p, rounded);
  }
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    std::size_t free_bytes = 0, total_bytes = 0;
    (void)cudaMemGetInfo(&free_bytes, &total_bytes);
    (void)cudaGetLastError();
    MPIGAN_FATAL(
        "out of GPU memory on device {}: cudaMalloc of {} ({} bytes requested) failed; this backend holds "
        "{} in use (peak {}), {} cached; the device has {} free of {}",
        m_device, mib(rounded), bytes, mib(m_stats.in_use), mib(m_stats.peak_in_use), mib(m_stats.cached),
        mib(free_bytes), mib(total_bytes));
  }
  MPIGAN_CUDA_CHECK(status);
  ++m_stats.device_mallocs;
  *block_bytes = rounded;
  m_stats.in_use += rounded;
  m_stats.peak_in_use = std::max(m_stats.peak_in_use, m_stats.in_use);
  return p;
}

void DeviceAllocator::release(void* ptr, std::size_t block_bytes) noexcept {
  if (!ptr) return;
  std::lock_guard lock(m_mutex);
  m_stats.in_use -= block_bytes;
  if (m_caching) {
    m_free.emplace(block_bytes, ptr);
    m_stats.cached += block_bytes;
    return;
  }
  DeviceScope scope(m_device);
  // Errors here (runtime shutting down at exit, a dead context) cannot be reported from a deleter.
  if (cudaFree(ptr) != cudaSuccess) (void)cudaGetLastError();
}

void DeviceAllocator::empty_cache() noexcept {
  std::lock_guard lock(m_mutex);
  free_cached_locked();
}

void DeviceAllocator::free_cached_locked() noexcept {
  if (m_free.empty()) return;
  DeviceScope scope(m_device);
  for (auto& [size, ptr] : m_free)
    if (cudaFree(ptr) != cudaSuccess) (void)cudaGetLastError();
  m_free.clear();
  m_stats.cached = 0;
}

DeviceAllocator::Stats DeviceAllocator::stats() const {
  std::lock_guard lock(m_mutex);
  return m_stats;
}

void DeviceAllocator::reset_peak() {
  std::lock_guard lock(m_mutex);
  m_stats.peak_in_use = m_stats.in_use;
}

std::shared_ptr<Storage> device_storage(const std::shared_ptr<DeviceAllocator>& allocator, std::size_t bytes) {
  std::size_t block = 0;
  void* p = allocator->allocate(bytes, &block);
  return std::make_shared<Storage>(p, bytes, Device::cuda,
                                   [allocator, block](void* q) { allocator->release(q, block); });
}

}  // namespace mpigan::cuda
