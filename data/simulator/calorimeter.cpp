// The W/Si layer stack and its effective material constants (see calorimeter.hpp).
#include "mpigan/data/simulator/calorimeter.hpp"

#include "mpigan/core/error.hpp"

#include <algorithm>

namespace mpigan::data::sim {

Material tungsten() {
  return {3.504, 19.3, 7.97, 74.0, 1.145};
}
Material silicon() {
  return {93.7, 2.33, 40.19, 14.0, 1.664};
}

namespace {
// Visible fraction for a MIP: Si share of the ionisation loss in one layer.
double mip_fraction(double w_mm, double si_mm) {
  const Material w = tungsten(), si = silicon();
  const double lw = w.dedx_mip * w.density * w_mm, ls = si.dedx_mip * si.density * si_mm;
  return ls / (ls + lw);
}
}  // namespace

Calorimeter::Calorimeter(const CalorimeterConfig& c) : m_config(c) {
  MPIGAN_CHECK(c.thin_layers >= 1 && c.thick_layers >= 0 && c.thin_w_mm > 0 && c.thick_w_mm > 0 && c.si_mm > 0 &&
                   c.cell_mm > 0 && c.moliere_scale > 0,
               "calorimeter: invalid configuration ({} thin, {} thick layers, W {}/{} mm, Si {} mm, cell {} mm)",
               c.thin_layers, c.thick_layers, c.thin_w_mm, c.thick_w_mm, c.si_mm, c.cell_mm);
  MPIGAN_CHECK(c.thin_pitch_mm >= c.thin_w_mm + c.si_mm && c.thick_pitch_mm >= c.thick_w_mm + c.si_mm,
               "calorimeter: pitch {}/{} mm is smaller than W + Si", c.thin_pitch_mm, c.thick_pitch_mm);
  const Material w = tungsten(), si = silicon();
  // Mixing rules on one thin layer (GFlashSamplingShowerParameterisation::ComputeZAX0EFFetc).
  const double mw = c.thin_w_mm * w.density, ms = c.si_mm * si.density;
  const double fw = mw / (mw + ms), fs = ms / (mw + ms);
  m_z_eff = fw * w.z + fs * si.z;
  const double thick = c.thin_w_mm + c.si_mm;
  m_x0_eff_mm = thick / (c.thin_w_mm / w.x0_mm + c.si_mm / si.x0_mm);
  const double x0_eff_g = 1.0 / (fw / w.x0_gcm2() + fs / si.x0_gcm2());
  m_ec_eff_mev = x0_eff_g * (fw * w.ec_mev / w.x0_gcm2() + fs * si.ec_mev / si.x0_gcm2());
  m_ehat = 1.0 / (1.0 + 0.007 * (w.z - si.z));
  m_moliere_mm = c.moliere_scale * 21.2 * m_x0_eff_mm / m_ec_eff_mev * c.thin_pitch_mm / thick;

  double depth = 0, x0 = 0;
  auto add = [&](int n, double w_mm, double pitch) {
    // Material depth of a layer in radiation lengths: W plus Si (the readout gap holds none).
    const double size = w_mm / w.x0_mm + c.si_mm / si.x0_mm;
    for (int i = 0; i < n; ++i) {
      m_layers.push_back({depth, pitch, x0, size, m_ehat * mip_fraction(w_mm, c.si_mm)});
      depth += pitch;
      x0 += size;
    }
  };
  add(c.thin_layers, c.thin_w_mm, c.thin_pitch_mm);
  add(c.thick_layers, c.thick_w_mm, c.thick_pitch_mm);
}

// Both lookups use the two groups of equal layers (thin, then thick) directly: they run once per
// energy spot, tens of thousands of times per shower.
double Calorimeter::depth_of_x0(double t_x0) const {
  if (t_x0 <= 0) return 0;
  if (t_x0 >= total_x0()) return total_depth_mm();
  const int thin = m_config.thin_layers;
  const Layer& first = m_layers.front();
  int i;
  if (t_x0 < thin * first.x0_size) {
    i = static_cast<int>(t_x0 / first.x0_size);
  } else {
    const Layer& back = m_layers.back();
    i = thin +
        static_cast<int>((t_x0 - m_layers[static_cast<std::size_t>(thin) - 1].x0_begin - first.x0_size) / back.x0_size);
  }
  i = std::clamp(i, 0, num_layers() - 1);
  const Layer& l = m_layers[static_cast<std::size_t>(i)];
  return l.depth_mm + (t_x0 - l.x0_begin) / l.x0_size * l.pitch_mm;
}

int Calorimeter::layer_at_depth(double depth_mm) const {
  if (depth_mm < 0) return -1;
  if (depth_mm >= total_depth_mm()) return num_layers();
  const int thin = m_config.thin_layers;
  const double thin_end = thin * m_config.thin_pitch_mm;
  const int i = depth_mm < thin_end ? static_cast<int>(depth_mm / m_config.thin_pitch_mm)
                                    : thin + static_cast<int>((depth_mm - thin_end) / m_config.thick_pitch_mm);
  return std::min(i, num_layers() - 1);
}

std::string Calorimeter::describe() const {
  return fmt::format(
      "W/Si ECAL: {} x {} mm + {} x {} mm W, {} mm Si, pitch {}/{} mm, depth {:.1f} mm, {:.2f} X0; cells {} mm\n"
      "  X0_eff {:.3f} mm, Z_eff {:.2f}, E_c,eff {:.2f} MeV, e_hat {:.3f}, F_S^-1 {:.3f}/{:.3f}, R_M,eff {:.1f} mm\n"
      "  sampling fraction {:.3f} % (thin) / {:.3f} % (thick)",
      m_config.thin_layers, m_config.thin_w_mm, m_config.thick_layers, m_config.thick_w_mm, m_config.si_mm,
      m_config.thin_pitch_mm, m_config.thick_pitch_mm, total_depth_mm(), total_x0(), m_config.cell_mm, m_x0_eff_mm,
      m_z_eff, m_ec_eff_mev, m_ehat, m_layers.front().x0_size, m_layers.back().x0_size, m_moliere_mm,
      100 * m_layers.front().sampling_fraction, 100 * m_layers.back().sampling_fraction);
}

}  // namespace mpigan::data::sim
