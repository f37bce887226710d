// The angle measured from a shower image: GANutils.measPython / the AngleGAN `ecal_angle` Lambda,
// which makes the `mtheta` label of the variable-angle files (svalleco/3Dgan, Anglegan branch).
//
// Coordinates are cell indices + 0.5 (x, y, z = depth). With the energy-weighted barycentre
// (x_ref, y_ref, z_ref) and, per non-empty depth layer z, the layer barycentre (x_mid, y_mid):
//   m(z)     = (y_mid - y_ref) / sqrt((x_mid - x_ref)^2 + (z - z_ref)^2), negated for z < z_ref
//   angle(z) = pi/2 - atan(m(z))
//   result   = sum_z angle(z) * z / sum_z z        over non-empty layers
// and 100 for an empty image. The beam axis is y: a shower that drifts to larger y with depth gives
// an angle below pi/2. Cells are in any units (the measure is scale-invariant).
#pragma once

#include "mpigan/core/shape.hpp"

#include <span>

namespace mpigan::data {

/// Value returned for an image without energy (as the reference does).
inline constexpr double kEmptyImageAngle = 100.0;

/// Measured angle (radians) of one image of extents @p dims = (x, y, depth), row-major.
double measure_angle(std::span<const float> cells, const Dims3& dims);

}  // namespace mpigan::data
