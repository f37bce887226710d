// Fault injection for the distributed tests, read once from the environment:
//
//   MPIGAN_FAULT=nan_update@G:E    worker group G puts a NaN in the update of its E-th exchange (1-based)
//   MPIGAN_FAULT=nan_update@all:E  every group does
//   MPIGAN_FAULT=nan_update@G:E+   in that exchange and every later one (a diverged run)
//
// The master must reject such updates and go on, or stop as diverged.
#pragma once

#include <cstdint>

namespace mpigan::worker {

struct FaultPlan {
  int group = -2;  ///< -1: all groups; -2: no fault
  std::int64_t exchange = -1;
  bool onwards = false;

  /// The plan MPIGAN_FAULT describes (no fault when unset; an Error when it cannot be parsed).
  static FaultPlan from_environment();
  /// Does group @p g put a NaN in its exchange number @p e (1-based)?
  bool nan_update(int g, std::int64_t e) const {
    return (group == -1 || group == g) && (onwards ? e >= exchange : e == exchange);
  }
};

}  // namespace mpigan::worker
