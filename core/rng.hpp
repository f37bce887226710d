// Seeded random numbers: Philox4x32-10 (Salmon et al., SC'11), a counter-based generator.
//
// Why counter-based: the state is three integers (seed, stream, position), so it checkpoints
// exactly; independent streams (per rank, per layer, per purpose) come from the stream id; and the
// i-th number of a stream can be computed directly, so element-wise masks (dropout) come out the
// same whatever the thread count or device.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace mpigan {

/// One Philox4x32-10 block: 4 random 32-bit words for (counter, key).
std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> counter, std::array<std::uint32_t, 2> key);

/// Uniform float in [0, 1) from 24 random bits.
inline float u32_to_unit_float(std::uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}

/// The dropout uniform of element @p i: the 16-bit half (low half for even i) of Philox word i / 2,
/// scaled to [0, 1). Two elements per word halve the generator's work; the keep probability is
/// then exact to 2^-16.
inline float dropout_uniform(std::uint32_t word_of_i_half, std::uint64_t i) {
  const std::uint32_t h = (i & 1) ? word_of_i_half >> 16 : word_of_i_half & 0xFFFFu;
  return static_cast<float>(h) * (1.0f / 65536.0f);
}

/// The @p index-th 32-bit word of stream (seed, stream): what Rng(seed, stream) would return as its
/// index-th next_u32(). For element-wise parallel generation.
std::uint32_t philox_word(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);

class Rng {
 public:
  /// Checkpointable state.
  struct State {
    std::uint64_t seed = 0;
    std::uint64_t stream = 0;
    std::uint64_t position = 0;  ///< 32-bit words drawn so far
  };

  explicit Rng(std::uint64_t seed = 0, std::uint64_t stream = 0);
  explicit Rng(const State& state);

  std::uint32_t next_u32();
  std::uint64_t next_u64();
  /// Uniform in [0, 1).
  float uniform();
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  /// Uniform in [0, 1) with 53 bits.
  double uniform_double();
  /// Standard normal (Box-Muller on two uniforms; both draws consumed, no cached spare).
  float normal();
  double normal_double();
  /// Uniform integer in [0, n).
  std::uint64_t below(std::uint64_t n);
  /// Gamma(shape, 1) variate (Marsaglia-Tsang), shape > 0.
  double gamma(double shape);

  void fill_uniform(std::span<float> out, float lo, float hi);

  /// A generator on another stream of the same seed (independent of this one).
  Rng split(std::uint64_t stream) const { return Rng(m_state.seed, stream); }

  const State& state() const { return m_state; }

 private:
  void refill();
  State m_state;
  std::array<std::uint32_t, 4> m_block{};
  std::uint64_t m_block_id = ~std::uint64_t{0};
};

/// A 64-bit mix (splitmix64 finaliser), for deriving stream ids from names and numbers.
std::uint64_t mix64(std::uint64_t x);
std::uint64_t hash_string(std::string_view s);

}  // namespace mpigan
