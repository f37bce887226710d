// Geometry and unit names, parsing and detection (see layout.hpp).
#include "mpigan/data/layout.hpp"

#include "mpigan/core/error.hpp"

#include <algorithm>
#include <vector>

namespace mpigan::data {

Dims3 geometry_dims(Geometry g) {
  switch (g) {
    case Geometry::ecal25:
      return {25, 25, 25};
    case Geometry::ecal51:
      return {51, 51, 25};
    case Geometry::ecal5:
      return {5, 5, 5};
  }
  return {};
}

const char* to_string(Geometry g) {
  switch (g) {
    case Geometry::ecal25:
      return "25x25x25";
    case Geometry::ecal51:
      return "51x51x25";
    case Geometry::ecal5:
      return "5x5x5";
  }
  return "?";
}

Geometry parse_geometry(std::string_view s) {
  if (s == "25x25x25" || s == "ecal25") return Geometry::ecal25;
  if (s == "51x51x25" || s == "ecal51") return Geometry::ecal51;
  if (s == "5x5x5" || s == "ecal5") return Geometry::ecal5;
  MPIGAN_THROW(ConfigError, "geometry '{}' is not one of 25x25x25 (ecal25), 51x51x25 (ecal51), 5x5x5 (ecal5)", s);
}

Geometry fine_geometry(Geometry g) {
  return g == Geometry::ecal5 ? Geometry::ecal25 : g;
}

Dims3 merge_factors(Geometry g) {
  const Dims3 fine = geometry_dims(fine_geometry(g)), coarse = geometry_dims(g);
  return {fine.d / coarse.d, fine.h / coarse.h, fine.w / coarse.w};
}

void rebin_shower(Geometry g, const float* fine, float* coarse) {
  const Dims3 f = geometry_dims(fine_geometry(g)), c = geometry_dims(g), k = merge_factors(g);
  std::vector<double> acc(static_cast<std::size_t>(c.product()), 0.0);
  for (std::int64_t x = 0; x < f.d; ++x)
    for (std::int64_t y = 0; y < f.h; ++y) {
      const float* row = fine + (x * f.h + y) * f.w;
      double* out = acc.data() + ((x / k.d) * c.h + y / k.h) * c.w;
      for (std::int64_t z = 0; z < f.w; ++z) out[z / k.w] += row[z];
    }
  for (std::size_t i = 0; i < acc.size(); ++i) coarse[i] = static_cast<float>(acc[i]);
}

std::optional<Geometry> geometry_from_ecal_dims(const std::vector<std::int64_t>& dims) {
  if (dims.size() != 4) return std::nullopt;
  for (Geometry g : {Geometry::ecal25, Geometry::ecal51, Geometry::ecal5}) {
    const Dims3 d = geometry_dims(g);
    if (dims[1] == d.d && dims[2] == d.h && dims[3] == d.w) return g;
  }
  return std::nullopt;
}

const char* to_string(Units u) {
  switch (u) {
    case Units::automatic:
      return "auto";
    case Units::gev:
      return "gev";
    case Units::gev_x50:
      return "gev_x50";
  }
  return "?";
}

Units parse_units(std::string_view s) {
  if (s == "auto" || s == "automatic") return Units::automatic;
  if (s == "gev" || s == "GeV") return Units::gev;
  if (s == "gev_x50" || s == "x50" || s == "GeVx50") return Units::gev_x50;
  MPIGAN_THROW(ConfigError, "units '{}' is not one of auto, gev, gev_x50", s);
}

double unit_factor(Units from, Units to) {
  MPIGAN_CHECK(from != Units::automatic && to != Units::automatic,
               "unit_factor: units must be resolved (from {}, to {})", to_string(from), to_string(to));
  if (from == to) return 1.0;
  return from == Units::gev ? kX50 : 1.0 / kX50;
}

std::string UnitsGuess::explain() const {
  return fmt::format("median sum(ECAL)/E = {:.4g} over {} events -> {}", median_ratio, events,
                     units ? to_string(*units) : "neither gev (~0.02) nor gev_x50 (~1)");
}

UnitsGuess guess_units(std::vector<double> ratios) {
  UnitsGuess g;
  g.events = static_cast<std::int64_t>(ratios.size());
  if (ratios.empty()) return g;
  const auto mid = ratios.begin() + static_cast<std::ptrdiff_t>(ratios.size() / 2);
  std::nth_element(ratios.begin(), mid, ratios.end());
  g.median_ratio = *mid;
  if (g.median_ratio >= 0.002 && g.median_ratio < 0.14)
    g.units = Units::gev;
  else if (g.median_ratio >= 0.14 && g.median_ratio < 10.0)
    g.units = Units::gev_x50;
  return g;
}

}  // namespace mpigan::data
