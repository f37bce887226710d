// The CPU backend: memory, reorders, op factories, and the flat and optimizer math (Eigen, vector_kernels).
#include "mpigan/backend/cpu/cpu_backend.hpp"

#include "mpigan/backend/cpu/cpu_ops.hpp"
#include "mpigan/backend/cpu/dnnl_common.hpp"
#include "mpigan/core/env.hpp"
#include "mpigan/core/error.hpp"
#include "mpigan/core/rng.hpp"
#include "mpigan/kernels/vector_kernels.hpp"

#include <omp.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <Eigen/Core>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include <spdlog/spdlog.h>

namespace mpigan {

using cpu::dnnl_call;
using VecMap = Eigen::Map<Eigen::ArrayXf, Eigen::Aligned16>;
using ConstVecMap = Eigen::Map<const Eigen::ArrayXf>;

namespace {

// Element-wise work is split into contiguous chunks over the OpenMP team; below this size one
// thread does it (thread start-up would cost more than the loop).
constexpr std::size_t kParallelMin = 1 << 15;

template <class F>
void parallel_chunks(std::size_t n, F&& f) {
  if (n < kParallelMin || omp_get_max_threads() == 1) {
    f(std::size_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    const std::size_t t = static_cast<std::size_t>(omp_get_thread_num());
    const std::size_t nt = static_cast<std::size_t>(omp_get_num_threads());
    const std::size_t chunk = (n + nt - 1) / nt;
    const std::size_t b = std::min(n, t * chunk), e = std::min(n, b + chunk);
    if (b < e) f(b, e);
  }
}

template <class F>
double parallel_sum(std::size_t n, F&& f) {
  if (n < kParallelMin || omp_get_max_threads() == 1) return f(std::size_t{0}, n);
  double total = 0.0;
#pragma omp parallel reduction(+ : total)
  {
    const std::size_t t = static_cast<std::size_t>(omp_get_thread_num());
    const std::size_t nt = static_cast<std::size_t>(omp_get_num_threads());
    const std::size_t chunk = (n + nt - 1) / nt;
    const std::size_t b = std::min(n, t * chunk), e = std::min(n, b + chunk);
    if (b < e) total += f(b, e);
  }
  return total;
}

Eigen::Map<Eigen::ArrayXf> arr(Tensor& t, std::size_t b, std::size_t e) {
  return {t.data() + b, static_cast<Eigen::Index>(e - b)};
}
Eigen::Map<const Eigen::ArrayXf> arr(const Tensor& t, std::size_t b, std::size_t e) {
  return {t.data() + b, static_cast<Eigen::Index>(e - b)};
}

std::size_t same_size(const Tensor& a, const Tensor& b, const char* op) {
  MPIGAN_CHECK(a.physical_elems() == b.physical_elems() && same_layout(a.layout(), b.layout()),
               "cpu {}: operands differ ({} vs {})", op, a.desc().to_string(), b.desc().to_string());
  return a.physical_elems();
}

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

/// The cpuid vendor string ("GenuineIntel", "AuthenticAMD", ...), "" where cpuid is not available.
std::string cpu_vendor() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return "";
  char v[13] = {};
  std::memcpy(v, &ebx, 4);
  std::memcpy(v + 4, &edx, 4);
  std::memcpy(v + 8, &ecx, 4);
  return v;
#else
  return "";
#endif
}

}  // namespace

std::string bf16_speed_note(const std::string& isa, const std::string& vendor) {
  if (isa != "avx512_core_bf16" || vendor != "GenuineIntel") return "";
  return "precision bf16 on an Intel CPU without AMX (oneDNN ISA avx512_core_bf16): on an Intel Xeon of this kind "
         "bf16 convolutions ran slower than fp32 (the 3dgan-25 step 0.56-0.58x, the 5x5x5 rung's 0.64-0.66x; "
         "an AMD EPYC with the same ISA: 1.55x and 1.23x; docs/performance.md, section 10). Compare `mpigan bench "
         "step --precision bf16` with `--precision fp32` on this machine before a long run";
}

std::string bf16_support(const std::string& isa) {
  if (isa == "avx512_core_bf16" || isa == "avx512_core_amx") return "native";
  if (isa == "avx512_core" || isa == "avx512_core_vnni") return "emulated";
  return "none";
}

bool bf16_bwd_data_as_forward(const std::string& isa) {
  static const EnvChoice<bool> kForms[] = {
      {"forward", "a forward convolution of the transposed, reversed weights (unset: on AMX)", true},
      {"native", "oneDNN's backward-data kernel (unset: on every CPU without AMX)", false}};
  return env_choice("MPIGAN_CPU_BWD_DATA", kForms, isa == "avx512_core_amx");
}

CpuBackend::CpuBackend(const BackendOptions& options)
    : m_ctx(std::make_unique<cpu::DnnlContext>()), m_threads(options.threads) {
  if (m_threads > 0) omp_set_num_threads(m_threads);
  if (options.precision != Precision::bf16) return;
  const std::string isa = isa_name(dnnl::get_effective_cpu_isa());
  const std::string support = bf16_support(isa);
  const bool emulation = options.bf16_emulation || env_flag("MPIGAN_BF16_EMULATION", false);
  if (support == "native" || (support == "emulated" && emulation)) {
    m_bf16_emulated = support == "emulated";
    m_ctx->conv_input = dnnl::memory::data_type::bf16;
    m_ctx->bf16_bwd_data_as_forward = bf16_bwd_data_as_forward(isa);
    if (const std::string note = bf16_speed_note(isa, cpu_vendor()); !note.empty()) spdlog::warn("{}", note);
    if (m_bf16_emulated)
      spdlog::warn(
          "precision bf16: this CPU (oneDNN ISA {}) has no native bf16; oneDNN emulates it, slower than "
          "fp32 (MPIGAN_BF16_EMULATION=1: for checking the numerics)",
          isa);
    return;
  }
  spdlog::warn(
      "precision bf16 requested, but this CPU's oneDNN ISA is {}, without native bf16 (avx512_core_bf16 or "
      "avx512_core_amx needed): running fp32{}",
      isa,
      support == "emulated" ? " (MPIGAN_BF16_EMULATION=1 runs oneDNN's slower emulation, to check the numerics)" : "");
}

CpuBackend::~CpuBackend() = default;

Precision CpuBackend::precision() const {
  return m_ctx->conv_input == dnnl::memory::data_type::bf16 ? Precision::bf16 : Precision::fp32;
}

std::string CpuBackend::describe() const {
  const auto* v = dnnl_version();
  return fmt::format("cpu (oneDNN {}.{}.{}, ISA {}, {} OpenMP threads, {} convolutions; Eigen {}.{}.{})", v->major,
                     v->minor, v->patch, isa_name(dnnl::get_effective_cpu_isa()), omp_get_max_threads(),
                     precision() == Precision::bf16 ? (m_bf16_emulated ? "bf16 (emulated)" : "bf16") : "fp32",
                     EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION);
}

void CpuBackend::reorder(const Tensor& src, Tensor& dst) {
  MPIGAN_CHECK_SHAPE(src.shape() == dst.shape(), "cpu reorder: shapes differ ({} vs {})", src.shape(), dst.shape());
  auto src_md = cpu::md_of(src.desc());
  auto dst_md = cpu::md_of(dst.desc());
  if (src_md == dst_md) {
    copy(src, dst);
    return;
  }
  dnnl_call("reorder " + src.desc().to_string() + " -> " + dst.desc().to_string(), [&] {
    // oneDNN's primitive cache makes re-creating the same reorder cheap.
    dnnl::reorder r(dnnl::reorder::primitive_desc(m_ctx->engine, src_md, m_ctx->engine, dst_md, m_ctx->attr()));
    auto s = cpu::make_memory(src_md, *m_ctx, src.data());
    auto d = cpu::make_memory(dst_md, *m_ctx, dst.data());
    m_ctx->run_reorder(r, s, d);
  });
}

std::unique_ptr<Conv3dOp> CpuBackend::make_conv3d(const Conv3dDesc& d) {
  return cpu::make_conv3d(d, *m_ctx);
}
std::unique_ptr<InnerProductOp> CpuBackend::make_inner_product(const InnerProductDesc& d) {
  return cpu::make_inner_product(d, *m_ctx);
}
std::unique_ptr<EltwiseOp> CpuBackend::make_eltwise(const EltwiseDesc& d) {
  return cpu::make_eltwise(d, *m_ctx);
}
std::unique_ptr<BatchNormOp> CpuBackend::make_batch_norm(const BatchNormDesc& d) {
  return cpu::make_batch_norm(d, *m_ctx);
}
std::unique_ptr<AvgPoolOp> CpuBackend::make_avg_pool(const AvgPoolDesc& d) {
  return cpu::make_avg_pool(d, *m_ctx);
}
std::unique_ptr<UpsampleOp> CpuBackend::make_upsample(const UpsampleDesc& d) {
  return cpu::make_upsample(d, *m_ctx);
}

void CpuBackend::fill(Tensor& x, float value) {
  parallel_chunks(x.physical_elems(), [&](std::size_t b, std::size_t e) { arr(x, b, e).setConstant(value); });
}

void CpuBackend::copy(const Tensor& src, Tensor& dst) {
  parallel_chunks(same_size(src, dst, "copy"), [&](std::size_t b, std::size_t e) { arr(dst, b, e) = arr(src, b, e); });
}

void CpuBackend::axpby(float a, const Tensor& x, float b, Tensor& y) {
  parallel_chunks(same_size(x, y, "axpby"), [&](std::size_t s, std::size_t e) {
    if (b == 1.0f)
      arr(y, s, e) += a * arr(x, s, e);
    else if (b == 0.0f)  // BLAS: y is not read (it may hold anything, NaN included)
      arr(y, s, e) = a * arr(x, s, e);
    else
      arr(y, s, e) = a * arr(x, s, e) + b * arr(y, s, e);
  });
}

void CpuBackend::mul(const Tensor& a, const Tensor& b, Tensor& out) {
  same_size(a, out, "mul");
  parallel_chunks(same_size(a, b, "mul"),
                  [&](std::size_t s, std::size_t e) { arr(out, s, e) = arr(a, s, e) * arr(b, s, e); });
}

double CpuBackend::sum_squares(const Tensor& x) {
  return parallel_sum(x.physical_elems(),
                      [&](std::size_t b, std::size_t e) { return cpu::sum_squares_range(x.data() + b, e - b); });
}

std::size_t CpuBackend::count_nonfinite(const Tensor& x) {
  return static_cast<std::size_t>(parallel_sum(x.physical_elems(), [&](std::size_t b, std::size_t e) {
    return static_cast<double>((!arr(x, b, e).isFinite()).count());
  }));
}

void CpuBackend::dropout(const Tensor& src, Tensor& dst, float rate, std::uint64_t seed, std::uint64_t stream,
                         Tensor& mask) {
  const std::size_t n = same_size(src, dst, "dropout");
  MPIGAN_CHECK(mask.physical_elems() >= dropout_mask_floats(n), "cpu dropout: mask of {} floats for {} elements",
               mask.physical_elems(), n);
  const float keep_scale = 1.0f / (1.0f - rate);
  auto* bits = reinterpret_cast<std::uint32_t*>(mask.data());
  // Chunks in whole mask words (32 elements), so no two threads write one word.
  parallel_chunks(dropout_mask_floats(n), [&](std::size_t b, std::size_t e) {
    cpu::dropout_range(src.data(), dst.data(), bits, 32 * b, std::min(n, 32 * e), rate, keep_scale, seed, stream);
  });
}

void CpuBackend::dropout_backward(const Tensor& diff_dst, Tensor& diff_src, float rate, const Tensor& mask) {
  const float keep_scale = 1.0f / (1.0f - rate);
  const auto* bits = reinterpret_cast<const std::uint32_t*>(mask.data());
  parallel_chunks(same_size(diff_dst, diff_src, "dropout_backward"), [&](std::size_t b, std::size_t e) {
    cpu::dropout_backward_range(diff_dst.data(), diff_src.data(), bits, b, e, keep_scale);
  });
}

void CpuBackend::sum_per_item(const Tensor& src, Tensor& dst) {
  MPIGAN_CHECK(src.canonical() && dst.canonical(), "cpu sum_per_item: canonical tensors required ({})",
               src.desc().to_string());
  const std::int64_t n = src.shape()[0], m = src.shape().item_numel();
  MPIGAN_CHECK_SHAPE(dst.numel() == n, "cpu sum_per_item: dst expected ({},1), found {}", n, dst.shape());
#pragma omp parallel for schedule(static) if (n * m >= static_cast <std::int64_t>(kParallelMin))
  for (std::int64_t i = 0; i < n; ++i)
    dst.data()[i] = static_cast<float>(ConstVecMap(src.data() + i * m, m).cast<double>().sum());
}

void CpuBackend::add_per_item(const Tensor& diff_dst, Tensor& diff_src) {
  MPIGAN_CHECK(diff_src.canonical(), "cpu add_per_item: canonical diff_src required ({})", diff_src.desc().to_string());
  const std::int64_t n = diff_src.shape()[0], m = diff_src.shape().item_numel();
  MPIGAN_CHECK_SHAPE(diff_dst.numel() == n, "cpu add_per_item: diff_dst expected ({},1), found {}", n,
                     diff_dst.shape());
#pragma omp parallel for schedule(static) if (n * m >= static_cast <std::int64_t>(kParallelMin))
  for (std::int64_t i = 0; i < n; ++i) Eigen::Map<Eigen::ArrayXf>(diff_src.data() + i * m, m) += diff_dst.data()[i];
}

void CpuBackend::pow(const Tensor& src, float p, Tensor& dst) {
  parallel_chunks(same_size(src, dst, "pow"),
                  [&](std::size_t b, std::size_t e) { arr(dst, b, e) = arr(src, b, e).max(0.0f).pow(p); });
}

void CpuBackend::pow_backward_add(const Tensor& src, float p, const Tensor& diff_dst, Tensor& diff_src) {
  same_size(src, diff_dst, "pow_backward_add");
  parallel_chunks(same_size(src, diff_src, "pow_backward_add"), [&](std::size_t b, std::size_t e) {
    auto x = arr(src, b, e);
    arr(diff_src, b, e) += (x > 0.0f).select(p * x.pow(p - 1.0f) * arr(diff_dst, b, e), 0.0f);
  });
}

namespace {
/// An optimizer step's mirror, checked (null when there is none).
float* mirror_data(Tensor* mirror, const Tensor& w) {
  if (mirror == nullptr) return nullptr;
  same_size(w, *mirror, "optimizer update (mirror)");
  return mirror->data();
}
float* at(float* p, std::size_t b) {
  return p == nullptr ? nullptr : p + b;
}
}  // namespace

void CpuBackend::sgd_update(Tensor& w, const Tensor& g, Tensor& v, const SgdStep& s) {
  float* mirror = mirror_data(s.mirror, w);
  parallel_chunks(same_size(w, g, "sgd_update"), [&](std::size_t b, std::size_t e) {
    cpu::sgd_range(w.data() + b, g.data() + b, v.data() + b, at(mirror, b), e - b, s.lr, s.momentum, s.nesterov);
  });
}

void CpuBackend::rmsprop_update(Tensor& w, const Tensor& g, Tensor& ms, const RmspropStep& s) {
  float* mirror = mirror_data(s.mirror, w);
  parallel_chunks(same_size(w, g, "rmsprop_update"), [&](std::size_t b, std::size_t e) {
    cpu::rmsprop_range(w.data() + b, g.data() + b, ms.data() + b, at(mirror, b), e - b, s.lr, s.rho, s.epsilon);
  });
}

void CpuBackend::adam_update(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s) {
  float* mirror = mirror_data(s.mirror, w);
  parallel_chunks(same_size(w, g, "adam_update"), [&](std::size_t b, std::size_t e) {
    cpu::adam_range(w.data() + b, g.data() + b, m.data() + b, v.data() + b, at(mirror, b), e - b, s.lr_t, s.beta1,
                    s.beta2, s.epsilon);
  });
}

}  // namespace mpigan
