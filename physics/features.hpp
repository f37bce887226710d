// The high-level feature vector of a shower, the input of FPD and KPD: CaloChallenge's
// prepare_high_data_for_classifier (log10 E_inc, log10(E_layer + 1e-8), centres and widths per
// layer) adapted to a Cartesian X x Y x Z window and made relative to the primary energy.
//
// Features of one event (d = 2 + 5 Z = 127 for Z = 25; + Z with sparsity), in this order:
//   log10 Ep, log10 SF = log10(E / Ep),
//   per layer z: log10((E_z + eps) / Ep), centre_x(z), centre_y(z), width_x(z), width_y(z)
//   [, sparsity(z) when FeatureOptions::sparsity]
// with eps = 1e-8 GeV (CaloChallenge adds 1e-8 to its layer energies, in MeV there), centres and
// widths in cells relative to the window centre (observables.hpp).
//
// Why relative to Ep: FPD standardises each feature by its spread in the reference. In a sample
// pooled over primary energies the spread of log10 E_z is mostly the spread of the beam energies
// (0.3 to 0.5 decades), which would make a 3 % energy-scale error a 0.03 sigma shift per layer;
// log10(E_z / Ep) and log10 SF spread by the shower's own fluctuations, so the same error is a
// several-times larger shift, and log10 SF carries the calorimeter response directly. The
// information is the same (log10 E_z = log10(E_z/Ep) + log10 Ep). log10 Ep stays in the vector:
// a conditional generator must reproduce the joint distribution of (Ep, shower). Sparsity is off
// by default, as in CaloChallenge's feature vector: it counts cells above 1e-6 GeV in the far
// tails, which no generator reproduces and which would dominate a standardised distance.
//
// Scaling, fitted on the reference and applied to both samples (never refitted on the generated
// one, which would hide a shifted or rescaled generator):
//   standardise  (x - mean_ref) / std_ref      the default: distances in units of the reference's
//                                              own spread, whatever each feature's unit
//   max_abs      x / max|x_ref|                JetNet's _normalise_features (published FPD/KPD)
//   none
// A feature with zero spread (or max 0) in the reference keeps scale 1, as JetNet does.
#pragma once

#include "mpigan/physics/observables.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace mpigan::physics {

/// Row-major rows x cols doubles: row = event, column = feature.
struct FeatureMatrix {
  std::int64_t rows = 0, cols = 0;
  std::vector<double> values;
  std::vector<std::string> names;  ///< one per column
  double at(std::int64_t r, std::int64_t c) const { return values[static_cast<std::size_t>(r * cols + c)]; }
};

struct FeatureOptions {
  bool primary_energy = true;  ///< include log10 Ep
  bool sparsity = false;       ///< include the per-layer sparsity
  double log_epsilon_gev = 1e-8;
};

/// The feature vectors of every event of @p o (see the header comment).
FeatureMatrix high_level_features(const Observables& o, const FeatureOptions& options = {});

enum class FeatureScaling { standardise, max_abs, none };
const char* to_string(FeatureScaling s);

/// x -> (x - offset) / scale per column.
struct FeatureScaler {
  std::vector<double> offset, scale;
  /// Fitted on @p ref with @p how (see the header comment).
  static FeatureScaler fit(const FeatureMatrix& ref, FeatureScaling how);
  /// Scales @p m in place; throws ShapeError when its columns differ from the fitted ones.
  void apply(FeatureMatrix& m) const;
};

}  // namespace mpigan::physics
