// Shared-memory doorbells (doorbell.hpp): ring and futex waits on a counter shared by a node's ranks.
#include "mpigan/core/mpi/doorbell.hpp"

#include <atomic>
#include <chrono>
#include <climits>
#include <thread>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#endif

namespace mpigan {

Doorbell::Doorbell(std::uint32_t* word) : m_word(word) {}

std::uint32_t Doorbell::value() const {
  if (!valid()) return 0;
  return std::atomic_ref<std::uint32_t>(*m_word).load(std::memory_order_acquire);
}

void Doorbell::reset() const {
  if (valid()) std::atomic_ref<std::uint32_t>(*m_word).store(0, std::memory_order_release);
}

void Doorbell::ring() const {
  if (!valid()) return;
  std::atomic_ref<std::uint32_t>(*m_word).fetch_add(1, std::memory_order_acq_rel);
#if defined(__linux__)
  // Not FUTEX_PRIVATE_FLAG: the sleeper is another process mapping the same memory.
  ::syscall(SYS_futex, m_word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
#endif
}

bool Doorbell::wait(std::uint32_t seen, double timeout_s) const {
  if (!valid()) return false;
  if (value() != seen) return true;
#if defined(__linux__)
  const double t = timeout_s > 0 ? timeout_s : 0;
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(t);
  ts.tv_nsec = static_cast<long>((t - static_cast<double>(ts.tv_sec)) * 1e9);
  // FUTEX_WAIT sleeps only if the word still equals `seen` when the kernel checks it (atomically
  // with queueing the sleeper), so a ring between our read and the call returns at once (EAGAIN).
  const long rc = ::syscall(SYS_futex, m_word, FUTEX_WAIT, seen, &ts, nullptr, 0);
  if (rc == 0 || errno == EAGAIN) return value() != seen || rc == 0;
  return false;  // ETIMEDOUT or EINTR
#else
  std::this_thread::sleep_for(std::chrono::duration<double>(timeout_s));
  return value() != seen;
#endif
}

}  // namespace mpigan
