// The generator as a product: a trained generator written as an ONNX model, for ONNX Runtime in a
// simulation framework (docs/deployment.md has the contract).
//
// The model takes what the reference 3DGAN takes, in physical units, and does the rest itself:
//   inputs   latent (N, noise)  z ~ N(0, 1), one row per shower (the model puts it on the sphere
//                               of radius sqrt(noise) when the generator was trained so)
//            energy (N, 1)      the primary's energy, GeV
//            theta  (N, 1)      the polar angle, radians (the angle model only)
//   output   energies (N, X, Y, Z)  cell energies, GeV (the inverse of the training's preprocessing:
//                               negatives clamped to 0, the inverse power, 1 / xscale, units), or
//            image (N, 1, X, Y, Z)  the generator's raw output (OnnxExportOptions::physical false).
// The generator runs in inference mode: BatchNorm with its running statistics (ONNX
// BatchNormalization), UpSampling3D as a nearest Resize, convolutions with their explicit pads.
// The model is checked with ONNX's own checker before it is written. The batch dimension is free.
#pragma once

#include "mpigan/train/generate.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace mpigan::deploy {

struct OnnxExportOptions {
  /// Cell energies in GeV (the inverse preprocessing in the graph); false: the raw generator output.
  bool physical = true;
  /// The engine that computes the test vectors' outputs: cpu (oneDNN) or reference.
  std::string backend = "cpu";
};

struct OnnxExportSummary {
  std::int64_t nodes = 0;       ///< ONNX operators in the graph
  std::int64_t parameters = 0;  ///< floats held as initialisers (weights and BatchNorm statistics)
  std::uintmax_t bytes = 0;     ///< the file's size
  int opset = 0;
  /// Each input and output as "name (shape) meaning", in order.
  std::vector<std::string> inputs, outputs;
};

/// Writes the generator of @p m to @p path (written aside, then renamed). Throws Error naming the
/// layer when the generator holds one that has no ONNX form, or ONNX's checker's complaint.
OnnxExportSummary export_onnx(const train::TrainedModel& m, const std::string& path, const OnnxExportOptions& o = {});

/// Test vectors for an exported generator: @p events showers' conditions (energies log-uniform in
/// 10..500 GeV; angles uniform in 60..120 degrees for the angle model) and latent noise from
/// @p seed, and what mpigan's own engine generates for exactly those inputs (GanStep::generate_from,
/// then the inverse preprocessing when @p o.physical), as JSON:
///   {"model": ..., "inputs": {NAME: {"shape": [...], "data": [...]}}, "outputs": {NAME: {...}}}
/// tests/onnx/check_onnx.mjs runs the ONNX file on the inputs in ONNX Runtime and compares.
void write_vectors(const train::TrainedModel& m, const std::string& path, std::int64_t events, std::uint64_t seed,
                   const OnnxExportOptions& o = {});

/// Whether this build can export (it was built with Debian's libonnx-dev or another ONNX library).
bool onnx_available();

}  // namespace mpigan::deploy
