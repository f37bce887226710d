// ParameterSet: one contiguous buffer holding many named tensors (the weights of a network, or
// their gradients, or BatchNorm running statistics). Layers hold views into it, so a push, a pull,
// a checkpoint, an allreduce or an optimizer step is one call on one buffer (style: llm.c
// ParameterTensors).
//
// Invariants: segments are laid out in the order added, each starting at a multiple of
// kAlignFloats; the gap floats between segments are zero and stay zero (every update rule maps
// zero gradients to zero change). Two sets built from the same sequence of add() calls have the
// same layout, so their flat buffers line up element for element.
#pragma once

#include "mpigan/core/backend.hpp"
#include "mpigan/core/tensor.hpp"

#include <optional>
#include <string>
#include <vector>

namespace mpigan {

class ParameterSet {
 public:
  static constexpr std::size_t kAlignFloats = 16;

  struct Segment {
    std::string name;
    Shape shape;
    std::size_t offset = 0;  ///< in floats
  };

  ParameterSet() = default;
  /// A set with the same segments as @p layout (not its values), allocated on @p backend, zeroed.
  static ParameterSet like(const ParameterSet& layout, Backend& backend);

  /// A set with the segments of @p layout over caller-owned host memory of layout.size() floats
  /// (no copy; the memory must outlive the set). Lets host code hand a received buffer to an
  /// optimizer as its gradient.
  static ParameterSet over(const ParameterSet& layout, float* host);

  /// Declare a segment; returns its index. Only before allocate().
  std::size_t add(std::string name, const Shape& shape);
  /// Allocate the buffer on @p backend and zero it.
  void allocate(Backend& backend);
  bool allocated() const { return m_storage != nullptr; }

  Tensor view(std::size_t index) const;
  /// The whole buffer as a rank-1 tensor of size() floats.
  Tensor flat() const;
  float* data() const;
  Device device() const;

  /// Floats in the buffer (gaps included).
  std::size_t size() const { return m_size; }
  /// Sum of the segments' element counts (what a model summary calls "parameters").
  std::size_t count() const;
  const std::vector<Segment>& segments() const { return m_segments; }
  std::optional<std::size_t> find(const std::string& name) const;
  bool same_layout(const ParameterSet& other) const;

 private:
  std::vector<Segment> m_segments;
  std::size_t m_size = 0;
  std::shared_ptr<Storage> m_storage;
};

}  // namespace mpigan
