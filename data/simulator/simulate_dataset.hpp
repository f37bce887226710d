// simulate_dataset: a whole data set of parametrised showers in the real 3DGAN file layouts, the
// engine of `mpigan simulate`.
//
// Files (the real keys and units, readable by h5py):
//   25x25x25  EleEscan_NNN.h5             ECAL (N,25,25,25) raw GeV, energy (N,) GeV
//   51x51x25  EleEscan_RandomAngle_NNN.h5 ECAL (N,51,51,25) GeV x 50, energy (N,), theta (N,) rad,
//                                          eta (N,) = -ln tan(theta/2), mtheta (N,) rad (measPython
//                                          on the image), sum (N,) = sum of ECAL in file units
// all float32, gzip level 4, ECAL chunked one event per chunk.
// Sampling: E ~ U(energy_lo, energy_hi) GeV, theta ~ U(angle_lo, angle_hi) degrees.
//
// Reproducibility: event g (0-based over the whole set) uses Rng(seed, stream(g)) for its energy,
// angle and shower, and events are written in index order, so the same options give byte-identical
// files whatever the thread count.
#pragma once

#include "mpigan/data/layout.hpp"
#include "mpigan/data/simulator/shower_simulator.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mpigan::data::sim {

struct SimulateOptions {
  std::int64_t events = 1000;
  Geometry geometry = Geometry::ecal25;
  double energy_lo = 2.0, energy_hi = 500.0;  ///< GeV
  double angle_lo = 90.0, angle_hi = 90.0;    ///< degrees (ecal25 requires 90)
  std::string out_dir;
  std::uint64_t seed = 1;
  std::int64_t events_per_file = 10000;
  int threads = 0;  ///< 0 = hardware concurrency
  int gzip_level = 4;
  ShowerConfig shower;
};

struct SimulateReport {
  std::vector<std::string> files;
  std::int64_t events = 0;
  double seconds = 0;
  double events_per_second() const { return seconds > 0 ? static_cast<double>(events) / seconds : 0; }
};

/// Throws ConfigError listing every bad option (events, ranges, geometry/angle mismatch, ...).
void validate(const SimulateOptions& options);

/// Writes the files; @p progress (optional) is called after each file with (files done, events done).
SimulateReport simulate_dataset(const SimulateOptions& options,
                                const std::function<void(std::int64_t, std::int64_t)>& progress = {});

/// The Rng of event @p g of a data set with @p seed.
Rng event_rng(std::uint64_t seed, std::int64_t g);

/// "LO:HI" (or a single value "V" = "V:V") -> (LO, HI); throws ConfigError naming @p what.
std::pair<double, double> parse_range(std::string_view text, std::string_view what);

/// File name of file @p index (0-based) of a data set: "EleEscan_001.h5", ...
std::string simulated_file_name(Geometry g, std::int64_t index);

}  // namespace mpigan::data::sim
