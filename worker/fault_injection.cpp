// MPIGAN_FAULT, parsed once (fault_injection.hpp).
#include "mpigan/worker/fault_injection.hpp"

#include "mpigan/core/error.hpp"

#include <cstdio>
#include <cstdlib>

namespace mpigan::worker {

FaultPlan FaultPlan::from_environment() {
  const char* f = std::getenv("MPIGAN_FAULT");
  FaultPlan r;
  if (!f) return r;
  int g = -1, used = 0;
  long long e = -1;
  if (std::sscanf(f, "nan_update@all:%lld%n", &e, &used) == 1) {
    r.group = -1;
  } else if (std::sscanf(f, "nan_update@%d:%lld%n", &g, &e, &used) == 2) {
    r.group = g;
  } else if (std::sscanf(f, "throw@%d:%lld%n", &g, &e, &used) == 2) {
    r.group = g;
    r.raise = true;
  } else if (double ms = 0; std::sscanf(f, "slow@%d:%lf%n", &g, &ms, &used) == 2 && ms > 0 && f[used] == 0) {
    r.group = g;
    r.slow_ms = ms;
    return r;
  } else {
    MPIGAN_FATAL(
        "MPIGAN_FAULT='{}': expected nan_update@GROUP:EXCHANGE, nan_update@all:EXCHANGE (+ for onwards), "
        "throw@GROUP:EXCHANGE or slow@GROUP:MILLISECONDS",
        f);
  }
  r.exchange = e;
  r.onwards = f[used] == '+';
  return r;
}

}  // namespace mpigan::worker
