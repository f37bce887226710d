#include "run_guard.hpp"

#include "mpigan/core/error.hpp"

#include <mpi.h>

#include <cstdio>
#include <exception>

namespace mpigan::apps {
namespace {
/// Prints @p what (unless empty) and exits with status 1. @p everywhere: every rank is leaving the
/// same way, so the job is not aborted (an abort may end the launcher's forwarding of the message
/// before it reaches the terminal): the ranks wait at a barrier until the message is out, finalize
/// MPI, and only the rank that printed exits with status 1 (a launcher ends a job when one of its
/// ranks fails, and could otherwise end the printing rank early).
[[noreturn]] void fail(const char* what, bool everywhere = false) {
  if (*what != '\0') std::fprintf(stderr, "mpigan: error: %s\n", what);
  std::fflush(stderr);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1 && !everywhere) MPI_Abort(MPI_COMM_WORLD, 1);
    if (everywhere) MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
  }
  std::exit(everywhere && *what == '\0' ? 0 : 1);
}
}  // namespace

namespace {
int g_exit_status = 0;
}  // namespace

void set_exit_status(int status) {
  g_exit_status = status;
}

int exit_status() {
  return g_exit_status;
}

int run_guarded(const std::function<int()>& body) {
  try {
    return body();
  } catch (const mpigan::JobError& e) {
    fail(e.what(), true);
  } catch (const mpigan::Error& e) {
    fail(e.what());
  } catch (const std::exception& e) {
    const std::string label = process_label();
    const std::string msg = (label.empty() ? "" : "[" + label + "] ") + "unexpected exception: " + e.what();
    fail(msg.c_str());
  }
}

}  // namespace mpigan::apps
