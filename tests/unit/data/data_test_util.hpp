// Helpers for the data tests: a temporary directory and writers of small, real HDF5 files in the
// 3DGAN layouts (and broken variants), written with the plain HDF5 C API, independent of the
// EventWriter under test.
//
// Test events: cell k of event i (k = ((x*Y)+y)*Z+z) holds base * (k % 7 + 1) / S, with S the sum
// of (k % 7 + 1) over the event, so sum(ECAL) = base exactly (up to rounding); base = 0.02 E for
// raw GeV files and E for GeV x 50 files. Cell 0 is set to tiny (1e-8 GeV equivalent) so the
// fixed model's threshold has something to cut.
#pragma once

#include "mpigan/data/layout.hpp"

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace mpigan::data::test {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "mpigan-data-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    m_path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(m_path, ec);
  }
  std::string file(const std::string& name) const { return (m_path / name).string(); }
  const std::filesystem::path& path() const { return m_path; }

 private:
  std::filesystem::path m_path;
};

/// Writes dataset @p name into @p path (created if missing, else opened read-write).
inline void write_raw(const std::string& path, const std::string& name, const std::vector<hsize_t>& dims,
                      const std::vector<double>& values, hid_t file_type = H5T_IEEE_F32LE,
                      const std::vector<hsize_t>& chunk = {}, int gzip = -1) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  hid_t file = std::filesystem::exists(path) ? H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)
                                             : H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) throw std::runtime_error("write_raw: cannot open " + path);
  hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (!chunk.empty()) H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
  if (gzip >= 0) H5Pset_deflate(dcpl, static_cast<unsigned>(gzip));
  hid_t dset = H5Dcreate2(file, name.c_str(), file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  if (dset < 0) throw std::runtime_error("write_raw: cannot create " + name);
  if (!values.empty() && H5Dwrite(dset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) < 0) {
    throw std::runtime_error("write_raw: cannot write " + name);
  }
  H5Dclose(dset);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(file);
}

/// The test pattern (see the header comment): ECAL values of event i with energy e.
inline std::vector<double> pattern_event(double base, std::int64_t cells) {
  double s = 0;
  for (std::int64_t k = 0; k < cells; ++k) s += static_cast<double>(k % 7 + 1);
  std::vector<double> v(static_cast<std::size_t>(cells));
  for (std::int64_t k = 0; k < cells; ++k) v[static_cast<std::size_t>(k)] = base * static_cast<double>(k % 7 + 1) / s;
  return v;
}

struct FileSpec {
  Geometry geometry = Geometry::ecal25;
  std::int64_t events = 10;
  bool x50 = false;  ///< GeV x 50 cells (else raw GeV)
  hid_t dtype = H5T_IEEE_F32LE;
  std::string energy_key = "energy";  ///< "energy" or "target"
  std::int64_t chunk_events = 1;      ///< 0 = contiguous
  int gzip = 4;
  double energy0 = 10.0;    ///< event i has energy energy0 + 10 i GeV
  bool with_angles = true;  ///< theta/mtheta/eta for ecal51
  bool with_sum = false;
};

inline double test_energy(const FileSpec& s, std::int64_t i) {
  return s.energy0 + 10.0 * static_cast<double>(i);
}

/// Writes a valid file following @p s.
inline void write_file(const std::string& path, const FileSpec& s) {
  const Dims3 d = geometry_dims(s.geometry);
  const std::int64_t cells = d.product();
  std::vector<double> ecal;
  std::vector<double> energy, sums;
  for (std::int64_t i = 0; i < s.events; ++i) {
    const double e = test_energy(s, i);
    const double base = s.x50 ? e : 0.02 * e;
    auto v = pattern_event(base, cells);
    v[0] = s.x50 ? 5e-7 : 1e-8;
    double sum = 0;
    for (double x : v) sum += x;
    ecal.insert(ecal.end(), v.begin(), v.end());
    energy.push_back(e);
    sums.push_back(sum);
  }
  std::vector<hsize_t> dims = {static_cast<hsize_t>(s.events), static_cast<hsize_t>(d.d), static_cast<hsize_t>(d.h),
                               static_cast<hsize_t>(d.w)};
  std::vector<hsize_t> chunk;
  if (s.chunk_events > 0) chunk = {static_cast<hsize_t>(s.chunk_events), dims[1], dims[2], dims[3]};
  write_raw(path, "ECAL", dims, ecal, s.dtype, chunk, s.chunk_events > 0 ? s.gzip : -1);
  const hsize_t n = static_cast<hsize_t>(s.events);
  if (s.energy_key == "target") {
    std::vector<double> target;
    for (double e : energy) {
      target.push_back(11.0);  // column 0: the particle id in the old files
      target.push_back(e);
    }
    write_raw(path, "target", {n, 2}, target);
  } else {
    write_raw(path, "energy", {n}, energy);
  }
  if (s.geometry == Geometry::ecal51 && s.with_angles) {
    std::vector<double> theta, mtheta, eta;
    for (std::int64_t i = 0; i < s.events; ++i) {
      theta.push_back(1.2 + 0.01 * static_cast<double>(i));
      mtheta.push_back(1.25 + 0.01 * static_cast<double>(i));
      eta.push_back(0.1);
    }
    write_raw(path, "theta", {n}, theta);
    write_raw(path, "mtheta", {n}, mtheta);
    write_raw(path, "eta", {n}, eta);
  }
  if (s.with_sum) write_raw(path, "sum", {n}, sums);
}

}  // namespace mpigan::data::test
