// Monte Carlo samples for the physics tests: showers of the project's GFlash simulator
// (data/simulator) in the 25^3 geometry at normal incidence, a third each in the reference's
// 50, 100 and 200 GeV bins (E uniform within +-4.5 GeV of the centre), simulated once per process
// and shared by the test cases. Two samples that differ only by their seed are two independent
// "Monte Carlo" samples of one distribution: the reference-vs-reference floor.
#pragma once

#include "mpigan/core/rng.hpp"
#include "mpigan/data/simulator/shower_simulator.hpp"
#include "mpigan/physics/observables.hpp"

#include <cstdint>
#include <numbers>
#include <vector>

namespace mpigan::physics::test {

struct Sample {
  Dims3 dims;
  std::vector<float> cells;   ///< events * 15625, raw GeV, (x, y, depth) row-major
  std::vector<float> energy;  ///< GeV
  std::int64_t events() const { return static_cast<std::int64_t>(energy.size()); }
};

inline constexpr int kEventsPerBin = 600;
inline const std::vector<double> kBinCentres = {50, 100, 200};

/// Event i: bin centre kBinCentres[i % 3], E = centre + 9 (u - 1/2), shower from Rng(seed, i).
inline Sample simulate_sample(std::uint64_t seed, int per_bin = kEventsPerBin) {
  const data::sim::ShowerSimulator sim({}, data::Geometry::ecal25);
  Sample s;
  s.dims = sim.dims();
  const auto n = static_cast<std::int64_t>(per_bin * kBinCentres.size());
  const auto cells = static_cast<std::size_t>(s.dims.product());
  s.cells.assign(static_cast<std::size_t>(n) * cells, 0.f);
  s.energy.assign(static_cast<std::size_t>(n), 0.f);
#pragma omp parallel for schedule(dynamic, 4)
  for (std::int64_t i = 0; i < n; ++i) {
    Rng rng(seed, static_cast<std::uint64_t>(i));
    const double e = kBinCentres[static_cast<std::size_t>(i) % kBinCentres.size()] + 9.0 * (rng.uniform_double() - 0.5);
    s.energy[static_cast<std::size_t>(i)] = static_cast<float>(e);
    sim.simulate(e, std::numbers::pi / 2, rng,
                 std::span<float>(s.cells.data() + static_cast<std::size_t>(i) * cells, cells));
  }
  return s;
}

/// The two reference samples (seeds 101 and 202), simulated on first use.
inline const Sample& reference_a() {
  static const Sample s = simulate_sample(101);
  return s;
}
inline const Sample& reference_b() {
  static const Sample s = simulate_sample(202);
  return s;
}

inline Observables observables_of(const Sample& s) {
  return compute_observables(s.cells, s.dims, s.energy);
}

}  // namespace mpigan::physics::test
