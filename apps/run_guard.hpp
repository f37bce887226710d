// run_guarded: the one place where exceptions become an exit status. When MPI runs with more
// than one rank, an error on any rank aborts the whole job (MPI_Abort) after printing the
// message with the rank; otherwise the process exits with status 1.
#pragma once

#include <functional>

namespace mpigan::apps {

int run_guarded(const std::function<int()>& body);

}  // namespace mpigan::apps
