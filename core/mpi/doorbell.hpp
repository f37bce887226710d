// A doorbell: a 32-bit counter in memory shared by the processes of one node, which a sender
// rings after each message it sends and a receiver sleeps on while it waits (a Linux futex on a
// shared mapping). A master whose children share its node then sleeps through their compute
// phase and wakes only when a header comes, where polling MPI would wake it ~100-1000 times a
// second and each wake-up would preempt a worker on a full node (docs/distributed.md, waiting).
//
// The bell only says "something was sent": the receiver still takes the message from MPI. A
// waiter reads the counter before it tests MPI and sleeps only while the counter still holds that
// value, so a ring that comes between the test and the sleep is never lost (wait_quietly in
// comm.hpp does this, and polls for a short grace period after each ring while the message is on
// its way through the transport).
//
// A default-constructed Doorbell is invalid (no shared memory, or not Linux): rings do nothing
// and waiters poll MPI with sleeps as before.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mpigan {

class Doorbell {
 public:
  /// Bytes one doorbell occupies in a shared segment (a cache line of its own).
  static constexpr std::size_t kBytes = 64;

  Doorbell() = default;
  /// @p word: 4-byte aligned, in memory mapped shared by every process that uses the bell.
  explicit Doorbell(std::uint32_t* word);

  bool valid() const { return m_word != nullptr; }
  /// The counter (acquire): read before testing for the messages a ring announces.
  std::uint32_t value() const;
  /// Count one message and wake every sleeper (release). No-op when invalid.
  void ring() const;
  /// Sleep until the counter differs from @p seen or @p timeout_s passes; returns true when it
  /// differs (woken, or it had changed already), false on time-out or an interrupted sleep.
  bool wait(std::uint32_t seen, double timeout_s) const;
  /// Set the counter to zero (its owner, before anyone else uses it).
  void reset() const;

 private:
  std::uint32_t* m_word = nullptr;
};

}  // namespace mpigan
