// Energy and angle bins (see binning.hpp).
#include "mpigan/physics/binning.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/rng.hpp"

#include <fmt/format.h>

#include <cmath>
#include <numeric>

namespace mpigan::physics {

bool EventBin::uses_angle() const {
  return std::isfinite(angle_lo) || std::isfinite(angle_hi);
}

bool EventBin::contains(double energy_gev, double angle_rad) const {
  if (!(energy_gev > energy_lo && energy_gev < energy_hi)) return false;
  return !uses_angle() || (angle_rad > angle_lo && angle_rad < angle_hi);
}

std::vector<EventBin> make_bins(const BinningOptions& options) {
  std::vector<std::string> problems;
  if (!(options.energy_half_width > 0)) {
    problems.push_back(fmt::format("energy_half_width {} GeV must be > 0", options.energy_half_width));
  }
  if (!options.angles.empty() && !(options.angle_half_width > 0)) {
    problems.push_back(fmt::format("angle_half_width {} rad must be > 0", options.angle_half_width));
  }
  MPIGAN_CHECK_PROBLEMS(problems);
  std::vector<EventBin> bins;
  if (options.all) bins.push_back(EventBin{"all"});
  for (double e : options.energies) {
    EventBin b;
    b.energy_lo = e - options.energy_half_width;
    b.energy_hi = e + options.energy_half_width;
    if (options.angles.empty()) {
      b.label = fmt::format("{:g} GeV", e);
      bins.push_back(b);
      continue;
    }
    for (double a : options.angles) {
      EventBin ba = b;
      ba.angle_lo = a - options.angle_half_width;
      ba.angle_hi = a + options.angle_half_width;
      ba.label = fmt::format("{:g} GeV, {:.3g} rad", e, a);
      bins.push_back(ba);
    }
  }
  return bins;
}

std::vector<std::int64_t> select_bin(const Observables& o, const EventBin& bin) {
  MPIGAN_CHECK(!bin.uses_angle() || static_cast<std::int64_t>(o.angle.size()) == o.events,
               "bin '{}' selects by angle but the sample has no angles ({} for {} events)", bin.label, o.angle.size(),
               o.events);
  std::vector<std::int64_t> idx;
  for (std::int64_t e = 0; e < o.events; ++e) {
    const double a = o.angle.empty() ? 0.0 : o.angle[static_cast<std::size_t>(e)];
    if (bin.contains(o.energy[static_cast<std::size_t>(e)], a)) idx.push_back(e);
  }
  return idx;
}

std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> split_halves(std::span<const std::int64_t> events,
                                                                             std::uint64_t seed) {
  std::vector<std::int64_t> v(events.begin(), events.end());
  Rng rng(seed, 0x5011u);
  for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);  // Fisher-Yates
  const std::size_t h = v.size() / 2;
  std::vector<std::int64_t> a(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(h));
  std::vector<std::int64_t> b(v.begin() + static_cast<std::ptrdiff_t>(h), v.end());
  return {std::move(a), std::move(b)};
}

}  // namespace mpigan::physics
