// The CPU backend: oneDNN primitives for the network ops (blocked layouts kept between layers),
// Eigen with OpenMP for element-wise and optimizer math over flat buffers.
#pragma once

#include "mpigan/core/backend.hpp"

#include <memory>

namespace mpigan {
namespace cpu {
struct DnnlContext;
}

/// How oneDNN runs bf16 convolutions on a CPU of ISA @p isa (dnnl::cpu_isa's name, as
/// describe() prints it): "native" (AVX512-BF16 or AMX), "emulated" (AVX-512 without them:
/// oneDNN's emulation, slower than fp32) or "none".
std::string bf16_support(const std::string& isa);

/// A warning for a CPU whose native bf16 was measured slower than fp32, or "" where it was not: an
/// Intel CPU (cpuid vendor "GenuineIntel") running oneDNN's avx512_core_bf16 kernels, i.e. without
/// AMX, where the 3dgan-25 step ran at 0.56-0.58x and the rung's at 0.64-0.66x fp32 (an AMD EPYC with the
/// same ISA: 1.55x and 1.23x). The figures are in the message.
std::string bf16_speed_note(const std::string& isa, const std::string& vendor);

/// Whether bf16 convolutions run their backward data as a forward convolution (the transposed,
/// reversed weights) on a CPU of ISA @p isa: by default on AMX (avx512_core_amx), where oneDNN
/// 2.6's bf16 forward kernels outrun its backward ones 2-3x; elsewhere oneDNN's backward kernel
/// (on an AVX512-BF16 EPYC the forward form was no faster). MPIGAN_CPU_BWD_DATA overrides:
/// "forward" or "native"; anything else throws a ConfigError naming it.
bool bf16_bwd_data_as_forward(const std::string& isa);

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const BackendOptions& options = {});
  ~CpuBackend() override;

  std::string name() const override { return "cpu"; }
  Device device() const override { return Device::cpu; }
  std::string describe() const override;
  Precision precision() const override;

  std::shared_ptr<Storage> allocate_storage(std::size_t bytes) override { return Storage::host(bytes); }
  void reorder(const Tensor& src, Tensor& dst) override;

  std::unique_ptr<Conv3dOp> make_conv3d(const Conv3dDesc& desc) override;
  std::unique_ptr<InnerProductOp> make_inner_product(const InnerProductDesc& desc) override;
  std::unique_ptr<EltwiseOp> make_eltwise(const EltwiseDesc& desc) override;
  std::unique_ptr<BatchNormOp> make_batch_norm(const BatchNormDesc& desc) override;
  std::unique_ptr<AvgPoolOp> make_avg_pool(const AvgPoolDesc& desc) override;
  std::unique_ptr<UpsampleOp> make_upsample(const UpsampleDesc& desc) override;

  void fill(Tensor& x, float value) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void axpby(float a, const Tensor& x, float b, Tensor& y) override;
  void mul(const Tensor& a, const Tensor& b, Tensor& out) override;
  double sum_squares(const Tensor& x) override;
  std::size_t count_nonfinite(const Tensor& x) override;
  void dropout(const Tensor& src, Tensor& dst, float rate, std::uint64_t seed, std::uint64_t stream,
               Tensor& mask) override;
  void dropout_backward(const Tensor& diff_dst, Tensor& diff_src, float rate, const Tensor& mask) override;
  void sum_per_item(const Tensor& src, Tensor& dst) override;
  void add_per_item(const Tensor& diff_dst, Tensor& diff_src) override;
  void pow(const Tensor& src, float p, Tensor& dst) override;
  void pow_backward_add(const Tensor& src, float p, const Tensor& diff_dst, Tensor& diff_src) override;

  void sgd_update(Tensor& w, const Tensor& g, Tensor& v, const SgdStep& s) override;
  void rmsprop_update(Tensor& w, const Tensor& g, Tensor& ms, const RmspropStep& s) override;
  void adam_update(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s) override;

 private:
  std::unique_ptr<cpu::DnnlContext> m_ctx;
  int m_threads = 0;
  bool m_bf16_emulated = false;
};

}  // namespace mpigan
