// A validation report of generated showers against reference (Monte Carlo) showers, written to a
// directory: report.json (every metric, the figure of merit, the options), CSV tables (separation
// powers per observable x bin with their floors; sampling fraction, 3DGAN metric per bin; mean
// profiles per bin; the distributions the plots draw), which scripts/plot_validation.py turns into
// the PNG plots a calorimeter physicist expects (docs/physics.md). The entry point of
// `mpigan validate`.
#pragma once

#include "mpigan/physics/compare.hpp"

#include <string>

namespace mpigan::physics {

/// The showers, energies (GeV) and angles (rad) of a data file as Observables. Cells in GeV x 50
/// (the 51x51x25 files) are read with cell_scale 1/50; @p max_events > 0 reads only the first ones.
Observables read_observables(const std::string& path, std::int64_t max_events = 0);

struct ReportSummary {
  Comparison comparison;
  std::string json_path;
};

/// Compares the two files and writes DIR/report.json and DIR/*.csv.
ReportSummary write_report(const std::string& generated, const std::string& reference, const std::string& dir,
                           const CompareOptions& options = {}, std::int64_t max_events = 0);

}  // namespace mpigan::physics
