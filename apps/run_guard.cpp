#include "run_guard.hpp"

#include "mpigan/core/error.hpp"

#include <mpi.h>

#include <cstdio>
#include <exception>

namespace mpigan::apps {
namespace {
[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "mpigan: error: %s\n", what);
  std::fflush(stderr);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
  }
  std::exit(1);
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
  } catch (const mpigan::Error& e) {
    fail(e.what());
  } catch (const std::exception& e) {
    const std::string label = process_label();
    const std::string msg = (label.empty() ? "" : "[" + label + "] ") + "unexpected exception: " + e.what();
    fail(msg.c_str());
  }
}

}  // namespace mpigan::apps
