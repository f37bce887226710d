// The calorimeter heads Pow, SumCells and EcalAngle (calo_heads.hpp): forward on the image and the
// analytic gradient back to it.
#include "mpigan/nn/calo_heads.hpp"

#include "mpigan/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace mpigan::nn {

namespace {

// The host-computed layers (Channel, EcalAngle, ShowerFeatures) read and write host memory
// whatever the backend's device.

/// @p t readable on the host: @p t itself on the CPU, else a host copy.
Tensor on_host(const Tensor& t, Backend& backend) {
  return t.device() == Device::cpu ? t : backend.to_host(t);
}

/// Where to write @p dst's values on the host: @p dst itself on the CPU, else @p scratch, made
/// the shape of @p dst; copy_back() then moves them to @p dst.
Tensor host_buffer(const Tensor& dst, Tensor& scratch) {
  if (dst.device() == Device::cpu) return dst;
  if (!(scratch.defined() && scratch.shape() == dst.shape())) scratch = Tensor::empty(dst.shape());
  return scratch;
}

void copy_back(const Tensor& host, Tensor& dst, Backend& backend) {
  if (dst.device() != Device::cpu) backend.from_host(host, dst);
}

/// A cell's energy from its preprocessed value x: x^(1/power), 0 where x <= 0.
double cell_energy(float x, double inv_p) {
  return x > 0.0f ? std::pow(static_cast<double>(x), inv_p) : 0.0;
}

/// The chain rule from the cells' energies back to the preprocessed input (shower_features,
/// transverse_features): @p grad_out zeroed over every channel, then for each cell (x, y, z) of
/// channel 0 with a positive value, g_c(x, y, z) dc/dx, dc/dx = (1/p) x^(1/p - 1).
template <class GradOfCell>
void cells_to_input(const float* item, std::int64_t channels, Dims3 dims, double inv_p, float* grad_out,
                    GradOfCell g_c) {
  const std::int64_t X = dims.d, Y = dims.h, Z = dims.w;
  std::fill_n(grad_out, channels * X * Y * Z, 0.0f);
  for (std::int64_t x = 0; x < X; ++x)
    for (std::int64_t y = 0; y < Y; ++y)
      for (std::int64_t z = 0; z < Z; ++z) {
        const std::int64_t j = (x * Y + y) * Z + z;
        if (!(item[j] > 0.0f)) continue;
        const double x0 = item[j];
        grad_out[j] = static_cast<float>(g_c(x, y, z) * inv_p * std::pow(x0, inv_p - 1.0));
      }
}

}  // namespace

Pow::Pow(std::string name, float exponent) : Layer(std::move(name)), m_power(exponent) {
  MPIGAN_CHECK(exponent > 0.0f, "layer '{}': Pow exponent must be > 0, got {}", this->name(), exponent);
}

TensorDesc Pow::setup(const TensorDesc& src) {
  m_src_desc = src;
  ensure(m_dst, src);
  return src;
}

const Tensor& Pow::forward(const Tensor& src, const ForwardContext&) {
  check_input(src, m_src_desc);
  m_src = src;
  backend().pow(src, m_power, m_dst);
  return m_dst;
}

void Pow::backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) {
  if (!ctx.need_diff_src) return;
  backend().fill(diff_src, 0.0f);
  backend().pow_backward_add(m_src, m_power, diff_dst, diff_src);
}

TensorDesc SumCells::setup(const TensorDesc& src) {
  MPIGAN_CHECK(src.canonical() && src.shape.rank() >= 2,
               "layer '{}' (SumCells): canonical (N,...) input expected, got {}", name(), src.to_string());
  m_src_desc = src;
  ensure(m_dst, {{src.shape[0], 1}, nullptr});
  return m_dst.desc();
}

const Tensor& SumCells::forward(const Tensor& src, const ForwardContext&) {
  check_input(src, m_src_desc);
  backend().sum_per_item(src, m_dst);
  return m_dst;
}

void SumCells::backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) {
  if (!ctx.need_diff_src) return;
  backend().fill(diff_src, 0.0f);
  backend().add_per_item(diff_dst, diff_src);
}

Shape Channel::output_shape(const Shape& src) const {
  MPIGAN_CHECK_SHAPE(src.rank() == 5 && m_index >= 0 && m_index < src[1],
                     "layer '{}' (Channel): input expected (N,C,X,Y,Z) with C > {}, found {}", name(), m_index, src);
  return {src[0], 1, src[2], src[3], src[4]};
}

TensorDesc Channel::setup(const TensorDesc& src) {
  const Shape out = output_shape(src.shape);
  MPIGAN_CHECK(src.canonical(), "layer '{}' (Channel): canonical input expected, got {}", name(), src.to_string());
  m_src_desc = src;
  ensure(m_dst, {out, nullptr});
  return m_dst.desc();
}

const Tensor& Channel::forward(const Tensor& src, const ForwardContext&) {
  check_input(src, m_src_desc);
  const Tensor host = on_host(src, backend());
  const Shape& s = src.shape();
  const std::int64_t cells = s[2] * s[3] * s[4];
  Tensor out = host_buffer(m_dst, m_host);
  for (std::int64_t i = 0; i < s[0]; ++i)
    std::copy_n(host.data() + (i * s[1] + m_index) * cells, cells, out.data() + i * cells);
  copy_back(out, m_dst, backend());
  return m_dst;
}

void Channel::backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) {
  if (!ctx.need_diff_src) return;
  const Tensor gy = on_host(diff_dst, backend());
  const Shape& s = m_src_desc.shape;
  const std::int64_t cells = s[2] * s[3] * s[4];
  Tensor scratch;
  Tensor out = host_buffer(diff_src, scratch);
  std::fill_n(out.data(), out.numel(), 0.0f);
  for (std::int64_t i = 0; i < s[0]; ++i)
    std::copy_n(gy.data() + i * cells, cells, out.data() + (i * s[1] + m_index) * cells);
  copy_back(out, diff_src, backend());
}

double measure_angle(const float* image, Dims3 dims, double* grad) {
  const std::int64_t X = dims.d, Y = dims.h, Z = dims.w;
  const std::size_t cells = static_cast<std::size_t>(X * Y * Z);
  if (grad) std::fill(grad, grad + cells, 0.0);
  auto at = [&](std::int64_t x, std::int64_t y, std::int64_t z) {
    return static_cast<double>(image[(x * Y + y) * Z + z]);
  };

  // Global sum and barycentre.
  double S = 0, sx = 0, sy = 0, sz = 0;
  std::vector<double> Sz(Z, 0.0), Xz(Z, 0.0), Yz(Z, 0.0);
  for (std::int64_t x = 0; x < X; ++x)
    for (std::int64_t y = 0; y < Y; ++y)
      for (std::int64_t z = 0; z < Z; ++z) {
        const double v = at(x, y, z);
        S += v;
        sx += v * (x + 0.5);
        sy += v * (y + 0.5);
        sz += v * (z + 0.5);
        Sz[z] += v;
        Xz[z] += v * (x + 0.5);
        Yz[z] += v * (y + 0.5);
      }
  if (S == 0.0) return 100.0;
  const double xr = sx / S, yr = sy / S, zr = sz / S;

  constexpr double kEps = 1e-7;  // Keras K.epsilon()
  double num = 0.0, den = 0.0;
  std::vector<double> xm(Z, 0.0), ym(Z, 0.0), q(Z, 0.0), u(Z, 0.0), dxv(Z, 0.0), dzv(Z, 0.0), sign(Z, 1.0), mv(Z, 0.0);
  std::vector<char> clamp(Z, 0);
  for (std::int64_t z = 0; z < Z; ++z) {
    if (Sz[z] == 0.0) continue;
    const double cz = z + 0.5;
    xm[z] = Xz[z] / Sz[z];
    ym[z] = Yz[z] / Sz[z];
    dxv[z] = xm[z] - xr;
    dzv[z] = cz - zr;
    const double r2 = dxv[z] * dxv[z] + dzv[z] * dzv[z];
    clamp[z] = r2 < kEps;
    q[z] = std::sqrt(std::max(r2, kEps));
    u[z] = ym[z] - yr;
    sign[z] = cz < zr ? -1.0 : 1.0;
    mv[z] = sign[z] * u[z] / q[z];
    num += (std::numbers::pi / 2.0 - std::atan(mv[z])) * cz;
    den += cz;
  }
  const double angle = num / den;
  if (!grad) return angle;

  // Reverse mode: angle = num/den, den constant; d angle / d a_z = z/den.
  double g_xr = 0, g_yr = 0, g_zr = 0;
  std::vector<double> g_xm(Z, 0.0), g_ym(Z, 0.0);
  for (std::int64_t z = 0; z < Z; ++z) {
    if (Sz[z] == 0.0) continue;
    const double cz = z + 0.5;
    const double g_a = cz / den;
    const double g_m = -g_a / (1.0 + mv[z] * mv[z]);
    const double g_u = g_m * sign[z] / q[z];
    const double g_q = -g_m * sign[z] * u[z] / (q[z] * q[z]);
    const double g_r2 = clamp[z] ? 0.0 : g_q / (2.0 * q[z]);
    const double g_dx = g_r2 * 2.0 * dxv[z], g_dz = g_r2 * 2.0 * dzv[z];
    g_ym[z] += g_u;
    g_yr -= g_u;
    g_xm[z] += g_dx;
    g_xr -= g_dx;
    g_zr -= g_dz;
  }
  for (std::int64_t x = 0; x < X; ++x)
    for (std::int64_t y = 0; y < Y; ++y)
      for (std::int64_t z = 0; z < Z; ++z) {
        const double cx = x + 0.5, cy = y + 0.5, cz = z + 0.5;
        double g = (g_xr * (cx - xr) + g_yr * (cy - yr) + g_zr * (cz - zr)) / S;
        if (Sz[z] != 0.0) g += (g_xm[z] * (cx - xm[z]) + g_ym[z] * (cy - ym[z])) / Sz[z];
        grad[(x * Y + y) * Z + z] = g;
      }
  return angle;
}

Shape EcalAngle::output_shape(const Shape& src) const {
  MPIGAN_CHECK_SHAPE(src.rank() == 5 && src[1] == 1, "layer '{}' (EcalAngle): input expected (N,1,X,Y,Z), found {}",
                     name(), src);
  return {src[0], 1};
}

TensorDesc EcalAngle::setup(const TensorDesc& src) {
  output_shape(src.shape);
  MPIGAN_CHECK(src.canonical(), "layer '{}' (EcalAngle): canonical input expected, got {}", name(), src.to_string());
  m_src_desc = src;
  ensure(m_dst, {{src.shape[0], 1}, nullptr});
  return m_dst.desc();
}

const Tensor& EcalAngle::forward(const Tensor& src, const ForwardContext&) {
  check_input(src, m_src_desc);
  m_src = src;
  const Tensor host = on_host(src, backend());
  const std::int64_t n = src.shape()[0], item = src.shape().item_numel();
  Tensor out = host_buffer(m_dst, m_host);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i)
    out.data()[i] = static_cast<float>(measure_angle(host.data() + i * item, src.shape().spatial()));
  copy_back(out, m_dst, backend());
  return m_dst;
}

void EcalAngle::backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) {
  if (!ctx.need_diff_src) return;
  const Tensor host = on_host(m_src, backend());
  const Tensor gy = on_host(diff_dst, backend());
  const std::int64_t n = m_src.shape()[0], item = m_src.shape().item_numel();
  Tensor scratch;
  Tensor out = host_buffer(diff_src, scratch);
#pragma omp parallel
  {
    std::vector<double> g(static_cast<std::size_t>(item));
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      measure_angle(host.data() + i * item, m_src.shape().spatial(), g.data());
      const double gi = gy.data()[i];
      for (std::int64_t j = 0; j < item; ++j) out.data()[i * item + j] = static_cast<float>(gi * g[j]);
    }
  }
  copy_back(out, diff_src, backend());
}

std::int64_t shower_feature_count(std::int64_t depth) {
  return 2 + 5 * depth;
}

void shower_features(const float* item, std::int64_t channels, Dims3 dims, float power, double* f, const float* gy,
                     float* grad_out) {
  const std::int64_t X = dims.d, Y = dims.h, Z = dims.w, cells = X * Y * Z;
  constexpr double kEps = 1e-3, kVarEps = 1e-6, kLn10 = std::numbers::ln10;
  const double inv_p = 1.0 / power;
  const double e = channels > 1 ? std::max(static_cast<double>(item[cells]), 1e-12) : 1.0;
  auto cell = [&](std::int64_t j) { return cell_energy(item[j], inv_p); };
  auto u = [&](std::int64_t i, std::int64_t n) {
    return (static_cast<double>(i) - 0.5 * static_cast<double>(n - 1)) * 5.0 / static_cast<double>(n);
  };
  // Per layer: S_z, first and second moments in x and y.
  std::vector<double> Sz(Z, 0.0), Ax(Z, 0.0), Ay(Z, 0.0), Bx(Z, 0.0), By(Z, 0.0);
  double S = 0.0;
  for (std::int64_t x = 0; x < X; ++x)
    for (std::int64_t y = 0; y < Y; ++y)
      for (std::int64_t z = 0; z < Z; ++z) {
        const double c = cell((x * Y + y) * Z + z), ux = u(x, X), uy = u(y, Y);
        S += c;
        Sz[z] += c;
        Ax[z] += c * ux;
        Ay[z] += c * uy;
        Bx[z] += c * ux * ux;
        By[z] += c * uy * uy;
      }
  const double St = S + kEps;
  f[0] = channels > 1 ? std::log10(e) : 0.0;
  f[1] = 10.0 * (std::log10(St / e) - 2.3);
  std::vector<double> mx(Z), my(Z), wx(Z), wy(Z), D(Z);
  for (std::int64_t z = 0; z < Z; ++z) {
    D[z] = Sz[z] + kEps;
    mx[z] = Ax[z] / D[z];
    my[z] = Ay[z] / D[z];
    wx[z] = std::sqrt(std::max(Bx[z] / D[z] - mx[z] * mx[z], 0.0) + kVarEps);
    wy[z] = std::sqrt(std::max(By[z] / D[z] - my[z] * my[z], 0.0) + kVarEps);
    double* fz = f + 2 + 5 * z;
    fz[0] = 2.0 * (std::log10(D[z] / St) + 1.0);
    fz[1] = 5.0 * mx[z];
    fz[2] = 5.0 * my[z];
    fz[3] = 5.0 * wx[z] - 2.0;
    fz[4] = 5.0 * wy[z] - 2.0;
  }
  if (!gy || !grad_out) return;
  // Reverse mode: d f / d c for each cell, then dc/dx = (1/p) x^(1/p - 1).
  double g_S = 10.0 * static_cast<double>(gy[1]) / (St * kLn10);
  std::vector<double> g_D(Z), g_mx(Z), g_my(Z), g_vx(Z), g_vy(Z);
  for (std::int64_t z = 0; z < Z; ++z) {
    const float* gz = gy + 2 + 5 * z;
    g_D[z] = 2.0 * gz[0] / (D[z] * kLn10);
    g_S -= 2.0 * gz[0] / (St * kLn10);
    g_vx[z] = Bx[z] / D[z] - mx[z] * mx[z] > 0.0 ? 5.0 * gz[3] / (2.0 * wx[z]) : 0.0;
    g_vy[z] = By[z] / D[z] - my[z] * my[z] > 0.0 ? 5.0 * gz[4] / (2.0 * wy[z]) : 0.0;
    g_mx[z] = 5.0 * gz[1] - 2.0 * mx[z] * g_vx[z];
    g_my[z] = 5.0 * gz[2] - 2.0 * my[z] * g_vy[z];
  }
  cells_to_input(item, channels, dims, inv_p, grad_out, [&](std::int64_t x, std::int64_t y, std::int64_t z) {
    const double ux = u(x, X), uy = u(y, Y);
    // m = A/D: dm/dc = (u - m)/D; v = B/D - m^2: dv/dc = (u^2 - B/D)/D (the m^2 part via g_m).
    return g_S + g_D[z] + (g_mx[z] * (ux - mx[z]) + g_my[z] * (uy - my[z])) / D[z] +
           (g_vx[z] * (ux * ux - Bx[z] / D[z]) + g_vy[z] * (uy * uy - By[z] / D[z])) / D[z];
  });
}

std::int64_t transverse_feature_count(Dims3 dims) {
  return dims.d + dims.h;
}

void transverse_features(const float* item, std::int64_t channels, Dims3 dims, float power, double* t, const float* gy,
                         float* grad_out) {
  const std::int64_t X = dims.d, Y = dims.h, Z = dims.w;
  constexpr double kEps = 1e-3;
  const double inv_p = 1.0 / power;
  std::vector<double> C(static_cast<std::size_t>(X + Y), 0.0);
  double S = 0.0;
  for (std::int64_t x = 0; x < X; ++x)
    for (std::int64_t y = 0; y < Y; ++y)
      for (std::int64_t z = 0; z < Z; ++z) {
        const double c = cell_energy(item[(x * Y + y) * Z + z], inv_p);
        S += c;
        C[static_cast<std::size_t>(x)] += c;
        C[static_cast<std::size_t>(X + y)] += c;
      }
  const double St = S + kEps;
  for (std::size_t k = 0; k < C.size(); ++k) t[k] = 100.0 * C[k] / St;
  if (!gy || !grad_out) return;
  // d t_k / d c_j = 100 ([j in k] - t_k / 100) / St
  double common = 0.0;
  for (std::size_t k = 0; k < C.size(); ++k) common += static_cast<double>(gy[k]) * t[k] / 100.0;
  cells_to_input(item, channels, dims, inv_p, grad_out, [&](std::int64_t x, std::int64_t y, std::int64_t) {
    return 100.0 * (static_cast<double>(gy[x]) + static_cast<double>(gy[X + y]) - common) / St;
  });
}

ShowerFeatures::ShowerFeatures(std::string name, float power) : Layer(std::move(name)), m_power(power) {
  MPIGAN_CHECK(power > 0.0f, "layer '{}' (ShowerFeatures): power must be > 0, got {}", this->name(), power);
}

Shape ShowerFeatures::output_shape(const Shape& src) const {
  MPIGAN_CHECK_SHAPE(src.rank() == 5 && (src[1] == 1 || src[1] == 2),
                     "layer '{}' (ShowerFeatures): input expected (N,C,X,Y,Z) with C = 1 or 2, found {}", name(), src);
  return {src[0], shower_feature_count(src[4])};
}

TensorDesc ShowerFeatures::setup(const TensorDesc& src) {
  const Shape out = output_shape(src.shape);
  MPIGAN_CHECK(src.canonical(), "layer '{}' (ShowerFeatures): canonical input expected, got {}", name(),
               src.to_string());
  m_src_desc = src;
  ensure(m_dst, {out, nullptr});
  return m_dst.desc();
}

const Tensor& ShowerFeatures::forward(const Tensor& src, const ForwardContext&) {
  check_input(src, m_src_desc);
  m_src = src;
  const Tensor host = on_host(src, backend());
  const Shape& s = src.shape();
  const std::int64_t n = s[0], item = s.item_numel(), F = shower_feature_count(s[4]);
  Tensor out = host_buffer(m_dst, m_host);
#pragma omp parallel
  {
    std::vector<double> f(static_cast<std::size_t>(F));
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      shower_features(host.data() + i * item, s[1], s.spatial(), m_power, f.data());
      for (std::int64_t k = 0; k < F; ++k) out.data()[i * F + k] = static_cast<float>(f[k]);
    }
  }
  copy_back(out, m_dst, backend());
  return m_dst;
}

void ShowerFeatures::backward(const Tensor& diff_dst, Tensor& diff_src, const BackwardContext& ctx) {
  if (!ctx.need_diff_src) return;
  const Tensor host = on_host(m_src, backend());
  const Tensor gy = on_host(diff_dst, backend());
  const Shape& s = m_src.shape();
  const std::int64_t n = s[0], item = s.item_numel(), F = shower_feature_count(s[4]);
  Tensor scratch;
  Tensor out = host_buffer(diff_src, scratch);
#pragma omp parallel
  {
    std::vector<double> f(static_cast<std::size_t>(F));
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < n; ++i)
      shower_features(host.data() + i * item, s[1], s.spatial(), m_power, f.data(), gy.data() + i * F,
                      out.data() + i * item);
  }
  copy_back(out, diff_src, backend());
}

}  // namespace mpigan::nn
