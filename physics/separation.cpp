// Separation powers with their statistical floors (see separation.hpp).
#include "mpigan/physics/separation.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/physics/histogram.hpp"
#include "mpigan/physics/stats.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>

namespace mpigan::physics {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Histogram observables get this many times floor_splits: a sum over events per split is cheap,
// and their S, dominated by 2-3 bins, makes the floor of one split noisy (separation.hpp).
constexpr int kHistogramSplitFactor = 4;

std::vector<double> gather(const ScalarObservable& s, std::span<const std::int64_t> events) {
  std::vector<double> v(events.size());
  for (std::size_t i = 0; i < events.size(); ++i) v[i] = s.value(events[i]);
  return v;
}

double scalar_separation(const std::vector<double>& a, const std::vector<double>& b, const SeparationOptions& o) {
  if (a.empty() || b.empty()) return kNaN;
  const auto [lo, hi] = common_range(a, b, o.tail);
  Histogram ha(o.bins, lo, hi), hb(o.bins, lo, hi);
  ha.fill(a);
  hb.fill(b);
  return separation_power(ha.counts(), hb.counts());
}

// Mean into row.floor and standard deviation into row.floor_error of the rescaled half-split S values.
void set_floor(SeparationRow& row, const std::vector<double>& values) {
  if (values.empty()) return;
  row.floor = mean(values);
  if (values.size() >= 2) row.floor_error = std::sqrt(variance(values));
}

double floor_scale(std::int64_t n_ref, std::int64_t n_gen, std::size_t h1, std::size_t h2) {
  return (1.0 / static_cast<double>(n_ref) + 1.0 / static_cast<double>(n_gen)) /
         (1.0 / static_cast<double>(h1) + 1.0 / static_cast<double>(h2));
}

}  // namespace

const SeparationRow* SeparationTable::find(std::string_view observable, std::string_view bin) const {
  for (const SeparationRow& r : rows) {
    if (r.observable == observable && r.bin == bin) return &r;
  }
  return nullptr;
}

namespace {

/// A histogram observable: the sum over a set of events of a per-event array.
struct HistogramObservable {
  std::string name;
  std::function<std::vector<double>(const Observables&, std::span<const std::int64_t>)> sum;
};

/// The cell spectrum and the profiles along x, y and z, as histogram observables.
std::vector<HistogramObservable> histogram_observables() {
  std::vector<HistogramObservable> hobs;
  hobs.push_back({"spectrum", [](const Observables& o, std::span<const std::int64_t> ev) {
                    std::vector<double> h(static_cast<std::size_t>(o.options.spectrum.bins()), 0.0);
                    for (std::int64_t e : ev) {
                      const auto s = o.spectrum_of(e);
                      for (std::size_t k = 0; k < h.size(); ++k) h[k] += s[k];
                    }
                    return h;
                  }});
  static constexpr const char* kAxis[3] = {"x", "y", "z"};
  for (int a = 0; a < 3; ++a) {
    hobs.push_back({std::string("profile_") + kAxis[a], [a](const Observables& o, std::span<const std::int64_t> ev) {
                      std::vector<double> h(static_cast<std::size_t>(o.dims[a]), 0.0);
                      for (std::int64_t e : ev) {
                        const auto p = o.profile_of(a, e);
                        for (std::size_t k = 0; k < h.size(); ++k) h[k] += p[k];
                      }
                      return h;
                    }});
  }
  return hobs;
}

}  // namespace

SeparationTable separation_powers(const Observables& ref, const Observables& gen, std::span<const EventBin> bins,
                                  const SeparationOptions& options) {
  MPIGAN_CHECK_SHAPE(ref.dims == gen.dims, "separation_powers: reference extents {} but generated {}", ref.dims,
                     gen.dims);
  MPIGAN_CHECK(options.bins >= 1 && options.floor_splits >= 1,
               "separation_powers: bins {} and floor_splits {} must be >= 1", options.bins, options.floor_splits);
  const std::vector<ScalarObservable> sref = scalar_observables(ref, options.per_layer);
  const std::vector<ScalarObservable> sgen = scalar_observables(gen, options.per_layer);
  MPIGAN_CHECK(sref.size() == sgen.size(),
               "separation_powers: reference has {} scalar observables, generated {} (measured angle in one only?)",
               sref.size(), sgen.size());

  MPIGAN_CHECK(ref.options.spectrum.bins() == gen.options.spectrum.bins() &&
                   ref.options.spectrum.lo_gev == gen.options.spectrum.lo_gev,
               "separation_powers: spectrum binnings differ (reference {} bins from {} GeV, generated {} from {} GeV)",
               ref.options.spectrum.bins(), ref.options.spectrum.lo_gev, gen.options.spectrum.bins(),
               gen.options.spectrum.lo_gev);
  const std::vector<HistogramObservable> hobs =
      options.histogram_observables ? histogram_observables() : std::vector<HistogramObservable>{};

  const std::size_t per_bin = sref.size() + hobs.size();
  SeparationTable table;
  table.rows.resize(bins.size() * per_bin);
  const int threads = options.threads > 0 ? options.threads : omp_get_max_threads();
  for (std::size_t b = 0; b < bins.size(); ++b) {
    const std::vector<std::int64_t> er = select_bin(ref, bins[b]);
    const std::vector<std::int64_t> eg = select_bin(gen, bins[b]);
    const auto n_ref = static_cast<std::int64_t>(er.size()), n_gen = static_cast<std::int64_t>(eg.size());
    std::vector<std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>> splits;
    if (n_ref >= 4 && n_gen >= 1) {
      for (int k = 0; k < kHistogramSplitFactor * options.floor_splits; ++k) {
        splits.push_back(split_halves(er, options.seed + 7919u * static_cast<std::uint64_t>(k)));
      }
    }
    const bool usable = n_ref >= 2 && n_gen >= 1;
    const std::size_t used_splits = std::min(splits.size(), static_cast<std::size_t>(options.floor_splits));
#pragma omp parallel for num_threads(threads) schedule(dynamic, 4)
    for (std::size_t j = 0; j < per_bin; ++j) {
      SeparationRow& row = table.rows[b * per_bin + j];
      row.bin = bins[b].label;
      row.n_ref = n_ref;
      row.n_gen = n_gen;
      std::vector<double> floors;
      if (j < sref.size()) {
        row.observable = sref[j].name;
        if (usable) row.s = scalar_separation(gather(sref[j], er), gather(sgen[j], eg), options);
        for (std::size_t k = 0; k < used_splits; ++k) {
          const auto& [h1, h2] = splits[k];
          floors.push_back(scalar_separation(gather(sref[j], h1), gather(sref[j], h2), options) *
                           floor_scale(n_ref, n_gen, h1.size(), h2.size()));
        }
      } else {
        const HistogramObservable& h = hobs[j - sref.size()];
        row.observable = h.name;
        if (usable) row.s = separation_power(h.sum(ref, er), h.sum(gen, eg));
        for (const auto& [h1, h2] : splits) {
          floors.push_back(separation_power(h.sum(ref, h1), h.sum(ref, h2)) *
                           floor_scale(n_ref, n_gen, h1.size(), h2.size()));
        }
      }
      set_floor(row, floors);
    }
  }
  return table;
}

}  // namespace mpigan::physics
