// MPI wrappers: RAII communicators, one checking macro, typed point-to-point and collective calls
// on float spans, and waits that do not spin a core.
//
// Library code never touches MPI_COMM_WORLD: applications pass a Comm (usually Comm::world())
// down, and layers split it. Every MPI error becomes an mpigan::Error with the call, file:line,
// the rank and MPI_Error_string (MPI_ERRORS_RETURN is set on every communicator made here).
//
// Waiting: MPICH's blocking calls poll in a busy loop, which takes a core from the workers that
// share the master's node. wait_quietly() polls with MPI_Test and sleeps between polls (50 us,
// backing off to 1 ms), so a rank waiting for a message uses well under 1% of a core; the added
// latency (< 1 ms) is negligible against training steps of 0.1-10 s. Payload operations (float
// spans) poll without sleeping for up to kTransferSpinSeconds first: once a large message is in
// flight, both sides must keep calling MPI for it to move at memory speed.
// A waiter whose senders share its node can sleep on a Doorbell instead (Idle::bell): it then
// wakes when a message is announced, not on a timer.
#pragma once

#include "mpigan/core/mpi/doorbell.hpp"

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace mpigan {

namespace detail {
[[noreturn]] void raise_mpi_error(int code, const char* call, const char* file, int line);
}

#define MPIGAN_MPI_CHECK(call)                                                  \
  do {                                                                          \
    const int mpigan_rc_ = (call);                                              \
    if (mpigan_rc_ != MPI_SUCCESS) [[unlikely]]                                 \
      ::mpigan::detail::raise_mpi_error(mpigan_rc_, #call, __FILE__, __LINE__); \
  } while (0)

/// How a waiter idles once its first quick tests found nothing.
struct Idle {
  /// Polling: the cap of the sleeps between tests (they start at 50 us and double).
  double max_sleep_s = 1e-3;
  /// When valid, every sender of the awaited messages rings it after sending: the waiter sleeps
  /// on the bell between tests and polls only for a short grace period after each ring (the
  /// message may still be on its way through the transport).
  Doorbell bell;
  /// The longest sleep on the bell: a safety net; set it to the polling cap when some senders
  /// do not ring (children on other nodes).
  double bell_timeout_s = 0.05;
  /// When set, asked every few dozen polls once the waiter sleeps: true ends the wait with nothing
  /// completed (a signal to act on, a child that stays silent too long).
  std::function<bool()> give_up;
};

/// How long a waiter woken by its doorbell keeps polling for the announced message.
inline constexpr double kBellGraceSeconds = 0.002;

/// A communicator, owned (freed on destruction) or borrowed (world).
class Comm {
 public:
  Comm() = default;
  /// Borrow MPI_COMM_WORLD (apps only) with MPI_ERRORS_RETURN set.
  static Comm world();
  /// Wrap @p c, taking ownership (MPI_Comm_free on destruction) when @p owned.
  Comm(MPI_Comm c, bool owned);
  ~Comm();
  Comm(Comm&& o) noexcept;
  Comm& operator=(Comm&& o) noexcept;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  MPI_Comm get() const { return m_comm; }
  bool valid() const { return m_comm != MPI_COMM_NULL; }
  int rank() const;
  int size() const;
  /// MPI_Comm_split; ranks passing MPI_UNDEFINED get an invalid Comm.
  Comm split(int color, int key) const;
  /// Ranks on the same node (MPI_COMM_TYPE_SHARED), for choosing a GPU by node-local rank.
  Comm split_shared() const;

  void barrier() const;
  void broadcast(std::span<float> data, int root) const;
  /// @p idle: how to wait (a rank that may wait minutes for the root can sleep longer).
  void broadcast_bytes(void* data, std::size_t bytes, int root, const Idle& idle = {}) const;
  /// In-place sum over the communicator.
  void allreduce_sum(std::span<float> data) const;
  void allreduce_sum(std::span<double> data) const;
  double allreduce_max(double v) const;
  std::int64_t allreduce_sum(std::int64_t v) const;
  /// Gathers variable-length byte strings to @p root (empty vector elsewhere).
  std::vector<std::string> gather_strings(const std::string& mine, int root) const;

  void send_bytes(const void* data, std::size_t bytes, int dest, int tag) const;
  void send(std::span<const float> data, int dest, int tag) const;
  /// Receive exactly @p bytes / data.size() floats from @p source with @p tag, without spinning.
  /// @p spin_s: poll without sleeping this long first (a reply expected within milliseconds);
  /// @p idle: how to wait after that (a doorbell the sender rings).
  void recv_bytes(void* data, std::size_t bytes, int source, int tag, double spin_s = 0.0, const Idle& idle = {}) const;
  void recv(std::span<float> data, int source, int tag) const;
  MPI_Request irecv_bytes(void* data, std::size_t bytes, int source, int tag) const;

 private:
  MPI_Comm m_comm = MPI_COMM_NULL;
  bool m_owned = false;
};

/// How long a payload operation (float send/recv, allreduce, broadcast) polls without sleeping
/// before it backs off: the peer is normally in the same operation, and fragmented transports
/// only advance while both sides poll.
inline constexpr double kTransferSpinSeconds = 0.02;

/// Wait for @p req: poll without sleeping for up to @p spin_s, then idle as @p idle says (see the
/// header comment). Returns the status.
MPI_Status wait_quietly(MPI_Request& req, double spin_s = 0.0, const Idle& idle = {});
/// Wait until at least one of @p reqs completes; returns the indices completed (MPI_Testsome).
/// A waiter that expects its next message no sooner than in hundreds of milliseconds can set a
/// longer Idle::max_sleep_s (less CPU at no relative cost in latency), or sleep on a doorbell.
std::vector<int> wait_some_quietly(std::vector<MPI_Request>& reqs, const Idle& idle = {});

/// CPU seconds this process has used (user + system), for measuring what waiting costs.
double process_cpu_seconds();

}  // namespace mpigan
