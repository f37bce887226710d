// One 3DGAN data file, opened and validated: the ECAL images plus the per-event labels.
//
// Invariants after open():
//  - `ECAL` is a rank-4 floating-point dataset (N, x, y, depth) whose (x, y, depth) match the
//    geometry (given, or detected from the shape when none is given).
//  - The energy comes from `energy` (N,) or, in the old fixed-angle layout, `target` (N,2) column 1;
//    every energy is finite and > 0 (checked here, for all N events, naming the first bad event).
//  - When an angle key is requested, that dataset exists, has shape (N,) and is finite everywhere.
//  - Every label dataset has exactly N entries.
//  - ECAL cells are checked for non-finite values when they are read; a bad cell throws DataError
//    naming the file, `ECAL`, the event and the cell. Nothing is ever skipped silently.
//
// Reading: when ECAL is chunked one event per chunk with at most a deflate filter (the layout of
// the real files and of `mpigan simulate`), read_event() fetches the compressed chunk with
// H5Dread_chunk under the HDF5 lock and inflates it outside the lock, so several threads decode in
// parallel. Any other layout goes through an ordinary hyperslab H5Dread.
#pragma once

#include "mpigan/data/hdf5.hpp"
#include "mpigan/data/layout.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace mpigan::data {

class EventFile {
 public:
  /// Opens @p path and validates it (see the invariants). @p angle_key: "" when no angle is needed,
  /// else the dataset holding the angle label ("mtheta" or "theta").
  static std::unique_ptr<EventFile> open(const std::string& path, std::optional<Geometry> geometry,
                                         const std::string& angle_key = "");

  const std::string& path() const { return m_file.path(); }
  const h5::File& file() const { return m_file; }
  Geometry geometry() const { return m_geometry; }
  std::int64_t events() const { return m_events; }
  /// Cells per event (x * y * depth).
  std::int64_t cells() const { return m_cells; }
  const h5::DatasetInfo& ecal_info() const { return m_ecal_info; }
  /// "energy" or "target[:,1]".
  const std::string& energy_source() const { return m_energy_source; }
  /// Energies in GeV, one per event.
  const std::vector<float>& energy() const { return m_energy; }
  /// Angles in radians from the requested angle key (empty when none was requested).
  const std::vector<float>& angle() const { return m_angle; }
  const std::string& angle_key() const { return m_angle_key; }
  /// The file's `sum` dataset (ECAL sum in file units), when present and well-formed.
  const std::optional<std::vector<float>>& stored_sum() const { return m_sum; }
  /// True when events are read with direct chunk reads and parallel inflate.
  bool direct_chunks() const { return m_direct; }
  /// Events per ECAL chunk (0 when not chunked).
  std::int64_t events_per_chunk() const;

  /// Reads event @p index into @p dst (cells() floats, file units, file axis order). Thread-safe.
  /// Throws DataError naming file, dataset and event on read failure or an impossible cell (non-finite,
  /// negative, or more than the event's energy in any supported units).
  void read_event(std::int64_t index, std::span<float> dst) const;
  /// Reads events [begin, begin+count) into @p dst (count * cells() floats). Thread-safe.
  void read_events(std::int64_t begin, std::int64_t count, std::span<float> dst) const;

 private:
  EventFile() = default;
  void read_direct(std::int64_t index, std::span<float> dst) const;
  /// Every cell finite, >= 0 and within what the event's energy allows; throws DataError naming the
  /// file, event, cell and value.
  void check_cells(std::int64_t first_event, std::span<const float> cells) const;

  h5::File m_file;
  h5::Hid m_ecal;
  h5::DatasetInfo m_ecal_info;
  Geometry m_geometry = Geometry::ecal25;
  std::int64_t m_events = 0;
  std::int64_t m_cells = 0;
  bool m_direct = false;
  std::string m_energy_source;
  std::vector<float> m_energy;
  std::string m_angle_key;
  std::vector<float> m_angle;
  std::optional<std::vector<float>> m_sum;
};

}  // namespace mpigan::data
