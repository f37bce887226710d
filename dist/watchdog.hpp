// Failure detection outside MPI. MPICH cannot tell the surviving ranks that one died (a pending
// receive from a dead rank just never completes), and its launcher (Hydra) kills every rank with
// SIGKILL within milliseconds of a death, reporting only the signal. So:
//
//  * every rank keeps a TCP connection to rank 0's node; the kernel closes a dead process's
//    sockets at once, so a closed connection without a goodbye means that rank died;
//  * the other end of those connections is held by a small monitor process that rank 0 starts
//    (posix_spawn of this executable, `mpigan --watchdog-monitor`, in its own session). The
//    launcher's kill does not reach it, and it keeps rank 0's stderr open, so Hydra forwards what
//    it says before its own summary. It prints which rank died ("rank 2 worker 1 (pid ... on
//    host) died"), records it in RUN_DIR/FAILED and ends the job (SIGTERM to rank 0; the other
//    ranks see rank 0's connection close and exit);
//  * ranks other than 0 watch their connection in a thread: if rank 0 goes, they say so and exit;
//  * a rank that finishes normally says goodbye first; rank 0 tells the monitor through a pipe,
//    and the monitor passes the goodbye on to the other ranks.
//
// Only the job's own ranks are taken: rank 0 draws a random secret and passes it to the others over
// MPI with its address; a connection whose first 20 bytes are not a rank number not yet connected
// and that secret, within 5 s, is refused and logged. A job on one node listens on the loopback
// address only.
//
// srun names a dead task itself; the monitor adds the rank's role and writes FAILED there too.
#pragma once

#include "mpigan/core/mpi/comm.hpp"

#include <sys/types.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace mpigan::dist {

class Watchdog {
 public:
  /// Collective over @p comm. @p labels[r] describes rank r (role, pid, host) for the report;
  /// @p failure_file is written when a rank dies.
  Watchdog(const Comm& comm, const std::vector<std::string>& labels, std::string failure_file);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  /// Normal end: tell rank 0's side this rank is done (before the final barrier).
  void goodbye();

 private:
  void start_monitor(const std::vector<int>& fds, const std::vector<std::string>& labels);
  void watch_parent();
  int m_rank = 0;
  std::string m_failure_file;
  int m_fd = -1;         ///< ranks > 0: the connection to rank 0's monitor
  int m_life = -1;       ///< rank 0: write end of the pipe the monitor watches
  pid_t m_monitor = -1;  ///< rank 0: the monitor process
  std::atomic<bool> m_stop{false};
  int m_wake[2] = {-1, -1};
  std::thread m_thread;
};

/// The monitor's entry point: when argv[1] is "--watchdog-monitor", runs the monitor and returns
/// its exit status; otherwise returns nothing. Every executable that trains (mpigan, the MPI
/// test driver) calls this first thing in main(), before MPI_Init.
std::optional<int> watchdog_monitor_main(int argc, char** argv);

}  // namespace mpigan::dist
