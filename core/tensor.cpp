// Tensor, TensorDesc and host Storage: allocation, views, reshapes and host copies (tensor.hpp).
#include "mpigan/core/tensor.hpp"

#include "mpigan/core/error.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace mpigan {

const char* to_string(Device d) {
  return d == Device::cpu ? "cpu" : "cuda";
}

Storage::Storage(void* data, std::size_t bytes, Device device, std::function<void(void*)> release)
    : m_data(data), m_bytes(bytes), m_device(device), m_release(std::move(release)) {}

Storage::~Storage() {
  if (m_release && m_data) m_release(m_data);
}

std::shared_ptr<Storage> Storage::host(std::size_t bytes) {
  constexpr std::size_t kAlign = 64;
  const std::size_t rounded = std::max<std::size_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  void* p = std::aligned_alloc(kAlign, rounded);
  MPIGAN_CHECK(p != nullptr, "host allocation of {} bytes failed", rounded);
  return std::make_shared<Storage>(p, bytes, Device::cpu, [](void* q) { std::free(q); });
}

bool same_layout(const LayoutPtr& a, const LayoutPtr& b) {
  if (!a || !b) return !a && !b;
  return a == b || a->same_as(*b);
}

std::size_t TensorDesc::physical_elems() const {
  return layout ? layout->physical_elems() : static_cast<std::size_t>(shape.numel());
}

std::string TensorDesc::to_string() const {
  return shape.to_string() + (layout ? " " + layout->name() : std::string(" canonical"));
}

Tensor Tensor::empty(const Shape& shape) {
  auto storage = Storage::host(static_cast<std::size_t>(shape.numel()) * sizeof(float));
  return in_storage({shape, nullptr}, storage);
}

Tensor Tensor::zeros(const Shape& shape) {
  return full(shape, 0.0f);
}

Tensor Tensor::full(const Shape& shape, float value) {
  Tensor t = empty(shape);
  t.fill(value);
  return t;
}

Tensor Tensor::from(const Shape& shape, std::span<const float> values) {
  MPIGAN_CHECK_SHAPE(static_cast<std::int64_t>(values.size()) == shape.numel(),
                     "Tensor::from: shape {} needs {} values, got {}", shape, shape.numel(), values.size());
  Tensor t = empty(shape);
  std::copy(values.begin(), values.end(), t.m_data);
  return t;
}

Tensor Tensor::view_of(const Shape& shape, float* data, Device device, std::shared_ptr<Storage> keep_alive) {
  Tensor t;
  t.m_desc = {shape, nullptr};
  t.m_device = device;
  t.m_storage = std::move(keep_alive);
  t.m_data = data;
  return t;
}

Tensor Tensor::in_storage(const TensorDesc& desc, std::shared_ptr<Storage> storage, std::size_t offset) {
  MPIGAN_CHECK(storage != nullptr, "Tensor::in_storage: null storage for {}", desc.to_string());
  const std::size_t need = (offset + desc.physical_elems()) * sizeof(float);
  MPIGAN_CHECK(need <= storage->bytes() || desc.physical_elems() == 0,
               "Tensor::in_storage: {} needs {} bytes from offset {}, storage has {}", desc.to_string(), need, offset,
               storage->bytes());
  Tensor t;
  t.m_desc = desc;
  t.m_device = storage->device();
  t.m_data = static_cast<float*>(storage->data()) + offset;
  t.m_storage = std::move(storage);
  return t;
}

Tensor Tensor::reshaped(const Shape& shape) const {
  MPIGAN_CHECK_SHAPE(canonical(), "reshape of a tensor in backend layout {}", m_desc.to_string());
  MPIGAN_CHECK_SHAPE(shape.numel() == numel(), "reshape {} -> {}: element counts differ ({} vs {})", this->shape(),
                     shape, numel(), shape.numel());
  Tensor t = *this;
  t.m_desc.shape = shape;
  return t;
}

void Tensor::require_host_canonical(const char* what) const {
  MPIGAN_CHECK(m_device == Device::cpu && canonical(), "{} needs a canonical host tensor, got {} on {}", what,
               m_desc.to_string(), mpigan::to_string(m_device));
}

std::span<float> Tensor::values() {
  require_host_canonical("Tensor::values");
  return {m_data, static_cast<std::size_t>(numel())};
}

std::span<const float> Tensor::values() const {
  require_host_canonical("Tensor::values");
  return {m_data, static_cast<std::size_t>(numel())};
}

std::size_t Tensor::flat_index(std::initializer_list<std::int64_t> index) const {
  require_host_canonical("Tensor::at");
  const Shape& s = shape();
  MPIGAN_CHECK_SHAPE(static_cast<int>(index.size()) == s.rank(), "Tensor::at: {} indices for shape {}", index.size(),
                     s);
  std::size_t flat = 0;
  int i = 0;
  for (std::int64_t v : index) {
    MPIGAN_CHECK_SHAPE(v >= 0 && v < s[i], "Tensor::at: index {} = {} out of range for shape {}", i, v, s);
    flat = flat * static_cast<std::size_t>(s[i]) + static_cast<std::size_t>(v);
    ++i;
  }
  return flat;
}

float& Tensor::at(std::initializer_list<std::int64_t> index) {
  return m_data[flat_index(index)];
}
float Tensor::at(std::initializer_list<std::int64_t> index) const {
  return m_data[flat_index(index)];
}

void Tensor::fill(float value) {
  auto v = values();
  std::fill(v.begin(), v.end(), value);
}

Tensor Tensor::clone() const {
  require_host_canonical("Tensor::clone");
  Tensor t = empty(shape());
  std::memcpy(t.m_data, m_data, static_cast<std::size_t>(numel()) * sizeof(float));
  return t;
}

}  // namespace mpigan
