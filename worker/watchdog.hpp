// Failure detection outside MPI. MPICH cannot tell the surviving ranks that one died (a pending
// receive from a dead rank just never completes), and its launcher, when it cleans up after a
// killed process, reports the wrong PID and kills everyone with SIGKILL. So every rank keeps a TCP
// connection to rank 0's watchdog thread; the kernel closes a dead process's sockets at once, so
// the watchdog learns within milliseconds which rank died, prints it ("rank 2 (worker 1, pid ... on
// host) died"), records it in RUN_DIR/FAILED, and ends the job (the launcher then stops the rest).
// Ranks watch their connection too: if rank 0 dies they say so and exit. A rank that finishes
// normally says goodbye first. With `mpiexec -disable-auto-cleanup` the report is certain; with
// the default clean-up it races the launcher's SIGKILL (it usually wins); srun names the task.
// When the MPI library itself aborts rank 0 because the peer vanished in the middle of a transfer
// (UCX's shared-memory transport does), a SIGABRT handler reports the dead rank first.
#pragma once

#include "mpigan/core/mpi/comm.hpp"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace mpigan::worker {

class Watchdog {
 public:
  /// Collective over @p comm. @p labels[r] describes rank r (role, pid, host) for the report;
  /// @p failure_file is written by rank 0 when a rank dies.
  Watchdog(const Comm& comm, std::vector<std::string> labels, std::string failure_file);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  /// Normal end: tell rank 0 this rank is done (before the final barrier).
  void goodbye();
  /// Rank 0, from a signal handler: report ranks whose connection has closed (async-signal-safe).
  void report_dead_from_signal();

 private:
  void watch_children();
  void watch_parent();
  int m_rank = 0;
  std::vector<std::string> m_labels;
  std::string m_failure_file;
  int m_listen = -1;
  std::vector<int> m_fds;  // rank 0: one per other rank (index = rank); others: [0] = to rank 0
  std::atomic<bool> m_stop{false};
  int m_wake[2] = {-1, -1};
  std::thread m_thread;
};

}  // namespace mpigan::worker
