// Keras weight initialisers (init.hpp), drawn on the host from an Rng and copied to the backend.
#include "mpigan/nn/init.hpp"

#include "mpigan/core/error.hpp"

#include <cmath>

namespace mpigan::nn {

void initialize_tensor(Backend& backend, Tensor& t, const ParamSpec& spec, Rng& rng) {
  Tensor host = Tensor::empty(t.shape());
  auto v = host.values();
  const double fan_in = static_cast<double>(spec.fan_in), fan_out = static_cast<double>(spec.fan_out);
  switch (spec.init) {
    case Init::zeros:
      host.fill(0.0f);
      break;
    case Init::ones:
      host.fill(1.0f);
      break;
    case Init::glorot_uniform: {
      MPIGAN_CHECK(fan_in + fan_out > 0, "glorot_uniform for '{}' needs fans", spec.name);
      const float limit = static_cast<float>(std::sqrt(6.0 / (fan_in + fan_out)));
      rng.fill_uniform(v, -limit, limit);
      break;
    }
    case Init::he_uniform: {
      MPIGAN_CHECK(fan_in > 0, "he_uniform for '{}' needs fan_in", spec.name);
      const float limit = static_cast<float>(std::sqrt(6.0 / fan_in));
      rng.fill_uniform(v, -limit, limit);
      break;
    }
    case Init::glorot_normal: {
      MPIGAN_CHECK(fan_in + fan_out > 0, "glorot_normal for '{}' needs fans", spec.name);
      // 0.8796... = stddev of a unit normal truncated at +-2, so the result has variance 2/(in+out).
      const double s = std::sqrt(2.0 / (fan_in + fan_out)) / 0.87962566103423978;
      for (float& x : v) {
        double z;
        do z = rng.normal_double();
        while (std::abs(z) > 2.0);
        x = static_cast<float>(s * z);
      }
      break;
    }
  }
  if (spec.init_scale != 1.0f)
    for (float& x : v) x *= spec.init_scale;
  backend.from_host(host, t);
}

}  // namespace mpigan::nn
