// Preprocessing of calorimeter images as the 3DGAN reference code does it, and its inverse for
// generated showers (svalleco/3Dgan: EcalEnergyGan and AngleGAN data loading).
//
// Forward, per event, in this order:
//   1. unit conversion: file units -> the model's units (model_units; gev for the fixed-angle
//      model, gev_x50 for the angle model)
//   2. cells < threshold -> 0        (fixed model: 1e-6 GeV; angle model: 0, i.e. negatives only)
//   3. cells *= xscale               (fixed model: 100; angle model: 1)
//   4. ecal = sum of cells            (the ECAL-sum regression target, before the power)
//   5. event dropped if ecal <= min_ecal_sum (angle model: 10, in GeV x 50; 0 = keep all) — the
//      Dataset applies this when it indexes events, counts and logs every drop
//   6. cells = cells^power            (angle model: 0.85)
//   energy target = E * energy_scale (E/100), angle target = radians from angle_key.
// The reference fixed model thresholds before scaling (GetData) and the angle model scales first
// (GetDataAngle); with xscale = 1 in the angle model the two orders agree, so one order serves both.
//
// Inverse (generated -> file units): cells^(1/power) / xscale, then model units -> file units.
#pragma once

#include "mpigan/core/tensor.hpp"
#include "mpigan/data/layout.hpp"

#include <span>
#include <string>

namespace mpigan::data {

struct Preprocess {
  Units model_units = Units::gev;    ///< units the model's numbers refer to (threshold, min_ecal_sum)
  float threshold = 1e-6f;           ///< cells below -> 0, in model units before xscale
  float xscale = 100.0f;             ///< multiply cells after unit conversion and threshold
  float power = 1.0f;                ///< X <- X^power after computing the ECAL-sum target
  float energy_scale = 0.01f;        ///< energy target = E * energy_scale
  float min_ecal_sum = 0.0f;         ///< drop events with ecal <= this (after xscale); 0 keeps all
  std::string angle_key = "mtheta";  ///< angle label dataset for ecal51 ("mtheta" or "theta")

  /// "gev, threshold 1e-06, xscale 100, power 1, E*0.01, keep all"
  std::string describe() const;
};

/// Fixed-angle 25x25x25 model (EcalEnergyGan): model units GeV, threshold 1e-6, xscale 100.
Preprocess preprocess_3dgan();
/// Variable-angle 51x51x25 model (AngleGAN): model units GeV x 50, threshold 0, xscale 1,
/// power 0.85, drop ECAL sum <= 10, angle from `mtheta`.
Preprocess preprocess_anglegan();

/// Applies steps 1-4 in place to one event (cells in file units on input) and returns the ECAL sum
/// (accumulated in double). @p unit_factor converts file units into model units.
double preprocess_cells(std::span<float> cells, double unit_factor, const Preprocess& p);
/// Step 6 in place.
void apply_power(std::span<float> cells, float power);

/// Inverse for generated showers: (N,1,X,Y,Z) preprocessed -> the same shape in @p file_units
/// (a new tensor). Negative generator outputs are clamped to 0 before the inverse power; NaN and
/// inf pass through, so that a diverged generator is seen downstream (observables reject them).
Tensor postprocess_images(const Tensor& generated, const Preprocess& p, Units file_units);
/// Energy in GeV from the energy target.
inline float energy_from_target(float target, const Preprocess& p) {
  return target / p.energy_scale;
}

}  // namespace mpigan::data
