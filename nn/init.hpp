// Keras weight initialisers (TF 2 definitions):
//   glorot_uniform  U(-l, l), l = sqrt(6 / (fan_in + fan_out))
//   glorot_normal   truncated N(0, s) at 2s, s = sqrt(2 / (fan_in + fan_out)) / 0.87962566103423978
//   he_uniform      U(-l, l), l = sqrt(6 / fan_in)
//   zeros, ones
// Values are drawn on the host from the given Rng (so a seed fixes them on every backend) and
// copied to the backend.
#pragma once

#include "mpigan/core/backend.hpp"
#include "mpigan/core/rng.hpp"
#include "mpigan/nn/layer.hpp"

namespace mpigan::nn {

void initialize_tensor(Backend& backend, Tensor& t, const ParamSpec& spec, Rng& rng);

}  // namespace mpigan::nn
