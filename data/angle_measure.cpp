// measPython in C++ (see angle_measure.hpp).
#include "mpigan/data/angle_measure.hpp"

#include "mpigan/core/error.hpp"

#include <cmath>
#include <numbers>
#include <vector>

namespace mpigan::data {

double measure_angle(std::span<const float> cells, const Dims3& dims) {
  const std::int64_t nx = dims.d, ny = dims.h, nz = dims.w;
  MPIGAN_CHECK(static_cast<std::int64_t>(cells.size()) == dims.product(), "measure_angle: {} cells for extents {}",
               cells.size(), dims);
  // Per-layer sums and first moments in x and y; totals for the global barycentre.
  std::vector<double> sz(static_cast<std::size_t>(nz), 0.0), sxz(sz), syz(sz);
  for (std::int64_t x = 0; x < nx; ++x) {
    for (std::int64_t y = 0; y < ny; ++y) {
      const float* row = cells.data() + (x * ny + y) * nz;
      for (std::int64_t z = 0; z < nz; ++z) {
        const double v = row[z];
        sz[static_cast<std::size_t>(z)] += v;
        sxz[static_cast<std::size_t>(z)] += v * (static_cast<double>(x) + 0.5);
        syz[static_cast<std::size_t>(z)] += v * (static_cast<double>(y) + 0.5);
      }
    }
  }
  double total = 0, xr = 0, yr = 0, zr = 0;
  for (std::int64_t z = 0; z < nz; ++z) {
    const auto k = static_cast<std::size_t>(z);
    total += sz[k];
    xr += sxz[k];
    yr += syz[k];
    zr += sz[k] * (static_cast<double>(z) + 0.5);
  }
  if (!(total > 0.0)) return kEmptyImageAngle;
  xr /= total;
  yr /= total;
  zr /= total;
  double num = 0, den = 0;
  for (std::int64_t z = 0; z < nz; ++z) {
    const auto k = static_cast<std::size_t>(z);
    if (!(sz[k] > 0.0)) continue;
    const double zc = static_cast<double>(z) + 0.5;
    const double xm = sxz[k] / sz[k], ym = syz[k] / sz[k];
    const double proj = std::sqrt((xm - xr) * (xm - xr) + (zc - zr) * (zc - zr));
    const double dy = ym - yr;
    // numpy gives +-inf for dy/0 (atan -> +-pi/2) and nan for 0/0; take 0 (a vertical step) there.
    double m = proj > 0.0 ? dy / proj : (dy == 0.0 ? 0.0 : std::copysign(HUGE_VAL, dy));
    if (zc < zr) m = -m;
    num += (std::numbers::pi / 2.0 - std::atan(m)) * zc;
    den += zc;
  }
  return num / den;
}

}  // namespace mpigan::data
