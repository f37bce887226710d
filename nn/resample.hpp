// Shape-changing layers without parameters: UpSampling3D (nearest), AveragePooling3D, Reshape and
// Flatten. Reshape/Flatten need the canonical layout: when the input is in a backend layout they
// reorder it (this is one of the "edges" where layouts convert); otherwise the output is a view.
#pragma once

#include "mpigan/nn/layer.hpp"

namespace mpigan::nn {

/// @brief Keras UpSampling3D: every voxel repeated factor times along each spatial dim.
class UpSampling3d final : public Layer {
 public:
  UpSampling3d(std::string name, Dims3 factor);
  std::string kind() const override { return "UpSampling3D"; }
  std::string describe() const override { return fmt::format("factor {}", m_desc.factor); }
  Shape output_shape(const Shape& src) const override;
  TensorDesc setup(const TensorDesc& src) override;
  const Tensor& forward(const Tensor& src, const ForwardContext& ctx) override;
  void backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) override;

 private:
  UpsampleDesc m_desc;
  std::unique_ptr<UpsampleOp> m_op;
  TensorDesc m_src_desc;
  Tensor m_dst;
};

/// @brief Keras AveragePooling3D with 'valid' padding: the mean over each window; a window that
/// does not fit at the end is dropped (23 -> 11 for pool 2).
class AvgPool3d final : public Layer {
 public:
  AvgPool3d(std::string name, Dims3 pool);
  std::string kind() const override { return "AveragePooling3D"; }
  std::string describe() const override { return fmt::format("pool {}", m_desc.kernel); }
  Shape output_shape(const Shape& src) const override;
  TensorDesc setup(const TensorDesc& src) override;
  const Tensor& forward(const Tensor& src, const ForwardContext& ctx) override;
  void backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) override;

 private:
  AvgPoolDesc m_desc;
  std::unique_ptr<AvgPoolOp> m_op;
  TensorDesc m_src_desc;
  Tensor m_dst;
};

/// @brief Keras Reshape (target excludes the batch dim; canonical row-major order). Flatten is a
/// Reshape to (item_numel).
class Reshape final : public Layer {
 public:
  Reshape(std::string name, std::vector<std::int64_t> target);
  static std::unique_ptr<Reshape> flatten(std::string name);
  std::string kind() const override { return m_flatten ? "Flatten" : "Reshape"; }
  std::string describe() const override;
  Shape output_shape(const Shape& src) const override;
  bool output_aliases_input() const override { return m_src_desc.canonical(); }
  TensorDesc setup(const TensorDesc& src) override;
  const Tensor& forward(const Tensor& src, const ForwardContext& ctx) override;
  void backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) override;

 private:
  std::vector<std::int64_t> m_target;  // empty = flatten
  bool m_flatten = false;
  TensorDesc m_src_desc;
  Tensor m_canonical, m_dst;
};

}  // namespace mpigan::nn
