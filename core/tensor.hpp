// Tensor: a float32 array with a logical shape, a device, and a physical layout.
//
// Invariants:
//  - The logical shape follows the API conventions of shape.hpp (NCDHW, OIDHW, OI).
//  - layout() == nullptr means the canonical dense row-major layout of the shape; any other
//    layout is private to the backend that created it (oneDNN blocked formats kept between
//    layers). Only that backend reads such a tensor; Backend::to_canonical converts at the edges.
//  - Storage is reference counted; copying a Tensor is shallow (a view of the same memory).
//    Host memory is 64-byte aligned.
//  - Element access helpers (values(), at()) are for canonical host tensors only.
#pragma once

#include "mpigan/core/shape.hpp"

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace mpigan {

enum class Device : std::uint8_t { cpu, cuda };
const char* to_string(Device d);

/// A block of memory on one device, released by its deleter.
class Storage {
 public:
  Storage(void* data, std::size_t bytes, Device device, std::function<void(void*)> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return m_data; }
  std::size_t bytes() const { return m_bytes; }
  Device device() const { return m_device; }

  /// 64-byte aligned host memory.
  static std::shared_ptr<Storage> host(std::size_t bytes);

 private:
  void* m_data;
  std::size_t m_bytes;
  Device m_device;
  std::function<void(void*)> m_release;
};

/// A backend's physical layout of a tensor (opaque to everything but that backend).
class Layout {
 public:
  virtual ~Layout() = default;
  /// Floats the layout occupies, padding included (>= the shape's numel).
  virtual std::size_t physical_elems() const = 0;
  /// Human-readable name, e.g. "nCdhw16c".
  virtual std::string name() const = 0;
  virtual bool same_as(const Layout& other) const = 0;
};
using LayoutPtr = std::shared_ptr<const Layout>;

bool same_layout(const LayoutPtr& a, const LayoutPtr& b);

/// What a tensor will look like: shape plus physical layout (nullptr = canonical).
struct TensorDesc {
  Shape shape;
  LayoutPtr layout;
  bool canonical() const { return layout == nullptr; }
  std::size_t physical_elems() const;
  std::string to_string() const;
};

class Tensor {
 public:
  Tensor() = default;

  /// Uninitialised canonical host tensor.
  static Tensor empty(const Shape& shape);
  static Tensor zeros(const Shape& shape);
  static Tensor full(const Shape& shape, float value);
  static Tensor from(const Shape& shape, std::span<const float> values);
  /// A tensor over memory owned elsewhere (e.g. a ParameterSet segment); no ownership taken.
  static Tensor view_of(const Shape& shape, float* data, Device device, std::shared_ptr<Storage> keep_alive = nullptr);
  /// A tensor of @p desc in @p storage (which must be large enough), starting @p offset floats in.
  static Tensor in_storage(const TensorDesc& desc, std::shared_ptr<Storage> storage, std::size_t offset = 0);

  bool defined() const { return m_storage != nullptr || m_data != nullptr; }
  const Shape& shape() const { return m_desc.shape; }
  const TensorDesc& desc() const { return m_desc; }
  const LayoutPtr& layout() const { return m_desc.layout; }
  bool canonical() const { return m_desc.layout == nullptr; }
  Device device() const { return m_device; }
  std::int64_t numel() const { return m_desc.shape.numel(); }
  std::size_t physical_elems() const { return m_desc.physical_elems(); }

  float* data() { return m_data; }
  const float* data() const { return m_data; }
  const std::shared_ptr<Storage>& storage() const { return m_storage; }

  /// Same memory, another canonical shape with the same numel.
  Tensor reshaped(const Shape& shape) const;

  /// Host canonical element access.
  std::span<float> values();
  std::span<const float> values() const;
  float& at(std::initializer_list<std::int64_t> index);
  float at(std::initializer_list<std::int64_t> index) const;
  void fill(float value);
  /// Deep copy (host canonical).
  Tensor clone() const;

 private:
  std::size_t flat_index(std::initializer_list<std::int64_t> index) const;
  void require_host_canonical(const char* what) const;

  TensorDesc m_desc;
  Device m_device = Device::cpu;
  std::shared_ptr<Storage> m_storage;
  float* m_data = nullptr;
};

}  // namespace mpigan
