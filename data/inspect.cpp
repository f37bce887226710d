// Full validation and summary of one data file (see inspect.hpp).
#include "mpigan/data/inspect.hpp"

#include "mpigan/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

namespace mpigan::data {

FileSummary inspect_file(const std::string& path, std::int64_t max_events) {
  const auto f = EventFile::open(path, std::nullopt, "");
  FileSummary s;
  s.path = path;
  s.geometry = f->geometry();
  s.events = f->events();
  s.energy_source = f->energy_source();
  s.direct_chunks = f->direct_chunks();
  s.events_per_chunk = f->events_per_chunk();
  for (const auto& name : f->file().names()) {
    try {
      s.datasets.push_back(f->file().info(name));
    } catch (const DataError&) {
      // A group or a named type rather than a dataset: list it without shape.
      h5::DatasetInfo info;
      info.name = name + " (not a dataset)";
      s.datasets.push_back(info);
    }
  }
  const auto& e = f->energy();
  s.energy = {"energy", *std::min_element(e.begin(), e.end()), *std::max_element(e.begin(), e.end())};
  for (const char* key : {keys::theta, keys::mtheta, keys::eta}) {
    if (!f->file().has(key)) continue;
    // Re-open with the angle key: validates its shape, length and finiteness.
    const auto fa = EventFile::open(path, s.geometry, key);
    const auto& a = fa->angle();
    s.angles.push_back({key, *std::min_element(a.begin(), a.end()), *std::max_element(a.begin(), a.end())});
  }

  const std::int64_t n = max_events > 0 ? std::min(max_events, s.events) : s.events;
  std::vector<float> cells(static_cast<std::size_t>(f->cells()));
  std::vector<double> ratios;
  std::int64_t nonzero = 0;
  s.sum_min = std::numeric_limits<double>::infinity();
  s.sum_max = -s.sum_min;
  for (std::int64_t i = 0; i < n; ++i) {
    f->read_event(i, cells);  // throws on a damaged chunk or a non-finite cell
    double sum = 0;
    for (float c : cells) {
      sum += c;
      nonzero += c > 0.0f;
      s.max_cell = std::max(s.max_cell, static_cast<double>(c));
    }
    s.sum_min = std::min(s.sum_min, sum);
    s.sum_max = std::max(s.sum_max, sum);
    ratios.push_back(sum / e[static_cast<std::size_t>(i)]);
  }
  s.units = guess_units(ratios);
  s.nonzero_fraction = n > 0 ? static_cast<double>(nonzero) / static_cast<double>(n * f->cells()) : 0.0;
  return s;
}

std::string format_summary(const FileSummary& s) {
  std::string out =
      fmt::format("{}\n  events      {}\n  geometry    {} (file (N, x, y, depth) -> tensor (N, 1, D, H, W))\n", s.path,
                  s.events, to_string(s.geometry));
  out += "  datasets\n";
  for (const auto& d : s.datasets) {
    if (d.dims.empty() && d.type.size == 0) {
      out += fmt::format("    {}\n", d.name);
      continue;
    }
    std::string storage =
        d.chunk.empty() ? "contiguous" : "chunks " + h5::DatasetInfo{d.name, d.chunk, {}, {}, {}, -1}.shape_string();
    if (d.deflate_level >= 0) storage += fmt::format(", gzip {}", d.deflate_level);
    out += fmt::format("    {:<8} {:<18} {:<8} {}\n", d.name, d.shape_string(), d.type.name(), storage);
  }
  out += fmt::format("  energy      {:.4g} .. {:.4g} GeV (from '{}')\n", s.energy.min, s.energy.max, s.energy_source);
  for (const auto& a : s.angles) {
    if (a.name == keys::eta) {
      out += fmt::format("  {:<11} {:.4g} .. {:.4g}\n", a.name, a.min, a.max);
    } else {
      out += fmt::format("  {:<11} {:.4g} .. {:.4g} rad ({:.2f} .. {:.2f} deg)\n", a.name, a.min, a.max,
                         a.min * 180.0 / std::numbers::pi, a.max * 180.0 / std::numbers::pi);
    }
  }
  out += fmt::format("  ECAL sum    {:.4g} .. {:.4g} (file units); max cell {:.4g}; cells > 0: {:.2f} %\n", s.sum_min,
                     s.sum_max, s.max_cell, 100.0 * s.nonzero_fraction);
  out += fmt::format("  units       {}\n", s.units.explain());
  out += fmt::format("  reads       {}\n",
                     s.direct_chunks ? "direct chunk reads (one event per chunk)"
                                     : fmt::format("hyperslab reads ({} events per chunk)", s.events_per_chunk));
  out +=
      "  valid       yes (labels finite, energies > 0; every scanned cell finite, >= 0 and within its event's "
      "energy)\n";
  return out;
}

}  // namespace mpigan::data
