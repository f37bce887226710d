// Philox4x32-10 and the Rng built on it: words, uniform/normal/gamma draws, checkpointable state.
#include "mpigan/core/rng.hpp"

#include "mpigan/core/error.hpp"

#include <cmath>
#include <numbers>
#include <string_view>

namespace mpigan {

std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> ctr, std::array<std::uint32_t, 2> key) {
  // Constants from Random123 (Philox4x32: multipliers and Weyl key increments).
  constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = std::uint64_t{kM0} * ctr[0];
    const std::uint64_t p1 = std::uint64_t{kM1} * ctr[2];
    const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
    key[0] += kW0;
    key[1] += kW1;
  }
  return ctr;
}

namespace {
std::array<std::uint32_t, 4> block_for(std::uint64_t seed, std::uint64_t stream, std::uint64_t block) {
  return philox4x32({static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32),
                     static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)},
                    {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
}
}  // namespace

std::uint32_t philox_word(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  return block_for(seed, stream, index / 4)[index % 4];
}

Rng::Rng(std::uint64_t seed, std::uint64_t stream) {
  m_state = {seed, stream, 0};
}
Rng::Rng(const State& state) : m_state(state) {}

void Rng::refill() {
  m_block_id = m_state.position / 4;
  m_block = block_for(m_state.seed, m_state.stream, m_block_id);
}

std::uint32_t Rng::next_u32() {
  if (m_state.position / 4 != m_block_id) refill();
  return m_block[m_state.position++ % 4];
}

std::uint64_t Rng::next_u64() {
  const std::uint64_t hi = next_u32();
  return (hi << 32) | next_u32();
}

float Rng::uniform() {
  return u32_to_unit_float(next_u32());
}

double Rng::uniform_double() {
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

double Rng::normal_double() {
  // Box-Muller; 1 - u keeps the log argument in (0, 1].
  const double u1 = 1.0 - uniform_double();
  const double u2 = uniform_double();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

float Rng::normal() {
  return static_cast<float>(normal_double());
}

std::uint64_t Rng::below(std::uint64_t n) {
  MPIGAN_CHECK(n > 0, "Rng::below(0)");
  // Lemire's nearly divisionless method would be faster; rejection keeps it exact and simple.
  const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n);
  std::uint64_t x;
  do x = next_u64();
  while (x >= limit);
  return x % n;
}

double Rng::gamma(double shape) {
  MPIGAN_CHECK(shape > 0.0, "Rng::gamma: shape must be > 0, got {}", shape);
  if (shape < 1.0) {
    // Boost: Gamma(a) = Gamma(a + 1) * U^(1/a).
    const double u = 1.0 - uniform_double();
    return gamma(shape + 1.0) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = normal_double();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = 1.0 - uniform_double();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

void Rng::fill_uniform(std::span<float> out, float lo, float hi) {
  for (float& x : out) x = uniform(lo, hi);
}

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::uint64_t hash_string(std::string_view s) {
  std::uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a, then mixed
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return mix64(h);
}

}  // namespace mpigan
