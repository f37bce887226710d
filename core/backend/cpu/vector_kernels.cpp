#include "mpigan/core/backend/cpu/vector_kernels.hpp"

#include "mpigan/core/rng.hpp"

namespace mpigan::cpu {

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define MPIGAN_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MPIGAN_MULTIVERSION
#endif

namespace {
// 16 Philox4x32-10 blocks side by side (structure of arrays), so that each round is a loop the
// compiler turns into vector instructions (vpmuludq for the 32x32->64 products).
constexpr int kLanes = 16;

inline void philox_lanes(std::uint64_t first_block, std::uint64_t seed, std::uint64_t stream,
                         std::uint32_t out[4][kLanes]) {
  constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  std::uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    const std::uint64_t b = first_block + static_cast<std::uint64_t>(l);
    c0[l] = static_cast<std::uint32_t>(b);
    c1[l] = static_cast<std::uint32_t>(b >> 32);
    c2[l] = static_cast<std::uint32_t>(stream);
    c3[l] = static_cast<std::uint32_t>(stream >> 32);
  }
  std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
#pragma GCC ivdep
    for (int l = 0; l < kLanes; ++l) {
      const std::uint64_t p0 = std::uint64_t{kM0} * c0[l];
      const std::uint64_t p1 = std::uint64_t{kM1} * c2[l];
      const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
      const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
      const std::uint32_t n0 = hi1 ^ c1[l] ^ k0, n2 = hi0 ^ c3[l] ^ k1;
      c0[l] = n0;
      c1[l] = lo1;
      c2[l] = n2;
      c3[l] = lo0;
    }
    k0 += kW0;
    k1 += kW1;
  }
  for (int l = 0; l < kLanes; ++l) {
    out[0][l] = c0[l];
    out[1][l] = c1[l];
    out[2][l] = c2[l];
    out[3][l] = c3[l];
  }
}
}  // namespace

MPIGAN_MULTIVERSION
void dropout_range(const float* x, float* y, std::size_t begin, std::size_t end, float rate, float scale,
                   std::uint64_t seed, std::uint64_t stream) {
  constexpr std::size_t kGroup = 4 * kLanes;  // elements per 16 blocks
  auto one = [&](std::size_t i) {
    y[i] = u32_to_unit_float(philox_word(seed, stream, i)) >= rate ? x[i] * scale : 0.0f;
  };
  std::size_t i = begin;
  for (; i < end && i % kGroup != 0; ++i) one(i);
  std::uint32_t w[4][kLanes];
  for (; i + kGroup <= end; i += kGroup) {
    philox_lanes(i / 4, seed, stream, w);
    // Element i + 4l + k takes word k of block (i/4 + l).
    for (int k = 0; k < 4; ++k)
#pragma GCC ivdep
      for (int l = 0; l < kLanes; ++l) {
        const std::size_t e = i + 4 * static_cast<std::size_t>(l) + static_cast<std::size_t>(k);
        y[e] = u32_to_unit_float(w[k][l]) >= rate ? x[e] * scale : 0.0f;
      }
  }
  for (; i < end; ++i) one(i);
}

}  // namespace mpigan::cpu
