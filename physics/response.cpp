// The calorimeter response per energy bin with errors and pulls (see response.hpp).
#include "mpigan/physics/response.hpp"

#include "mpigan/physics/stats.hpp"

#include <cmath>

namespace mpigan::physics {
namespace {

std::vector<double> gather(const std::vector<double>& v, std::span<const std::int64_t> events) {
  std::vector<double> out;
  out.reserve(events.size());
  for (std::int64_t e : events) out.push_back(v[static_cast<std::size_t>(e)]);
  return out;
}

// Keeps the larger |pull| in @p worst (NaN pulls are skipped).
void track(double& worst, double pull) {
  if (std::isnan(pull)) return;
  if (std::isnan(worst) || std::fabs(pull) > worst) worst = std::fabs(pull);
}

}  // namespace

MomentSummary summarise(std::span<const double> v) {
  MomentSummary r;
  const auto n = static_cast<double>(v.size());
  if (v.size() < 2) return r;
  r.mean = mean(v);
  const double s2 = variance(v), s = std::sqrt(s2);
  r.mean_error = s / std::sqrt(n);
  if (v.size() < 4 || !(s > 0) || r.mean == 0.0) return r;
  double mu3 = 0, mu4 = 0;
  for (double x : v) {
    const double d = x - r.mean;
    mu3 += d * d * d;
    mu4 += d * d * d * d;
  }
  mu3 /= n;
  mu4 /= n;
  r.resolution = s / r.mean;
  const double var_m = s2 / n, var_s = std::max(0.0, mu4 - s2 * s2) / (4.0 * s2 * n), cov = mu3 / (2.0 * s * n);
  const double rel2 = var_s / s2 + var_m / (r.mean * r.mean) - 2.0 * cov / (s * r.mean);
  r.resolution_error = std::fabs(r.resolution) * std::sqrt(std::max(0.0, rel2));
  return r;
}

ComparedValue compare_values(double ref, double ref_error, double gen, double gen_error) {
  ComparedValue c;
  c.ref = ref;
  c.ref_error = ref_error;
  c.gen = gen;
  c.gen_error = gen_error;
  const double err = std::hypot(ref_error, gen_error);
  if (std::isfinite(err) && err > 0) c.pull = (gen - ref) / err;
  if (std::isfinite(ref) && ref != 0.0) {
    c.ratio = gen / ref;
    c.ratio_error = std::fabs(c.ratio) * std::hypot(ref_error / ref, gen != 0.0 ? gen_error / gen : 0.0);
  }
  return c;
}

EnergyResponse energy_response(const Observables& ref, const Observables& gen, std::span<const EventBin> bins,
                               const SeparationOptions& separation) {
  SeparationOptions so = separation;
  so.per_layer = false;
  so.histogram_observables = false;
  const SeparationTable table = separation_powers(ref, gen, bins, so);
  EnergyResponse r;
  for (const EventBin& bin : bins) {
    const std::vector<std::int64_t> er = select_bin(ref, bin), eg = select_bin(gen, bin);
    ResponseBin b;
    b.bin = bin.label;
    b.n_ref = static_cast<std::int64_t>(er.size());
    b.n_gen = static_cast<std::int64_t>(eg.size());
    const MomentSummary sr = summarise(gather(ref.sampling_fraction, er));
    const MomentSummary sg = summarise(gather(gen.sampling_fraction, eg));
    b.linearity = compare_values(sr.mean, sr.mean_error, sg.mean, sg.mean_error);
    b.resolution = compare_values(sr.resolution, sr.resolution_error, sg.resolution, sg.resolution_error);
    const MomentSummary hr = summarise(gather(ref.hits, er)), hg = summarise(gather(gen.hits, eg));
    b.occupancy = compare_values(hr.mean, hr.mean_error, hg.mean, hg.mean_error);
    if (const SeparationRow* row = table.find("sampling_fraction", bin.label)) {
      b.shape_s = row->s;
      b.shape_floor = row->floor;
      b.shape_floor_error = row->floor_error;
      if (row->floor_error > 0) b.shape_pull = (row->s - row->floor) / row->floor_error;
    }
    track(r.max_abs_pull_linearity, b.linearity.pull);
    track(r.max_abs_pull_resolution, b.resolution.pull);
    track(r.max_abs_pull_occupancy, b.occupancy.pull);
    track(r.max_abs_pull_shape, b.shape_pull);
    r.bins.push_back(std::move(b));
  }
  return r;
}

}  // namespace mpigan::physics
