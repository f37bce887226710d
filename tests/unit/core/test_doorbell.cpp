// The shared-memory doorbell (core/mpi/doorbell.hpp) across two real processes: a bell in a
// MAP_SHARED page, rung by one process, wakes a sleeper in the other (a process-private futex
// would not), and a ring that comes before the sleep is never lost.
#include "mpigan/core/mpi/doorbell.hpp"

#include <doctest/doctest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <thread>

using namespace mpigan;

namespace {
struct SharedWord {
  SharedWord() {
    void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    word = static_cast<std::uint32_t*>(p);
    *word = 12345;
  }
  ~SharedWord() { ::munmap(word, 4096); }
  std::uint32_t* word = nullptr;
};

int exit_code_of(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}
}  // namespace

TEST_CASE("doorbell: counts rings; an invalid bell does nothing") {
  SharedWord w;
  const Doorbell bell(w.word);
  bell.reset();
  CHECK(bell.valid());
  CHECK(bell.value() == 0u);
  bell.ring();
  bell.ring();
  CHECK(bell.value() == 2u);
  CHECK(*w.word == 2u);
  // A value that moved on since it was read: no sleep at all.
  CHECK(bell.wait(1, 10.0));
  // Nothing rang: the wait times out and says so.
  CHECK_FALSE(bell.wait(2, 0.01));
  CHECK(bell.value() == 2u);

  const Doorbell none;
  CHECK_FALSE(none.valid());
  none.ring();
  CHECK(none.value() == 0u);
  CHECK_FALSE(none.wait(0, 0.01));
}

TEST_CASE("doorbell: a ring in one process wakes a sleeper in another") {
  SharedWord w;
  const Doorbell bell(w.word);
  bell.reset();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // The sleeper: woken by the ring (exit 0), or the 20 s safety timeout passes (exit 1).
    const bool woken = bell.wait(0, 20.0);
    ::_exit(woken && bell.value() == 1u ? 0 : 1);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let it fall asleep
  bell.ring();
  CHECK(exit_code_of(pid) == 0);
}

TEST_CASE("doorbell: a ring between reading the value and sleeping is not lost") {
  SharedWord w;
  const Doorbell bell(w.word);
  bell.reset();
  const std::uint32_t seen = bell.value();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    bell.ring();
    ::_exit(0);
  }
  REQUIRE(exit_code_of(pid) == 0);
  // The ring happened after `seen` was read: the wait returns at once, with the new count.
  CHECK(bell.wait(seen, 20.0));
  CHECK(bell.value() == seen + 1);
}
