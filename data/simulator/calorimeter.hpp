// The CLIC-like W/Si sampling ECAL that the 3DGAN data come from (docs/data.md):
// 17 layers of 2.4 mm W + 8 layers of 4.8 mm W, each followed by 0.5 mm Si and readout, at a pitch
// of 5.6 mm / 8.0 mm (159 mm from r = 1500 to 1659 mm), read out in 5.1 x 5.1 mm^2 Si pads.
//
// Derived (GFlash mixing rules for a W+Si sampling structure; the readout gap holds no X0):
//   mass fractions w_W, w_Si of one thin layer; Z_eff = sum w_i Z_i
//   X0_eff (mm)  = (d_W + d_Si) / (d_W/X0_W + d_Si/X0_Si)                       ~ 4.20 mm
//   E_c,eff      = X0_eff[g/cm2] * sum w_i E_c,i / X0_i[g/cm2]                  ~ 8.2 MeV
//   F_S^-1       = (d_W + d_Si) / X0_eff  (layer thickness in X0)              0.69 thin, 1.38 thick
//   e_hat        = 1 / (1 + 0.007 (Z_W - Z_Si))                                 ~ 0.704 (e/mip)
//   f_mip        = (dE/dx rho d)_Si / sum_i (dE/dx rho d)_i                     3.5 % thin, 1.8 % thick
//   SF_layer     = e_hat * f_mip                                                2.48 % thin, 1.26 % thick
//   R_M,eff      = 21.2 MeV * X0_eff / E_c,eff * pitch_thin / (d_W + d_Si)       ~ 21 mm (the readout
//                  gaps spread the shower laterally)
// Invariants: layers are ordered front to back; depth_mm and x0 of layer i+1 start where layer i
// ends; every layer has SF in (0, 1).
#pragma once

#include <string>
#include <vector>

namespace mpigan::data::sim {

struct Material {
  double x0_mm;     ///< radiation length
  double density;   ///< g/cm3
  double ec_mev;    ///< critical energy
  double z;         ///< atomic number
  double dedx_mip;  ///< minimum ionisation, MeV cm2/g
  double x0_gcm2() const { return x0_mm * 0.1 * density; }
};
Material tungsten();  ///< PDG: X0 3.504 mm, rho 19.3, E_c 7.97 MeV, Z 74, dE/dx 1.145
Material silicon();   ///< PDG: X0 93.7 mm, rho 2.33, E_c 40.19 MeV, Z 14, dE/dx 1.664

struct CalorimeterConfig {
  int thin_layers = 17;
  int thick_layers = 8;
  double thin_w_mm = 2.4;
  double thick_w_mm = 4.8;
  double si_mm = 0.5;
  double thin_pitch_mm = 5.6;  ///< W + Si + readout gap
  double thick_pitch_mm = 8.0;
  double cell_mm = 5.1;        ///< Si pad size (x and y)
  double moliere_scale = 1.0;  ///< multiplies the derived R_M,eff (tuning knob)
};

struct Layer {
  double depth_mm = 0;  ///< front face, from the calorimeter front
  double pitch_mm = 0;
  double x0_begin = 0;  ///< material depth of the front face, in X0_eff
  double x0_size = 0;   ///< F_S^-1 of this layer
  double sampling_fraction = 0;
};

class Calorimeter {
 public:
  explicit Calorimeter(const CalorimeterConfig& config = {});

  const CalorimeterConfig& config() const { return m_config; }
  const std::vector<Layer>& layers() const { return m_layers; }
  int num_layers() const { return static_cast<int>(m_layers.size()); }
  double cell_mm() const { return m_config.cell_mm; }

  double x0_eff_mm() const { return m_x0_eff_mm; }
  double z_eff() const { return m_z_eff; }
  double ec_eff_mev() const { return m_ec_eff_mev; }
  double ehat() const { return m_ehat; }
  /// F_S^-1 of the thin layers (used by the GFlash parameters: the shower develops there).
  double fs_inv() const { return m_layers.front().x0_size; }
  double moliere_mm() const { return m_moliere_mm; }
  double total_x0() const { return m_layers.back().x0_begin + m_layers.back().x0_size; }
  double total_depth_mm() const { return m_layers.back().depth_mm + m_layers.back().pitch_mm; }

  /// Physical depth (mm) of material depth @p t_x0 along the normal (linear inside a layer).
  /// Returns total_depth_mm() for t_x0 >= total_x0().
  double depth_of_x0(double t_x0) const;
  /// Layer holding physical depth @p depth_mm; -1 in front, num_layers() behind.
  int layer_at_depth(double depth_mm) const;

  /// Multi-line description with the derived values.
  std::string describe() const;

 private:
  CalorimeterConfig m_config;
  std::vector<Layer> m_layers;
  double m_x0_eff_mm = 0, m_z_eff = 0, m_ec_eff_mev = 0, m_ehat = 0, m_moliere_mm = 0;
};

}  // namespace mpigan::data::sim
