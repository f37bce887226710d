// Per-event shower observables in one pass over the cells (see observables.hpp): scan_event
// reads an event's cells once, store_event derives its features. Sums are in double: a 500 GeV
// shower has 15625 to 65025 cells spanning 1e-13 to 10 GeV.
#include "mpigan/physics/observables.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/data/angle_measure.hpp"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace mpigan::physics {
namespace {

// The spectrum bin of a cell energy: a first guess from the float's exponent and mantissa
// (log2 x ~ e + m, off by at most 0.086, i.e. 0.13 bins at 5 bins per decade), corrected against
// the exact edges, so the result equals the bin a log10 would give at a fraction of the cost.
class SpectrumIndexer {
 public:
  explicit SpectrumIndexer(const SpectrumBinning& b) : m_inner(b.decades * b.bins_per_decade) {
    m_edges.resize(static_cast<std::size_t>(m_inner) + 2);
    for (int k = 0; k <= m_inner + 1; ++k) m_edges[static_cast<std::size_t>(k)] = b.edge(k);
    m_scale = std::log10(2.0) * b.bins_per_decade;
    m_offset = -std::log10(b.lo_gev) * b.bins_per_decade + 1.0;
  }
  int operator()(double c) const {
    if (c < m_edges[1]) return 0;
    if (c >= m_edges[static_cast<std::size_t>(m_inner) + 1]) return m_inner + 1;
    const auto bits = std::bit_cast<std::uint32_t>(static_cast<float>(c));
    const double log2 = static_cast<double>(static_cast<int>((bits >> 23) & 0xFFu) - 127) +
                        static_cast<double>(bits & 0x7FFFFFu) * (1.0 / 8388608.0);
    int k = static_cast<int>(std::floor(log2 * m_scale + m_offset));
    k = std::clamp(k, 1, m_inner);
    while (k < m_inner && c >= m_edges[static_cast<std::size_t>(k) + 1]) ++k;
    while (k > 1 && c < m_edges[static_cast<std::size_t>(k)]) --k;
    return k;
  }

 private:
  int m_inner;
  std::vector<double> m_edges;  // m_edges[k] = lower edge of bin k
  double m_scale = 0, m_offset = 0;
};

// Per-thread accumulators of one event.
struct Scratch {
  explicit Scratch(const Dims3& d)
      : px(static_cast<std::size_t>(d.d)),
        py(static_cast<std::size_t>(d.h)),
        pz(static_cast<std::size_t>(d.w)),
        lx(pz),
        lx2(pz),
        ly(pz),
        ly2(pz),
        rowx(pz),
        count(static_cast<std::size_t>(d.w)) {}
  std::vector<double> px, py, pz, lx, lx2, ly, ly2, rowx;
  std::vector<std::int64_t> count;
};

template <class T>
void resize_all(std::array<std::vector<T>, 3>& a, std::size_t n) {
  for (auto& v : a) v.assign(n, T{});
}

}  // namespace

double SpectrumBinning::hi_gev() const {
  return lo_gev * std::pow(10.0, decades);
}

double SpectrumBinning::edge(int k) const {
  if (k <= 0) return 0.0;
  return lo_gev * std::pow(10.0, static_cast<double>(k - 1) / bins_per_decade);
}

int SpectrumBinning::bin_of(double gev) const {
  const int inner = decades * bins_per_decade;
  if (gev < lo_gev) return 0;
  if (gev >= edge(inner + 1)) return inner + 1;
  int k = std::clamp(static_cast<int>(std::floor(std::log10(gev / lo_gev) * bins_per_decade)) + 1, 1, inner);
  while (k < inner && gev >= edge(k + 1)) ++k;
  while (k > 1 && gev < edge(k)) --k;
  return k;
}

std::span<const float> Observables::profile_of(int axis, std::int64_t event) const {
  const auto n = static_cast<std::size_t>(dims[axis]);
  return {profile[static_cast<std::size_t>(axis)].data() + static_cast<std::size_t>(event) * n, n};
}

std::span<const std::uint32_t> Observables::spectrum_of(std::int64_t event) const {
  const auto b = static_cast<std::size_t>(options.spectrum.bins());
  return {spectrum.data() + static_cast<std::size_t>(event) * b, b};
}

namespace {

/// Checks the inputs of compute_observables and sizes every per-event array of its result.
Observables allocate_observables(std::span<const float> cells, const Dims3& dims, std::span<const float> energy_gev,
                                 std::span<const float> angle_rad, const ObservableOptions& options) {
  const std::int64_t n = static_cast<std::int64_t>(energy_gev.size());
  MPIGAN_CHECK_SHAPE(dims.d > 0 && dims.h > 0 && dims.w > 0, "compute_observables: extents {} must be positive", dims);
  MPIGAN_CHECK_SHAPE(static_cast<std::int64_t>(cells.size()) == n * dims.product(),
                     "compute_observables: {} cells for {} events of {} (expected {})", cells.size(), n, dims,
                     n * dims.product());
  MPIGAN_CHECK_SHAPE(angle_rad.empty() || static_cast<std::int64_t>(angle_rad.size()) == n,
                     "compute_observables: {} angles for {} events", angle_rad.size(), n);
  MPIGAN_CHECK(options.cell_scale > 0, "compute_observables: cell_scale {} must be > 0", options.cell_scale);
  MPIGAN_CHECK(options.spectrum.lo_gev > 0 && options.spectrum.decades > 0 && options.spectrum.bins_per_decade > 0,
               "compute_observables: spectrum binning lo {} GeV, {} decades, {} bins per decade must be positive",
               options.spectrum.lo_gev, options.spectrum.decades, options.spectrum.bins_per_decade);
  for (std::int64_t e = 0; e < n; ++e) {
    MPIGAN_CHECK(std::isfinite(energy_gev[static_cast<std::size_t>(e)]) && energy_gev[static_cast<std::size_t>(e)] > 0,
                 "compute_observables: event {}: primary energy {} GeV, expected finite and > 0", e,
                 energy_gev[static_cast<std::size_t>(e)]);
  }
  Observables o;
  o.dims = dims;
  o.events = n;
  o.options = options;
  const auto N = static_cast<std::size_t>(n);
  o.energy.assign(energy_gev.begin(), energy_gev.end());
  o.angle.assign(angle_rad.begin(), angle_rad.end());
  o.ecal_sum.assign(N, 0.0);
  o.sampling_fraction.assign(N, 0.0);
  resize_all(o.m1, N);
  resize_all(o.m2, N);
  resize_all(o.max_pos, N);
  o.hits.assign(N, 0.0);
  o.sparsity.assign(N, 0.0);
  resize_all(o.thirds, N);
  if (options.measure_angle) o.measured_angle.assign(N, 0.0);
  for (int a = 0; a < 3; ++a) o.profile[static_cast<std::size_t>(a)].assign(N * static_cast<std::size_t>(dims[a]), 0.f);
  for (auto* v : {&o.centre_x, &o.centre_y, &o.width_x, &o.width_y, &o.layer_sparsity}) {
    v->assign(N * static_cast<std::size_t>(dims.w), 0.f);
  }
  o.spectrum.assign(N * static_cast<std::size_t>(options.spectrum.bins()), 0u);
  return o;
}

/// What one pass over an event's cells finds besides the sums it leaves in Scratch.
struct EventScan {
  std::int64_t hottest = 0;  ///< flat index of the largest cell
  std::int64_t hits = 0;     ///< cells above the hit threshold
};

/// The one pass over event @p ev (file units, x-major, depth fastest): the profiles along x, y
/// and z and the per-layer first and second transverse moments into @p s, the cell spectrum into
/// @p spec. For each (x, y) row of Z cells two short loops run while the row is in L1: the first
/// only adds (it vectorises), the second does what branches.
EventScan scan_event(const float* ev, const Dims3& dims, const ObservableOptions& options,
                     const SpectrumIndexer& indexer, Scratch& s, std::uint32_t* spec) {
  const std::int64_t X = dims.d, Y = dims.h, Z = dims.w;
  const double scale = options.cell_scale;
  const double hit_thr = options.hit_threshold_gev, sparse_thr = options.sparsity_threshold_gev;
  const double hx = static_cast<double>(X - 1) / 2.0, hy = static_cast<double>(Y - 1) / 2.0;
  for (auto* v : {&s.px, &s.py, &s.pz, &s.lx, &s.lx2, &s.ly, &s.ly2}) std::fill(v->begin(), v->end(), 0.0);
  std::fill(s.count.begin(), s.count.end(), 0);
  float best = -std::numeric_limits<float>::infinity();
  EventScan r;
  double* const rowx = s.rowx.data();
  double* const ly = s.ly.data();
  double* const ly2 = s.ly2.data();
  std::int64_t* const count = s.count.data();
  for (std::int64_t x = 0; x < X; ++x) {
    std::fill(s.rowx.begin(), s.rowx.end(), 0.0);
    double sx = 0;
    for (std::int64_t y = 0; y < Y; ++y) {
      const float* row = ev + (x * Y + y) * Z;
      const double yc = static_cast<double>(y) - hy;
      double sy = 0;
      for (std::int64_t z = 0; z < Z; ++z) {  // sums only: vectorises
        const double c = static_cast<double>(row[z]) * scale;
        sy += c;
        rowx[z] += c;
        ly[z] += yc * c;
        ly2[z] += yc * yc * c;
      }
      for (std::int64_t z = 0; z < Z; ++z) {  // branches
        const float v = row[z];
        if (v > best) {
          best = v;
          r.hottest = (x * Y + y) * Z + z;
        }
        if (!(v > 0.f)) continue;
        const double c = static_cast<double>(v) * scale;
        r.hits += c > hit_thr;
        count[z] += c > sparse_thr;
        ++spec[indexer(c)];
      }
      s.py[static_cast<std::size_t>(y)] += sy;
      sx += sy;
    }
    s.px[static_cast<std::size_t>(x)] = sx;
    const double xc = static_cast<double>(x) - hx;
    for (std::int64_t z = 0; z < Z; ++z) {
      s.pz[static_cast<std::size_t>(z)] += rowx[z];
      s.lx[static_cast<std::size_t>(z)] += xc * rowx[z];
      s.lx2[static_cast<std::size_t>(z)] += xc * xc * rowx[z];
    }
  }
  return r;
}

/// Event @p E's features in @p o from its scan: the energy sum and sampling fraction, the
/// profiles and their moments, the hottest cell's position, hits, sparsities, the energy in each
/// third of the depth and the per-layer centres and widths. Returns the energy sum.
double store_event(Observables& o, std::size_t E, const Scratch& s, const EventScan& scan) {
  const Dims3& dims = o.dims;
  const std::int64_t Y = dims.h, Z = dims.w;
  double total = 0;
  for (double v : s.px) total += v;
  o.ecal_sum[E] = total;
  o.sampling_fraction[E] = total / static_cast<double>(o.energy[E]);
  const std::array<const std::vector<double>*, 3> prof = {&s.px, &s.py, &s.pz};
  for (std::size_t a = 0; a < 3; ++a) {
    const std::vector<double>& p = *prof[a];
    float* dst = o.profile[a].data() + E * p.size();
    double m1 = 0, m2 = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
      dst[i] = static_cast<float>(p[i]);
      m1 += static_cast<double>(i) * p[i];
    }
    if (total > 0) {
      m1 /= total;
      for (std::size_t i = 0; i < p.size(); ++i)
        m2 += (static_cast<double>(i) - m1) * (static_cast<double>(i) - m1) * p[i];
      m2 /= total;
    } else {
      m1 = 0;
    }
    o.m1[a][E] = m1;
    o.m2[a][E] = m2;
  }
  o.max_pos[0][E] = static_cast<double>(scan.hottest / (Y * Z));
  o.max_pos[1][E] = static_cast<double>((scan.hottest / Z) % Y);
  o.max_pos[2][E] = static_cast<double>(scan.hottest % Z);
  o.hits[E] = static_cast<double>(scan.hits);
  std::int64_t above = 0;
  for (std::int64_t z = 0; z < Z; ++z) above += s.count[static_cast<std::size_t>(z)];
  o.sparsity[E] = 1.0 - static_cast<double>(above) / static_cast<double>(dims.product());
  for (std::int64_t k = 0; k < 3; ++k) {
    double t = 0;
    for (std::int64_t z = k * Z / 3; z < (k + 1) * Z / 3; ++z) t += s.pz[static_cast<std::size_t>(z)];
    o.thirds[static_cast<std::size_t>(k)][E] = total > 0 ? t / total : 0.0;
  }
  for (std::int64_t z = 0; z < Z; ++z) {
    const auto zi = static_cast<std::size_t>(z);
    const std::size_t k = E * static_cast<std::size_t>(Z) + zi;
    const double ez = s.pz[zi];
    if (ez > 0) {
      const double cx = s.lx[zi] / ez, cy = s.ly[zi] / ez;
      o.centre_x[k] = static_cast<float>(cx);
      o.centre_y[k] = static_cast<float>(cy);
      o.width_x[k] = static_cast<float>(std::sqrt(std::max(0.0, s.lx2[zi] / ez - cx * cx)));
      o.width_y[k] = static_cast<float>(std::sqrt(std::max(0.0, s.ly2[zi] / ez - cy * cy)));
    }
    o.layer_sparsity[k] =
        static_cast<float>(1.0 - static_cast<double>(s.count[zi]) / static_cast<double>(dims.d * dims.h));
  }
  return total;
}

}  // namespace

Observables compute_observables(std::span<const float> cells, const Dims3& dims, std::span<const float> energy_gev,
                                std::span<const float> angle_rad, const ObservableOptions& options) {
  Observables o = allocate_observables(cells, dims, energy_gev, angle_rad, options);
  const std::int64_t n = o.events, XYZ = dims.product();
  const int bins = options.spectrum.bins();
  const SpectrumIndexer indexer(options.spectrum);
  const int threads = options.threads > 0 ? options.threads : omp_get_max_threads();
  // A non-finite cell (a diverged generator) makes its event's sum non-finite; the first such event
  // is reported after the parallel region (exceptions must not leave an OpenMP region).
  std::int64_t first_bad = n;

#pragma omp parallel num_threads(threads)
  {
    Scratch s(dims);
#pragma omp for schedule(dynamic, 8)
    for (std::int64_t e = 0; e < n; ++e) {
      const float* ev = cells.data() + e * XYZ;
      const EventScan scan = scan_event(ev, dims, options, indexer, s, o.spectrum.data() + e * bins);
      const double total = store_event(o, static_cast<std::size_t>(e), s, scan);
      if (!std::isfinite(total)) {
#pragma omp critical(mpigan_physics_bad_event)
        first_bad = std::min(first_bad, e);
      }
      if (options.measure_angle) {
        o.measured_angle[static_cast<std::size_t>(e)] = data::measure_angle({ev, static_cast<std::size_t>(XYZ)}, dims);
      }
    }
  }
  if (first_bad < n) {
    MPIGAN_THROW(NumericError, "compute_observables: event {} of {} has non-finite cells (sum {})", first_bad, n,
                 o.ecal_sum[static_cast<std::size_t>(first_bad)]);
  }
  return o;
}

Observables select_events(const Observables& o, std::span<const std::int64_t> indices) {
  Observables r;
  r.dims = o.dims;
  r.options = o.options;
  r.events = static_cast<std::int64_t>(indices.size());
  for (std::int64_t i : indices) {
    MPIGAN_CHECK(i >= 0 && i < o.events, "select_events: event {} out of range [0, {})", i, o.events);
  }
  auto pick = [&](const auto& src, auto& dst, std::size_t width) {
    dst.resize(indices.size() * width);
    if (src.empty()) {
      dst.clear();
      return;
    }
    for (std::size_t j = 0; j < indices.size(); ++j) {
      const auto from = static_cast<std::size_t>(indices[j]) * width;
      std::copy(src.begin() + static_cast<std::ptrdiff_t>(from),
                src.begin() + static_cast<std::ptrdiff_t>(from + width),
                dst.begin() + static_cast<std::ptrdiff_t>(j * width));
    }
  };
  const auto Z = static_cast<std::size_t>(o.dims.w);
  for (auto [src, dst] : {std::pair{&o.energy, &r.energy},
                          {&o.angle, &r.angle},
                          {&o.ecal_sum, &r.ecal_sum},
                          {&o.sampling_fraction, &r.sampling_fraction},
                          {&o.hits, &r.hits},
                          {&o.sparsity, &r.sparsity},
                          {&o.measured_angle, &r.measured_angle}}) {
    pick(*src, *dst, 1);
  }
  for (std::size_t a = 0; a < 3; ++a) {
    pick(o.m1[a], r.m1[a], 1);
    pick(o.m2[a], r.m2[a], 1);
    pick(o.max_pos[a], r.max_pos[a], 1);
    pick(o.thirds[a], r.thirds[a], 1);
    pick(o.profile[a], r.profile[a], static_cast<std::size_t>(o.dims[static_cast<int>(a)]));
  }
  for (auto [src, dst] : {std::pair{&o.centre_x, &r.centre_x},
                          {&o.centre_y, &r.centre_y},
                          {&o.width_x, &r.width_x},
                          {&o.width_y, &r.width_y},
                          {&o.layer_sparsity, &r.layer_sparsity}}) {
    pick(*src, *dst, Z);
  }
  pick(o.spectrum, r.spectrum, static_cast<std::size_t>(o.options.spectrum.bins()));
  return r;
}

std::vector<ScalarObservable> scalar_observables(const Observables& o, bool per_layer) {
  std::vector<ScalarObservable> v;
  auto add = [&](std::string name, std::string unit, const std::vector<double>& d) {
    v.push_back({std::move(name), std::move(unit), d.data(), nullptr, 1});
  };
  static constexpr const char* kAxis[3] = {"x", "y", "z"};
  add("primary_energy", "GeV", o.energy);
  add("ecal_sum", "GeV", o.ecal_sum);
  add("sampling_fraction", "", o.sampling_fraction);
  for (int a = 0; a < 3; ++a) add(std::string("m1_") + kAxis[a], "cells", o.m1[static_cast<std::size_t>(a)]);
  for (int a = 0; a < 3; ++a) add(std::string("m2_") + kAxis[a], "cells^2", o.m2[static_cast<std::size_t>(a)]);
  for (int a = 0; a < 3; ++a) add(std::string("max_") + kAxis[a], "cells", o.max_pos[static_cast<std::size_t>(a)]);
  add("hits", "", o.hits);
  add("sparsity", "", o.sparsity);
  for (int k = 0; k < 3; ++k) add("third_" + std::to_string(k + 1), "", o.thirds[static_cast<std::size_t>(k)]);
  if (!o.measured_angle.empty()) add("measured_angle", "rad", o.measured_angle);
  if (per_layer) {
    const std::int64_t Z = o.dims.w;
    for (std::int64_t z = 0; z < Z; ++z) {
      const std::string l = "[" + std::to_string(z) + "]";
      v.push_back({"layer_energy" + l, "GeV", nullptr, o.profile[2].data() + z, Z});
      v.push_back({"centre_x" + l, "cells", nullptr, o.centre_x.data() + z, Z});
      v.push_back({"centre_y" + l, "cells", nullptr, o.centre_y.data() + z, Z});
      v.push_back({"width_x" + l, "cells", nullptr, o.width_x.data() + z, Z});
      v.push_back({"width_y" + l, "cells", nullptr, o.width_y.data() + z, Z});
      v.push_back({"sparsity" + l, "", nullptr, o.layer_sparsity.data() + z, Z});
    }
  }
  return v;
}

}  // namespace mpigan::physics
