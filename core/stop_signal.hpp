// Graceful stop on SIGTERM, SIGINT and SIGUSR1. Slurm's time limit and scancel
// send SIGTERM (and, with `#SBATCH --signal=B:USR1@N`, SIGUSR1 N seconds early), a user presses
// Ctrl-C, and mpiexec (Hydra) forwards SIGTERM and SIGINT to every rank.
//
// Until a run's loop starts (reading the experiment and the data, building the models) there is
// nothing to checkpoint, and nothing would look at a recorded signal: a signal ends the process at
// once, however long the set-up takes. From defer_stop_signals() on, the first such signal only
// records itself: the trainer (or the top master) notices it at its next step, writes a complete
// checkpoint and ends the run with kStoppedBySignalStatus. A second one restores the default action
// and re-raises it, so an impatient user still stops the job at once.
#pragma once

#include <string>

namespace mpigan {

/// Exit status of a run that stopped on a signal after checkpointing (EX_TEMPFAIL: try again,
/// i.e. resume). Distinct from 0 (finished), 1 (error) and 128+N (killed by signal N).
inline constexpr int kStoppedBySignalStatus = 75;

/// Installs the handlers (idempotent; the first line of main): a signal ends the process at once,
/// until defer_stop_signals().
void install_stop_handlers();
/// From here the first signal is recorded for the loop to act on (installs the handlers when
/// needed). Call where the loop that checks stop_signal() begins.
void defer_stop_signals();
/// Called from the signal handler, async-signal-safe code only, when a signal is about to end the
/// process (during set-up, or a second signal): the watchdog tells its monitor, so the report says
/// the rank was stopped by a signal rather than that it died. Null: none.
using TerminalSignalHook = void (*)(int signo);
void set_terminal_signal_hook(TerminalSignalHook hook);

/// The signal received (SIGTERM, SIGINT, SIGUSR1), or 0. Async-signal-safe to read anywhere.
int stop_signal();
/// "SIGTERM" etc.
std::string signal_name(int signo);
/// Forget a received signal (tests).
void reset_stop_signal();

}  // namespace mpigan
