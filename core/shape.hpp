// Shape of a tensor (rank 0..5) and 3-vectors of spatial sizes.
//
// Conventions used everywhere in the API (backends translate at their boundary):
//   activations  NCDHW   (N batch, C channels, D depth, H height, W width)
//   conv weights OIDHW   (O output channels, I input channels, KD, KH, KW)
//   dense weights OI
// For calorimeter images, D/H/W are the file's x, y and depth axes (data/ documents the mapping).
#pragma once

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace mpigan {

/// Three spatial extents in the order D, H, W.
struct Dims3 {
  std::int64_t d = 0, h = 0, w = 0;
  constexpr std::int64_t operator[](int i) const { return i == 0 ? d : (i == 1 ? h : w); }
  constexpr std::int64_t product() const { return d * h * w; }
  friend constexpr bool operator==(const Dims3&, const Dims3&) = default;
  std::string to_string() const;
};

class Shape {
 public:
  static constexpr int kMaxRank = 5;

  constexpr Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims);
  /// An NCDHW activation shape.
  static Shape ncdhw(std::int64_t n, std::int64_t c, const Dims3& s) { return {n, c, s.d, s.h, s.w}; }

  int rank() const { return m_rank; }
  std::int64_t operator[](int i) const;
  std::int64_t& operator[](int i);
  std::int64_t numel() const;
  /// Elements per item of the leading (batch) dimension.
  std::int64_t item_numel() const;
  /// Spatial dims of a rank-5 shape.
  Dims3 spatial() const;
  Shape with_dim(int i, std::int64_t v) const;
  /// (n, item...): a batch of @p n items of shape @p item.
  static Shape batch_of(std::int64_t n, const Shape& item);
  const std::int64_t* begin() const { return m_dims.data(); }
  const std::int64_t* end() const { return m_dims.data() + m_rank; }

  friend bool operator==(const Shape& a, const Shape& b);
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }
  friend bool operator<(const Shape& a, const Shape& b);
  /// "(16,8,25,25,25)"
  std::string to_string() const;

 private:
  std::array<std::int64_t, kMaxRank> m_dims{};
  int m_rank = 0;
};

}  // namespace mpigan

template <>
struct fmt::formatter<mpigan::Shape> : fmt::formatter<std::string> {
  auto format(const mpigan::Shape& s, format_context& ctx) const {
    return fmt::formatter<std::string>::format(s.to_string(), ctx);
  }
};
template <>
struct fmt::formatter<mpigan::Dims3> : fmt::formatter<std::string> {
  auto format(const mpigan::Dims3& s, format_context& ctx) const {
    return fmt::formatter<std::string>::format(s.to_string(), ctx);
  }
};
