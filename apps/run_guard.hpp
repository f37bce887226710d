// run_guarded: the one place where exceptions become an exit status. When MPI runs with more
// than one rank, an error on any rank aborts the whole job (MPI_Abort) after printing the
// message with the rank; otherwise the process exits with status 1. An error every rank knows of
// (JobError) ends the job without the abort, the raising rank with status 1.
#pragma once

#include <functional>

namespace mpigan::apps {

int run_guarded(const std::function<int()>& body);

/// A command's exit status when it returns normally (0 unless set): main returns it, so that every
/// command ends through main, after MPI_Finalize and with its output flushed.
void set_exit_status(int status);
int exit_status();

}  // namespace mpigan::apps
