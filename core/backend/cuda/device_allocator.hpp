// Device memory for the CUDA backend: a small caching allocator over cudaMalloc, and Storage
// objects whose deleter gives their block back to it.
//
// Why caching: cudaMalloc/cudaFree synchronise the device and cost 10-100 us each; layers that
// allocate per step (activations of a batch whose size changes, workspaces that grow) would
// otherwise serialise the GPU. Blocks are kept per rounded size and reused.
//
// Invariants:
//  - All work touching this memory runs on the owning backend's single stream (ops, copies,
//    NCCL). A block freed by the host while kernels still use it may therefore be handed out again
//    immediately: stream order makes the new user's work run after the old user's.
//  - Sizes are rounded up: to 512 B below 1 MiB, to 2 MiB above. A cached block is reused for a
//    request of at most its size and at least 4/5 of it.
//  - The allocator outlives every Storage it produced (each deleter holds a shared_ptr), so a
//    tensor may outlive its backend. Cached blocks are freed when the allocator dies.
//  - Out of memory: the cache is emptied and the allocation retried once; then an Error with the
//    request, the bytes in use and cached, and the device's free/total memory.
//  - Thread-safe (one mutex); the caching can be switched off (MPIGAN_CUDA_CACHING=0) to debug
//    use-after-free with compute-sanitizer.
#pragma once

#include "mpigan/core/tensor.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace mpigan::cuda {

class DeviceAllocator {
 public:
  struct Stats {
    std::size_t in_use = 0;  ///< bytes in blocks handed out
    std::size_t cached = 0;  ///< bytes in free blocks kept for reuse
    std::size_t peak_in_use = 0;
    std::uint64_t device_mallocs = 0;  ///< cudaMalloc calls made
  };

  DeviceAllocator(int device, bool caching);
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  /// A block of at least @p bytes (rounded size in *block_bytes); nullptr for 0 bytes.
  void* allocate(std::size_t bytes, std::size_t* block_bytes);
  /// Give back a block from allocate() with its rounded size.
  void release(void* ptr, std::size_t block_bytes) noexcept;
  /// cudaFree every cached block.
  void empty_cache() noexcept;
  Stats stats() const;
  /// The peak starts again from the bytes in use now.
  void reset_peak();
  int device() const { return m_device; }
  bool caching() const { return m_caching; }

  static std::size_t round_size(std::size_t bytes);

 private:
  void free_cached_locked() noexcept;

  int m_device;
  bool m_caching;
  mutable std::mutex m_mutex;
  std::multimap<std::size_t, void*> m_free;  ///< rounded size -> block
  Stats m_stats;
};

/// Device Storage of @p bytes from @p allocator (Device::cuda); its deleter returns the block.
std::shared_ptr<Storage> device_storage(const std::shared_ptr<DeviceAllocator>& allocator, std::size_t bytes);

}  // namespace mpigan::cuda
