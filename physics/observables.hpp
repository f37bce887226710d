// Shower observables per event: the 3DGAN set (its analysis code, svalleco/3Dgan) and the
// CaloChallenge per-layer high-level features (arXiv:2410.21611), for any geometry X x Y x Z.
//
// Conventions (docs/physics.md has the formulas and the reasons):
//  - A shower is X*Y*Z floats in the data layer's one axis order (data/layout.hpp): file ECAL
//    (x, y, depth) row-major, depth fastest; cell (x, y, z) is cells[(x*Y + y)*Z + z]. x = D, y = H
//    (the beam axis of tilted showers), z = W = depth (the calorimeter layer).
//  - Energies are GeV. Raw-GeV files (EleEscan, `mpigan simulate` 25^3) are used as they are; for
//    GeV x 50 files (RandomAngle, 51x51x25) pass cell_scale = 1/50 (data::unit_factor(units,
//    Units::gev)): every threshold below is in GeV, so the observables do not depend on the file.
//  - Coordinates of the 3DGAN moments are cell indices i = 0..N-1 (the reference's convention, no
//    +0.5). The per-layer centres are relative to the window centre, i - (N-1)/2, so that a centred
//    shower has centre 0 and an empty layer's centre (0, see below) is not an outlier.
//  - Empty shower (sum <= 0) or empty layer: every energy-weighted quantity (moments, thirds,
//    centres, widths) is 0, as CaloChallenge's nan_to_num gives; the reference 3DGAN code divides by
//    zero there. The maximum of an all-zero shower is cell (0,0,0) (numpy argmax).
//  - Negative cells (possible in unclipped generator output) enter the sums as they are; the cell
//    spectrum counts cells > 0 only.
//
// compute_observables() makes one pass over each shower's cells (OpenMP over events) and stores
// per-event scalars as doubles and per-event arrays (profiles, layer features, spectrum) in flat
// event-major vectors.
#pragma once

#include "mpigan/core/shape.hpp"

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mpigan::physics {

/// Log-spaced bins of cell energy: bin 0 = (0, lo), bins 1..B = [lo 10^(k/b), lo 10^((k+1)/b)),
/// bin B+1 = [hi, inf), with B = decades * b. Cells <= 0 are not counted.
struct SpectrumBinning {
  double lo_gev = 1e-7;
  int decades = 9;  ///< hi = lo 10^decades = 100 GeV
  int bins_per_decade = 5;
  int bins() const { return decades * bins_per_decade + 2; }
  double hi_gev() const;
  /// Lower edge of bin k (k = 1..B+1); edge(0) = 0.
  double edge(int k) const;
  /// The bin of a cell energy > 0 (exact against edge(), not an approximate logarithm).
  int bin_of(double gev) const;
};

struct ObservableOptions {
  double cell_scale = 1.0;               ///< cells x cell_scale = GeV (1/50 for GeV x 50 files)
  double hit_threshold_gev = 2e-4;       ///< hits: cells > this (the 3DGAN reference's 2e-4)
  double sparsity_threshold_gev = 1e-6;  ///< sparsity: 1 - fraction of cells > this
  SpectrumBinning spectrum;
  bool measure_angle = false;  ///< data::measure_angle (measPython) per event
  int threads = 0;             ///< OpenMP threads; 0 = the OpenMP default
};

/// Observables of N events. Per-event arrays are event-major: profile_x[e*X + i], layer_*[e*Z + z],
/// spectrum[e*bins + k]. Axis index a: 0 = x, 1 = y, 2 = z (depth).
struct Observables {
  Dims3 dims;
  std::int64_t events = 0;
  ObservableOptions options;

  std::vector<double> energy;                  ///< primary energy Ep, GeV
  std::vector<double> angle;                   ///< true (conditioning) angle, radians; empty if not given
  std::vector<double> ecal_sum;                ///< E = sum of cells, GeV
  std::vector<double> sampling_fraction;       ///< E / Ep
  std::array<std::vector<double>, 3> m1;       ///< sum_i i S_a(i) / E
  std::array<std::vector<double>, 3> m2;       ///< sum_i (i - m1)^2 S_a(i) / E
  std::array<std::vector<double>, 3> max_pos;  ///< index of the hottest cell along each axis
  std::vector<double> hits;                    ///< cells > hit_threshold_gev
  std::vector<double> sparsity;                ///< 1 - (cells > sparsity_threshold_gev) / (X Y Z)
  std::array<std::vector<double>, 3> thirds;   ///< E(z in third k) / E, thirds [kZ/3, (k+1)Z/3)
  std::vector<double> measured_angle;          ///< measPython, radians; empty unless measure_angle

  /// S_a(i) = sum over the other two axes, GeV; profile[2] is the layer energy E_z.
  std::array<std::vector<float>, 3> profile;
  std::vector<float> centre_x, centre_y;  ///< sum_xy (x - (X-1)/2) c / E_z, cell units
  std::vector<float> width_x, width_y;    ///< sqrt(sum (x - (X-1)/2)^2 c / E_z - centre^2)
  std::vector<float> layer_sparsity;      ///< 1 - (cells of layer z > threshold) / (X Y)
  std::vector<std::uint32_t> spectrum;    ///< per event, options.spectrum.bins() counts

  std::int64_t extent(int axis) const { return dims[axis]; }
  std::span<const float> profile_of(int axis, std::int64_t event) const;
  std::span<const std::uint32_t> spectrum_of(std::int64_t event) const;
};

/// Computes every observable of @p events = energy_gev.size() showers stored back to back in
/// @p cells (events * X*Y*Z floats, see the header comment for the order and units).
/// @p angle_rad: the true angle per event, or empty.
///
/// Formulas (E = sum of the shower's cells, S_a the profile along axis a, i = 0..N_a-1):
/// @f$ m_{1,a} = \sum_i i\,S_a(i)/E @f$, @f$ m_{2,a} = \sum_i (i - m_{1,a})^2 S_a(i)/E @f$,
/// @f$ \mathrm{SF} = E/E_p @f$, third_k = @f$ \sum_{z=\lfloor kZ/3\rfloor}^{\lfloor (k+1)Z/3\rfloor-1} S_z(z)/E @f$,
/// per layer @f$ c_x(z) = \sum_{x,y} (x - \tfrac{X-1}{2})\,c/E_z @f$,
/// @f$ w_x(z) = \sqrt{\max(0, \sum (x - \tfrac{X-1}{2})^2 c/E_z - c_x^2)} @f$.
/// Throws ShapeError on inconsistent sizes, Error on a non-positive Ep or cell_scale, NumericError
/// naming the first event with a non-finite cell (NaN or inf: a diverged generator).
Observables compute_observables(std::span<const float> cells, const Dims3& dims, std::span<const float> energy_gev,
                                std::span<const float> angle_rad = {}, const ObservableOptions& options = {});

/// The events @p indices of @p o, in that order (a bin, a half, a distorted sample with events
/// dropped).
Observables select_events(const Observables& o, std::span<const std::int64_t> indices);

/// One per-event scalar observable seen through a strided pointer (no copy): value(e) =
/// data[e * stride] (doubles or floats).
struct ScalarObservable {
  std::string name;  ///< "ecal_sum", "m1_x", "layer_energy[7]", ...
  std::string unit;  ///< "GeV", "cells", "" (dimensionless)
  const double* dptr = nullptr;
  const float* fptr = nullptr;
  std::int64_t stride = 1;
  double value(std::int64_t event) const {
    return dptr ? dptr[event * stride] : static_cast<double>(fptr[event * stride]);
  }
};

/// Every scalar observable of @p o, in a fixed order: primary_energy, ecal_sum, sampling_fraction,
/// m1_{x,y,z}, m2_{x,y,z}, max_{x,y,z}, hits, sparsity, third_{1,2,3}, (measured_angle), then when
/// @p per_layer for each layer z: layer_energy[z], centre_x[z], centre_y[z], width_x[z],
/// width_y[z], sparsity[z]. Views into @p o: valid while it lives.
std::vector<ScalarObservable> scalar_observables(const Observables& o, bool per_layer = true);

}  // namespace mpigan::physics
