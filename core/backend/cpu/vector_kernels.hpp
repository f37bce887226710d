// Element-wise kernels of the CPU backend that the compiler vectorises, compiled for several ISAs
// (function multi-versioning: AVX-512, AVX2, baseline) and picked at run time, so the portable
// binary still uses the wide units of the machine it runs on (oneDNN does its own dispatch).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mpigan::cpu {

/// y[i] = x[i] * (u_i >= rate ? scale : 0) for i in [begin, end), u_i the i-th uniform of Philox
/// stream (seed, stream) exactly as philox_word()/u32_to_unit_float() define it. y may alias x.
void dropout_range(const float* x, float* y, std::size_t begin, std::size_t end, float rate, float scale,
                   std::uint64_t seed, std::uint64_t stream);

}  // namespace mpigan::cpu
