// Graceful stop on SIGTERM, SIGINT and SIGUSR1 (stop_signal.hpp).
#include "mpigan/core/stop_signal.hpp"

#include <atomic>
#include <csignal>
#include <cstring>

namespace mpigan {
namespace {

volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_deferred = 0;
std::atomic<TerminalSignalHook> g_hook{nullptr};

extern "C" void on_stop_signal(int signo) {
  if (g_signal != 0 || g_deferred == 0) {
    // Set-up, or the second signal: the default action (terminate) at once.
    if (const TerminalSignalHook hook = g_hook.load()) hook(signo);
    std::signal(signo, SIG_DFL);
    std::raise(signo);
    return;
  }
  g_signal = signo;
}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // blocking reads and MPI's polling go on; the loop checks the flag
  for (int s : {SIGTERM, SIGINT, SIGUSR1}) sigaction(s, &sa, nullptr);
}

void set_terminal_signal_hook(TerminalSignalHook hook) {
  g_hook.store(hook);
}

void defer_stop_signals() {
  install_stop_handlers();
  g_deferred = 1;
}

int stop_signal() {
  return g_signal;
}

void reset_stop_signal() {
  g_signal = 0;
}

std::string signal_name(int signo) {
  switch (signo) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return std::string("signal ") + std::to_string(signo);
  }
}

}  // namespace mpigan
