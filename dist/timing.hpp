// The clock models of the sandbox (sandbox/) and of a real job's virtual workers
// (topology.virtual_compute): how long a virtual worker computes one step, how long a payload
// takes on the wire, and how long the master takes to serve an update. Every draw is a pure
// function of (seed, worker, draw index), so a sandbox run is the same whatever order its events
// are processed in, and the same on every machine.
//
// Compute models (one draw per GAN step; sync_every steps per update are summed), as specs:
//   constant:T             T seconds
//   exp:SHIFT,MEAN         SHIFT + an exponential of mean MEAN (stragglers' tail)
//   lognormal:MEDIAN,SIGMA MEDIAN * exp(SIGMA * z), z standard normal
//   replay:FILE            the compute_s column of a real run's updates.csv, per worker (virtual
//                          worker k replays real worker k mod W), cycled; one value per update
//   cycle:FILE             the real workers' whole cycles: the time between a worker's
//                          consecutive arrivals at the master (time_s of updates.csv), with its
//                          waits on the master and the OS; run it with --latency 0 --master-ms 0
//                          and a huge --bandwidth, and the arrivals keep the real run's order
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mpigan::dist {

class ComputeModel {
 public:
  enum class Kind { constant, shifted_exponential, lognormal, replay, cycle };

  /// Parse a spec (above); throws ConfigError naming the spec and what was expected.
  static ComputeModel parse(const std::string& spec);

  /// Seconds of compute for update @p update of @p worker, made of @p steps GAN steps.
  double draw(std::uint64_t seed, int worker, std::int64_t update, std::int64_t steps) const;
  /// The mean seconds per step (replay: per update), for summaries and predictions.
  double mean() const;
  Kind kind() const { return m_kind; }
  const std::string& spec() const { return m_spec; }

 private:
  Kind m_kind = Kind::constant;
  double m_a = 0, m_b = 0;
  std::string m_spec;
  std::vector<std::vector<double>> m_replay;
};

/// The link between a worker and the master: latency + bytes / bandwidth, each way.
struct NetworkModel {
  double bandwidth_bytes_per_s = 10e9;  ///< Aries-like injection bandwidth
  double latency_s = 2e-6;
  double transfer(std::size_t bytes) const { return latency_s + static_cast<double>(bytes) / bandwidth_bytes_per_s; }
};

/// A uniform draw in [0, 1) from (seed, stream, index): splitmix64 of the three.
double uniform01(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);

/// The column @p column of a CSV file with a header line, per value of the integer column
/// @p by (rows in file order); throws DataError naming the file and line of a bad value.
std::vector<std::vector<double>> read_csv_column_by(const std::string& path, const std::string& column,
                                                    const std::string& by);

}  // namespace mpigan::dist
