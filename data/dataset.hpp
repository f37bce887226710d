// Datasets: a validated, indexed set of events from 3DGAN files, with the train/validation split.
//
// Invariants of an open Dataset:
//  - Every file was opened and validated (EventFile): shapes, lengths, dtypes, finite energies
//    > 0, finite angles. Opening throws DataError on the first bad file, naming it.
//  - Each file's units are resolved (explicit, or detected by `auto` from sum(ECAL)/E over its
//    first events and logged); conversion to the model's units happens in load().
//  - Events are indexed 0..size()-1 in file order. event_id(k) is the event's index in the
//    concatenation of all files of the DatasetSpec (train files, then validation files), so train
//    and validation ids never collide and an id names one event of one file for good.
//  - The angle model's cut (Preprocess::min_ecal_sum) is applied here, when indexing: dropped events
//    are counted per file and logged, and never reach a batch. The per-event sum comes from the
//    file's `sum` dataset when present, else from a scan of the images.
//  - A Dataset is immutable after open and safe to read from several threads.
#pragma once

#include "mpigan/data/event_file.hpp"
#include "mpigan/data/layout.hpp"
#include "mpigan/data/preprocess.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace mpigan::data {

enum class SplitMode { files, events };

struct DatasetSpec {
  std::vector<std::string> train_files;       ///< paths, globs, or @listfile
  std::vector<std::string> validation_files;  ///< explicit validation files (then no fraction split)
  double validation_fraction = 0.0;           ///< used when validation_files is empty
  SplitMode split = SplitMode::files;         ///< files: the last files; events: the last events of each file
  /// K-fold cross-validation (folds >= 2): the training set (what remains after the validation
  /// split) is cut into `folds` parts, by files or by events of each file as `split` says; part
  /// `fold` is the validation set and the others train. The configured validation set is then
  /// not used at all: it stays the untouched test set of a hyper-parameter search.
  int folds = 0;
  int fold = 0;
  Geometry geometry = Geometry::ecal25;
  Units units = Units::automatic;
  Preprocess preprocess = preprocess_3dgan();
  std::int64_t max_events = 0;  ///< > 0: keep only the first max_events training events (quick runs)
  int scan_threads = 0;         ///< threads for image scans (min_ecal_sum without `sum`); 0 = hardware
};

/// Where one event lives.
struct EventRef {
  std::uint32_t file = 0;   ///< index into Dataset::files()
  std::uint32_t index = 0;  ///< event index inside that file
};

/// Per-file bookkeeping reported by a Dataset.
struct FileUse {
  std::shared_ptr<const EventFile> file;
  Units units = Units::gev;     ///< resolved units of the file's cells
  std::string units_reason;     ///< "explicit" or the detector's explanation
  std::uint64_t id_offset = 0;  ///< event_id of the file's event 0
  std::int64_t used = 0;        ///< events of this file in this dataset
  std::int64_t dropped = 0;     ///< events removed by min_ecal_sum
};

class Dataset {
 public:
  /// One dataset from explicit file ranges. @p ranges[i] = events [begin, end) of files[i] to use.
  struct Part {
    std::shared_ptr<const EventFile> file;
    Units units;
    std::string units_reason;
    std::uint64_t id_offset;
    std::int64_t begin, end;
  };
  Dataset(std::string name, std::vector<Part> parts, Geometry geometry, Preprocess preprocess, int scan_threads,
          std::int64_t max_events = 0);

  const std::string& name() const { return m_name; }
  std::int64_t size() const { return static_cast<std::int64_t>(m_refs.size()); }
  Geometry geometry() const { return m_geometry; }
  Dims3 dims() const { return geometry_dims(m_geometry); }
  std::int64_t cells() const { return dims().product(); }
  const Preprocess& preprocess() const { return m_preprocess; }
  bool has_angle() const { return m_geometry == Geometry::ecal51; }
  const std::vector<FileUse>& files() const { return m_files; }
  std::int64_t dropped() const { return m_dropped; }

  EventRef ref(std::int64_t k) const { return m_refs[static_cast<std::size_t>(k)]; }
  std::uint64_t event_id(std::int64_t k) const;
  /// Energy in GeV of event k.
  float energy(std::int64_t k) const;
  /// Angle label (radians) of event k; ecal51 only.
  float angle(std::int64_t k) const;

  /// Reads event k and preprocesses it into @p cells (cells() floats, tensor order = file order);
  /// returns the ECAL-sum target. Thread-safe. Throws DataError naming file, dataset and event.
  double load(std::int64_t k, std::span<float> cells) const;

 private:
  double scan_sum(const Part& part, std::int64_t index, std::span<float> scratch) const;

  std::string m_name;
  Geometry m_geometry;
  Preprocess m_preprocess;
  std::vector<FileUse> m_files;
  std::vector<double> m_factor;  ///< per file: file units -> model units
  std::vector<EventRef> m_refs;
  std::int64_t m_dropped = 0;
};

struct Datasets {
  std::shared_ptr<const Dataset> train;
  std::shared_ptr<const Dataset> validation;  ///< null when there is no validation set
};

/// Expands the file lists, opens and validates every file, resolves units, splits, indexes.
/// Throws DataError (bad files) or ConfigError (bad spec).
Datasets open_datasets(const DatasetSpec& spec);

}  // namespace mpigan::data
