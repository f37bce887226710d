// The 3DGAN calorimeter file layouts: geometries, dataset keys, units, and the one place where the
// file's axis order is mapped to the tensor layout.
//
// Axis mapping (the only one in mpigan):
//   file  ECAL (N, x, y, depth)   row-major, as written by the LCD converter (h5py)
//   tensor     (N, 1, D=x, H=y, W=depth)  canonical NCDHW float32
// i.e. no transposition: a channel dimension of size 1 is inserted, and the bytes of one event are
// the same in both. For the variable-angle set the beam axis is y (H): a polar angle theta != 90
// degrees tilts the shower along H as depth (W) grows.
//
// Units of the ECAL cells:
//   gev      raw deposited energy in GeV; sum(ECAL)/E ~ 0.02 (the sampling fraction). The fixed-angle
//            EleEscan files.
//   gev_x50  GeV x 50 (the converter's "Geant is in units of 1/50 GeV"); sum(ECAL)/E ~ 1. The
//            variable-angle files.
// Energies (`energy`, `target[:,1]`) are always GeV; angles (`theta`, `mtheta`) radians.
#pragma once

#include "mpigan/core/shape.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mpigan::data {

/// (25,25,25) fixed angle; (51,51,25) variable angle; (5,5,5) the fixed-angle ECAL read out coarser:
/// each cell the sum of 5x5 pads over 5 layers of the 25^3 window (the coarse Monte Carlo is exactly
/// the rebinned fine one), the calorimeter rung that trains to convergence on a few CPU cores.
enum class Geometry { ecal25, ecal51, ecal5 };
enum class Units { automatic, gev, gev_x50 };  ///< how ECAL cells in a file are expressed

/// Dataset names used by the real files.
namespace keys {
inline constexpr const char* ecal = "ECAL";
inline constexpr const char* energy = "energy";  ///< (N,) GeV
inline constexpr const char* target = "target";  ///< (N,2) old fixed-angle layout, energy in column 1
inline constexpr const char* theta = "theta";    ///< (N,) true polar angle, radians
inline constexpr const char* mtheta = "mtheta";  ///< (N,) angle measured from the image (measPython), radians
inline constexpr const char* eta = "eta";        ///< (N,) pseudorapidity -ln tan(theta/2)
inline constexpr const char* sum = "sum";        ///< (N,) sum of ECAL in file units
}  // namespace keys

/// GeV x 50: the scale of the variable-angle files.
inline constexpr double kX50 = 50.0;

/// Spatial extents (x, y, depth) = (D, H, W) of a geometry.
Dims3 geometry_dims(Geometry g);
/// "25x25x25" / "51x51x25" / "5x5x5".
const char* to_string(Geometry g);
/// Accepts "25x25x25", "ecal25", "51x51x25", "ecal51", "5x5x5", "ecal5"; throws ConfigError naming the
/// allowed values.
Geometry parse_geometry(std::string_view s);
/// The fine geometry a coarse one is read out from (ecal5 -> ecal25), and the merge factors per axis;
/// a fine geometry is its own parent with factors 1.
Geometry fine_geometry(Geometry g);
Dims3 merge_factors(Geometry g);
/// Sums the cells of one fine shower (fine_geometry(g)'s extents, x-major, depth fastest) into
/// @p coarse (geometry_dims(g).product() floats, same order); in double, then rounded once.
void rebin_shower(Geometry g, const float* fine, float* coarse);
/// The geometry whose (x, y, depth) equal dims[1..3] of a rank-4 ECAL shape, if any.
std::optional<Geometry> geometry_from_ecal_dims(const std::vector<std::int64_t>& dims);

/// "auto" / "gev" / "gev_x50".
const char* to_string(Units u);
/// Accepts "auto", "automatic", "gev", "gev_x50", "x50"; throws ConfigError otherwise.
Units parse_units(std::string_view s);
/// Factor that converts cells in @p from units into @p to units (both explicit).
double unit_factor(Units from, Units to);

/// Decision of the unit detector from the median of sum(ECAL)/E over some events.
struct UnitsGuess {
  std::optional<Units> units;  ///< empty: the ratio fits neither convention
  double median_ratio = 0;
  std::int64_t events = 0;
  std::string explain() const;  ///< "median sum(ECAL)/E = 0.0203 over 32 events -> gev"
};
/// gev when the ratio is in [0.002, 0.14), gev_x50 in [0.14, 10): 0.14 is the geometric mean of the
/// two expected values 0.02 and 1, so a factor-7 miscalibration still decides correctly.
UnitsGuess guess_units(std::vector<double> ratios);

}  // namespace mpigan::data
