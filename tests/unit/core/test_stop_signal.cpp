// Graceful stop (core/stop_signal.hpp): during set-up a signal ends the process at once; once a
// run's loop has deferred them, the first SIGTERM/SIGINT/SIGUSR1 is only recorded, the process goes
// on; a second one ends it by that signal at once.
#include <doctest/doctest.h>

#include "mpigan/core/stop_signal.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

using namespace mpigan;

TEST_CASE("stop signals: the first is recorded, the second terminates") {
  // In a child process: the test runner's own signal dispositions stay untouched.
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    defer_stop_signals();
    if (stop_signal() != 0) _exit(10);
    std::raise(SIGUSR1);
    if (stop_signal() != SIGUSR1) _exit(11);  // recorded, and still running
    if (signal_name(stop_signal()) != "SIGUSR1") _exit(12);
    std::raise(SIGUSR1);  // the second: default action, the process ends here
    _exit(13);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  INFO("exit status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGUSR1);
  CHECK(kStoppedBySignalStatus == 75);
  CHECK(signal_name(SIGTERM) == "SIGTERM");
  CHECK(signal_name(SIGINT) == "SIGINT");
}

TEST_CASE("stop signals: during set-up (handlers installed, nothing deferred) the first signal ends the process") {
  for (const int signo : {SIGTERM, SIGINT, SIGUSR1}) {
    CAPTURE(signo);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      install_stop_handlers();  // the first line of main
      std::raise(signo);        // e.g. while an experiment or a data file is read
      _exit(20);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    INFO("exit status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1));
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == signo);
  }
}
