// Preprocessing and its inverse (see preprocess.hpp).
#include "mpigan/data/preprocess.hpp"

#include "mpigan/core/error.hpp"

#include <cmath>

namespace mpigan::data {

std::string Preprocess::describe() const {
  return fmt::format(
      "model units {}, threshold {:g}, xscale {:g}, power {:g}, energy x{:g}, {}", to_string(model_units), threshold,
      xscale, power, energy_scale,
      min_ecal_sum > 0 ? fmt::format("drop ECAL sum <= {:g}", min_ecal_sum) : std::string("keep all events"));
}

Preprocess preprocess_3dgan() {
  Preprocess p;
  p.model_units = Units::gev;
  p.threshold = 1e-6f;
  p.xscale = 100.0f;
  p.power = 1.0f;
  p.energy_scale = 0.01f;
  p.min_ecal_sum = 0.0f;
  p.angle_key = "mtheta";
  return p;
}

Preprocess preprocess_anglegan() {
  Preprocess p;
  p.model_units = Units::gev_x50;
  p.threshold = 0.0f;
  p.xscale = 1.0f;
  p.power = 0.85f;
  p.energy_scale = 0.01f;
  p.min_ecal_sum = 10.0f;
  p.angle_key = "mtheta";
  return p;
}

double preprocess_cells(std::span<float> cells, double unit_factor, const Preprocess& p) {
  const auto factor = static_cast<float>(unit_factor);
  const float threshold = p.threshold;
  const float xscale = p.xscale;
  double sum = 0.0;
  // Four partial sums keep the loop vectorisable without -ffast-math and the result independent of
  // the vector width (the order is fixed).
  float partial[4] = {0, 0, 0, 0};
  const std::size_t n = cells.size();
  std::size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    for (std::size_t j = 0; j < 4; ++j) {
      float v = cells[k + j] * factor;
      v = v < threshold ? 0.0f : v * xscale;
      cells[k + j] = v;
      partial[j] += v;
    }
    if ((k & 1023) == 1020) {  // flush to double every 1024 cells: float partials stay accurate
      for (float& s : partial) {
        sum += s;
        s = 0;
      }
    }
  }
  for (; k < n; ++k) {
    float v = cells[k] * factor;
    v = v < threshold ? 0.0f : v * xscale;
    cells[k] = v;
    sum += v;
  }
  for (float s : partial) sum += s;
  return sum;
}

void apply_power(std::span<float> cells, float power) {
  if (power == 1.0f) return;
  for (float& v : cells) {
    if (v > 0.0f) v = std::pow(v, power);
  }
}

Tensor postprocess_images(const Tensor& generated, const Preprocess& p, Units file_units) {
  MPIGAN_CHECK_SHAPE(generated.shape().rank() == 5 && generated.shape()[1] == 1,
                     "postprocess_images: expected generated showers of shape (N,1,X,Y,Z), found {}",
                     generated.shape());
  MPIGAN_CHECK(file_units != Units::automatic, "postprocess_images: target units must be gev or gev_x50, not auto");
  Tensor out = generated.clone();
  const double to_file = unit_factor(p.model_units, file_units) / p.xscale;
  const float inv_power = 1.0f / p.power;
  for (float& v : out.values()) {
    float x = v > 0.0f || std::isnan(v) ? v : 0.0f;  // NaN passes: a diverged generator must show
    if (p.power != 1.0f && x > 0.0f) x = std::pow(x, inv_power);
    v = static_cast<float>(x * to_file);
  }
  return out;
}

}  // namespace mpigan::data
