// inspect_file: validate one data file completely and summarise it (`mpigan inspect FILE.h5`).
//
// Validation goes beyond EventFile::open: every ECAL event is read (so a non-finite cell or a
// damaged chunk anywhere is found and named), and the units are detected from all events.
#pragma once

#include "mpigan/data/event_file.hpp"
#include "mpigan/data/layout.hpp"

#include <optional>
#include <string>
#include <vector>

namespace mpigan::data {

struct LabelRange {
  std::string name;
  double min = 0, max = 0;
};

struct FileSummary {
  std::string path;
  Geometry geometry = Geometry::ecal25;
  std::int64_t events = 0;
  std::vector<h5::DatasetInfo> datasets;  ///< every dataset of the root group
  std::string energy_source;
  LabelRange energy;                ///< GeV
  std::vector<LabelRange> angles;   ///< theta, mtheta, eta when present (radians / none)
  UnitsGuess units;                 ///< from all events
  double sum_min = 0, sum_max = 0;  ///< sum of ECAL per event, file units
  double max_cell = 0;
  double nonzero_fraction = 0;  ///< cells > 0 over all cells
  bool direct_chunks = false;
  std::int64_t events_per_chunk = 0;
};

/// Opens, validates and scans @p path; throws DataError naming file/dataset/event on bad input.
/// @p max_events > 0 scans only the first max_events events (labels are always checked in full).
FileSummary inspect_file(const std::string& path, std::int64_t max_events = 0);
/// Human-readable multi-line summary.
std::string format_summary(const FileSummary& s);

}  // namespace mpigan::data
