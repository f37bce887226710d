// ParameterSet: named tensors laid out in one flat buffer, on a backend or over host memory.
#include "mpigan/core/parameter_set.hpp"

#include "mpigan/core/error.hpp"

namespace mpigan {

ParameterSet ParameterSet::like(const ParameterSet& layout, Backend& backend) {
  ParameterSet p;
  p.m_segments = layout.m_segments;
  p.m_size = layout.m_size;
  p.allocate(backend);
  return p;
}

ParameterSet ParameterSet::over(const ParameterSet& layout, float* host) {
  ParameterSet p;
  p.m_segments = layout.m_segments;
  p.m_size = layout.m_size;
  p.m_storage = std::make_shared<Storage>(host, p.m_size * sizeof(float), Device::cpu, [](void*) {});
  return p;
}

std::size_t ParameterSet::add(std::string name, const Shape& shape) {
  MPIGAN_CHECK(!allocated(), "ParameterSet::add('{}') after allocate()", name);
  MPIGAN_CHECK(!find(name), "ParameterSet: duplicate segment name '{}'", name);
  const std::size_t offset = (m_size + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  m_segments.push_back({std::move(name), shape, offset});
  m_size = offset + static_cast<std::size_t>(shape.numel());
  return m_segments.size() - 1;
}

void ParameterSet::allocate(Backend& backend) {
  MPIGAN_CHECK(!allocated(), "ParameterSet::allocate called twice");
  // Round the buffer up to the alignment too, so the tail gap is part of it and zero.
  m_size = (m_size + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  m_storage = backend.allocate_storage(std::max<std::size_t>(m_size, 1) * sizeof(float));
  Tensor all = flat();
  if (m_size > 0) backend.fill(all, 0.0f);
}

Tensor ParameterSet::view(std::size_t index) const {
  MPIGAN_CHECK(allocated(), "ParameterSet::view before allocate()");
  MPIGAN_CHECK(index < m_segments.size(), "ParameterSet::view({}) of {} segments", index, m_segments.size());
  const auto& s = m_segments[index];
  return Tensor::in_storage({s.shape, nullptr}, m_storage, s.offset);
}

Tensor ParameterSet::flat() const {
  MPIGAN_CHECK(allocated(), "ParameterSet::flat before allocate()");
  return Tensor::in_storage({Shape{static_cast<std::int64_t>(m_size)}, nullptr}, m_storage, 0);
}

float* ParameterSet::data() const {
  MPIGAN_CHECK(allocated(), "ParameterSet::data before allocate()");
  return static_cast<float*>(m_storage->data());
}

Device ParameterSet::device() const {
  return allocated() ? m_storage->device() : Device::cpu;
}

std::size_t ParameterSet::count() const {
  std::size_t n = 0;
  for (const auto& s : m_segments) n += static_cast<std::size_t>(s.shape.numel());
  return n;
}

std::optional<std::size_t> ParameterSet::find(const std::string& name) const {
  for (std::size_t i = 0; i < m_segments.size(); ++i)
    if (m_segments[i].name == name) return i;
  return std::nullopt;
}

bool ParameterSet::same_layout(const ParameterSet& other) const {
  if (m_size != other.m_size || m_segments.size() != other.m_segments.size()) return false;
  for (std::size_t i = 0; i < m_segments.size(); ++i) {
    const auto &a = m_segments[i], &b = other.m_segments[i];
    if (a.name != b.name || a.shape != b.shape || a.offset != b.offset) return false;
  }
  return true;
}

}  // namespace mpigan
