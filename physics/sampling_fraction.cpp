// Sampling-fraction mean relative error per energy bin (see sampling_fraction.hpp).
#include "mpigan/physics/sampling_fraction.hpp"

#include "mpigan/physics/stats.hpp"

#include <cmath>

namespace mpigan::physics {
namespace {

std::vector<double> values(const Observables& o, std::span<const std::int64_t> events) {
  std::vector<double> v;
  v.reserve(events.size());
  for (std::int64_t e : events) v.push_back(o.sampling_fraction[static_cast<std::size_t>(e)]);
  return v;
}

}  // namespace

SamplingFractionMre sampling_fraction_mre(const Observables& ref, const Observables& gen,
                                          std::span<const EventBin> bins) {
  SamplingFractionMre r;
  double sum = 0, err2 = 0;
  for (const EventBin& bin : bins) {
    const std::vector<std::int64_t> er = select_bin(ref, bin), eg = select_bin(gen, bin);
    SamplingFractionBin b;
    b.bin = bin.label;
    b.n_ref = static_cast<std::int64_t>(er.size());
    b.n_gen = static_cast<std::int64_t>(eg.size());
    const std::vector<double> vr = values(ref, er), vg = values(gen, eg);
    b.mean_ref = mean(vr);
    b.mean_gen = mean(vg);
    b.sigma_ref = std::sqrt(variance(vr));
    b.sigma_gen = std::sqrt(variance(vg));
    if (er.empty() || !(b.mean_ref != 0.0)) {
      r.bins.push_back(b);
      continue;
    }
    b.mre = std::fabs(b.mean_gen - b.mean_ref) / std::fabs(b.mean_ref);
    if (eg.empty()) {
      b.error = 0.0;
    } else {
      const double ratio = b.mean_gen / b.mean_ref;
      b.error = std::sqrt(b.sigma_gen * b.sigma_gen / static_cast<double>(b.n_gen) +
                          ratio * ratio * b.sigma_ref * b.sigma_ref / static_cast<double>(b.n_ref)) /
                std::fabs(b.mean_ref);
    }
    sum += b.mre;
    err2 += b.error * b.error;
    ++r.bins_used;
    r.bins.push_back(b);
  }
  if (r.bins_used > 0) {
    r.mre = sum / r.bins_used;
    r.error = std::sqrt(err2) / r.bins_used;
  }
  return r;
}

}  // namespace mpigan::physics
