// Philox4x32-10 as a __host__ __device__ function: a bit-identical port of mpigan::philox4x32
// (core/rng.cpp) for the dropout kernel, so the CUDA backend draws exactly the masks the
// reference and cpu backends draw for the same (seed, stream).
//
// Invariants (checked on the host against core/rng.cpp by tests/unit/core/test_cuda_backend.cpp):
//  - philox_block(seed, stream, b) == mpigan::philox4x32({b lo, b hi, stream lo, stream hi},
//    {seed lo, seed hi}); word i of a stream is philox_block(seed, stream, i / 4)[i % 4], which
//    is mpigan::philox_word(seed, stream, i).
//  - unit_float(x) == mpigan::u32_to_unit_float(x): 24 bits scaled by 2^-24, exact in float.
// Only integer arithmetic and one exact float scaling, so host and device agree bit for bit.
// Plain C++ when not compiled by nvcc (the tests include it).
#pragma once

#include <cstdint>

// MPIGAN_HD marks the functions shared by the kernels and the host-side tests.
#ifndef MPIGAN_HD
#if defined(__CUDACC__)
#define MPIGAN_HD __host__ __device__ __forceinline__
#else
#define MPIGAN_HD inline
#endif
#endif

namespace mpigan::cuda {

struct PhiloxWords {
  std::uint32_t v[4];
};

/// Ten Philox rounds on (counter, key); constants from Random123, as in core/rng.cpp.
MPIGAN_HD PhiloxWords philox4x32_10(PhiloxWords ctr, std::uint32_t key0, std::uint32_t key1) {
  constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(kM0) * ctr.v[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kM1) * ctr.v[2];
    const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    const PhiloxWords next{{hi1 ^ ctr.v[1] ^ key0, lo1, hi0 ^ ctr.v[3] ^ key1, lo0}};
    ctr = next;
    key0 += kW0;
    key1 += kW1;
  }
  return ctr;
}

/// The 4 words of block @p block of stream (seed, stream) (core/rng.cpp block_for()).
MPIGAN_HD PhiloxWords philox_block(std::uint64_t seed, std::uint64_t stream, std::uint64_t block) {
  const PhiloxWords ctr{{static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32),
                         static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)}};
  return philox4x32_10(ctr, static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
}

/// Uniform float in [0, 1) from the top 24 bits (mpigan::u32_to_unit_float).
MPIGAN_HD float unit_float(std::uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}

}  // namespace mpigan::cuda
