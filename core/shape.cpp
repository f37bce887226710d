// Shape and Dims3 arithmetic and printing (shape.hpp).
#include "mpigan/core/shape.hpp"

#include "mpigan/core/error.hpp"

#include <algorithm>

namespace mpigan {

std::string Dims3::to_string() const {
  return fmt::format("({},{},{})", d, h, w);
}

Shape::Shape(std::initializer_list<std::int64_t> dims) {
  MPIGAN_CHECK_SHAPE(dims.size() <= kMaxRank, "a shape has at most {} dimensions, got {}", kMaxRank, dims.size());
  m_rank = static_cast<int>(dims.size());
  std::copy(dims.begin(), dims.end(), m_dims.begin());
  for (int i = 0; i < m_rank; ++i) {
    MPIGAN_CHECK_SHAPE(m_dims[i] >= 0, "shape dimension {} is negative ({})", i, m_dims[i]);
  }
}

std::int64_t Shape::operator[](int i) const {
  MPIGAN_CHECK_SHAPE(i >= 0 && i < m_rank, "dimension {} out of range for shape {}", i, to_string());
  return m_dims[i];
}

std::int64_t& Shape::operator[](int i) {
  MPIGAN_CHECK_SHAPE(i >= 0 && i < m_rank, "dimension {} out of range for shape {}", i, to_string());
  return m_dims[i];
}

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < m_rank; ++i) n *= m_dims[i];
  return n;
}

std::int64_t Shape::item_numel() const {
  MPIGAN_CHECK_SHAPE(m_rank >= 1, "item_numel of a rank-0 shape");
  std::int64_t n = 1;
  for (int i = 1; i < m_rank; ++i) n *= m_dims[i];
  return n;
}

Dims3 Shape::spatial() const {
  MPIGAN_CHECK_SHAPE(m_rank == 5, "spatial dims need an NCDHW shape, got {}", to_string());
  return {m_dims[2], m_dims[3], m_dims[4]};
}

Shape Shape::with_dim(int i, std::int64_t v) const {
  Shape s = *this;
  s[i] = v;
  return s;
}

Shape Shape::batch_of(std::int64_t n, const Shape& item) {
  MPIGAN_CHECK_SHAPE(item.rank() < kMaxRank, "batch_of: item shape {} leaves no room for a batch dim",
                     item.to_string());
  Shape s;
  s.m_rank = item.rank() + 1;
  s.m_dims[0] = n;
  std::copy(item.begin(), item.end(), s.m_dims.begin() + 1);
  return s;
}

bool operator==(const Shape& a, const Shape& b) {
  return a.m_rank == b.m_rank && std::equal(a.begin(), a.end(), b.begin());
}

bool operator<(const Shape& a, const Shape& b) {
  if (a.m_rank != b.m_rank) return a.m_rank < b.m_rank;
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
}

std::string Shape::to_string() const {
  std::string s = "(";
  for (int i = 0; i < m_rank; ++i) s += (i ? "," : "") + std::to_string(m_dims[i]);
  return s + ")";
}

}  // namespace mpigan
