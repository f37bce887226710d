// Controlled distortions of showers (see distortions.hpp).
#include "mpigan/physics/distortions.hpp"

#include "mpigan/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace mpigan::physics {
namespace {

std::int64_t event_count(std::span<const float> cells, const Dims3& dims) {
  const std::int64_t per = dims.product();
  MPIGAN_CHECK_SHAPE(per > 0 && static_cast<std::int64_t>(cells.size()) % per == 0,
                     "distortion: {} cells is not a whole number of showers of {}", cells.size(), dims);
  return static_cast<std::int64_t>(cells.size()) / per;
}

// Rebins one line of n cells (stride apart) scaled by f about centre c (see scale_width).
void rebin_line(float* line, std::int64_t n, std::int64_t stride, double c, double f, std::vector<double>& out) {
  out.assign(static_cast<std::size_t>(n), 0.0);
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = line[i * stride];
    if (v == 0.0) continue;
    const double a = c + f * (static_cast<double>(i) - c), b = a + f;
    const auto t0 = std::max<std::int64_t>(0, static_cast<std::int64_t>(std::floor(a)));
    const auto t1 = std::min<std::int64_t>(n - 1, static_cast<std::int64_t>(std::ceil(b)) - 1);
    for (std::int64_t t = t0; t <= t1; ++t) {
      const double overlap = std::min(b, static_cast<double>(t + 1)) - std::max(a, static_cast<double>(t));
      if (overlap > 0) out[static_cast<std::size_t>(t)] += v * overlap / f;
    }
  }
  for (std::int64_t i = 0; i < n; ++i) line[i * stride] = static_cast<float>(out[static_cast<std::size_t>(i)]);
}

}  // namespace

void scale_energy(std::span<float> cells, double factor) {
  MPIGAN_CHECK(factor > 0, "scale_energy: factor {} must be > 0", factor);
  for (float& c : cells) c = static_cast<float>(c * factor);
}

void scale_response_spread(std::span<float> cells, const Dims3& dims, std::span<const float> energy_gev,
                           std::span<const std::int64_t> group, double factor) {
  MPIGAN_CHECK(factor > 0, "scale_response_spread: factor {} must be > 0", factor);
  const std::int64_t n = event_count(cells, dims), per = dims.product();
  MPIGAN_CHECK_SHAPE(static_cast<std::int64_t>(energy_gev.size()) == n && static_cast<std::int64_t>(group.size()) == n,
                     "scale_response_spread: {} showers, {} energies, {} groups", n, energy_gev.size(), group.size());
  std::vector<double> response(static_cast<std::size_t>(n));
  std::int64_t groups = 0;
  for (std::int64_t e = 0; e < n; ++e) {
    const auto k = static_cast<std::size_t>(e);
    MPIGAN_CHECK(group[k] >= 0 && energy_gev[k] > 0, "scale_response_spread: event {} has group {} and Ep {} GeV", e,
                 group[k], energy_gev[k]);
    const auto first = cells.begin() + e * per;
    response[k] = std::accumulate(first, first + per, 0.0) / energy_gev[k];
    groups = std::max(groups, group[k] + 1);
  }
  std::vector<double> sum(static_cast<std::size_t>(groups), 0.0), count(static_cast<std::size_t>(groups), 0.0);
  for (std::int64_t e = 0; e < n; ++e) {
    const auto g = static_cast<std::size_t>(group[static_cast<std::size_t>(e)]);
    sum[g] += response[static_cast<std::size_t>(e)];
    count[g] += 1;
  }
  for (std::int64_t e = 0; e < n; ++e) {
    const double r = response[static_cast<std::size_t>(e)];
    if (!(r > 0)) continue;
    const auto g = static_cast<std::size_t>(group[static_cast<std::size_t>(e)]);
    const double m = sum[g] / count[g];
    const double scale = std::max(0.0, m + factor * (r - m)) / r;
    for (float& c : cells.subspan(static_cast<std::size_t>(e * per), static_cast<std::size_t>(per)))
      c = static_cast<float>(c * scale);
  }
}

void shift_depth(std::span<float> cells, const Dims3& dims, double layers) {
  MPIGAN_CHECK(layers >= 0, "shift_depth: {} layers must be >= 0", layers);
  const std::int64_t n = event_count(cells, dims), Z = dims.w;
  const auto k = static_cast<std::int64_t>(std::floor(layers));
  const double f = layers - static_cast<double>(k);
  std::vector<double> src(static_cast<std::size_t>(Z));
  for (std::int64_t r = 0; r < n * dims.d * dims.h; ++r) {
    float* row = cells.data() + r * Z;
    std::copy(row, row + Z, src.begin());
    auto at = [&](std::int64_t z) { return z >= 0 && z < Z ? src[static_cast<std::size_t>(z)] : 0.0; };
    for (std::int64_t z = 0; z < Z; ++z) row[z] = static_cast<float>((1.0 - f) * at(z - k) + f * at(z - k - 1));
  }
}

void scale_width(std::span<float> cells, const Dims3& dims, double factor) {
  MPIGAN_CHECK(factor > 0, "scale_width: factor {} must be > 0", factor);
  const std::int64_t n = event_count(cells, dims), X = dims.d, Y = dims.h, Z = dims.w;
  std::vector<double> out;
  for (std::int64_t e = 0; e < n; ++e) {
    float* ev = cells.data() + e * dims.product();
    double total = 0, sx = 0, sy = 0;
    for (std::int64_t x = 0; x < X; ++x) {
      for (std::int64_t y = 0; y < Y; ++y) {
        for (std::int64_t z = 0; z < Z; ++z) {
          const double c = ev[(x * Y + y) * Z + z];
          total += c;
          sx += (static_cast<double>(x) + 0.5) * c;
          sy += (static_cast<double>(y) + 0.5) * c;
        }
      }
    }
    if (!(total > 0)) continue;
    const double cx = sx / total, cy = sy / total;
    for (std::int64_t y = 0; y < Y; ++y) {
      for (std::int64_t z = 0; z < Z; ++z) rebin_line(ev + y * Z + z, X, Y * Z, cx, factor, out);
    }
    for (std::int64_t x = 0; x < X; ++x) {
      for (std::int64_t z = 0; z < Z; ++z) rebin_line(ev + x * Y * Z + z, Y, Z, cy, factor, out);
    }
  }
}

std::vector<std::int64_t> drop_highest_energy(std::span<const float> energy_gev, double fraction) {
  MPIGAN_CHECK(fraction >= 0 && fraction <= 1, "drop_highest_energy: fraction {} must be in [0, 1]", fraction);
  const auto n = static_cast<std::int64_t>(energy_gev.size());
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return energy_gev[static_cast<std::size_t>(a)] < energy_gev[static_cast<std::size_t>(b)];
  });
  const auto drop = static_cast<std::int64_t>(std::llround(fraction * static_cast<double>(n)));
  order.resize(static_cast<std::size_t>(n - drop));
  std::sort(order.begin(), order.end());
  return order;
}

}  // namespace mpigan::physics
