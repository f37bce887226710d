// Fault injection for the distributed tests, read once from the environment:
//
//   MPIGAN_FAULT=nan_update@G:E    worker group G puts a NaN in the update of its E-th exchange (1-based)
//   MPIGAN_FAULT=nan_update@all:E  every group does
//   MPIGAN_FAULT=nan_update@G:E+   in that exchange and every later one (a diverged run)
//   MPIGAN_FAULT=throw@G:E         worker group G throws an Error at its E-th exchange (a rank's
//                                  real failure, which must reach FAILED with its message)
//   MPIGAN_FAULT=slow@G:MS         worker group G sleeps MS milliseconds before every exchange (a
//                                  straggler: a slower node, a noisy neighbour)
//
// The master must reject such updates and go on, or stop as diverged.
#pragma once

#include <cstdint>

namespace mpigan::worker {

struct FaultPlan {
  int group = -2;  ///< -1: all groups; -2: no fault
  std::int64_t exchange = -1;
  bool onwards = false;
  bool raise = false;  ///< throw@: an Error instead of a NaN
  double slow_ms = 0;  ///< slow@: the straggler's pause before every exchange

  /// The plan MPIGAN_FAULT describes (no fault when unset; an Error when it cannot be parsed).
  static FaultPlan from_environment();
  /// Does group @p g put a NaN in its exchange number @p e (1-based)?
  bool nan_update(int g, std::int64_t e) const { return !raise && hits(g, e); }
  /// Does group @p g throw at its exchange number @p e?
  bool throws(int g, std::int64_t e) const { return raise && hits(g, e); }
  /// Milliseconds group @p g pauses before each exchange (0: none).
  double pause_ms(int g) const { return group == g ? slow_ms : 0.0; }

 private:
  bool hits(int g, std::int64_t e) const {
    return slow_ms == 0 && (group == -1 || group == g) && (onwards ? e >= exchange : e == exchange);
  }
};

}  // namespace mpigan::worker
