// Dataset indexing, unit resolution and the train/validation split (see dataset.hpp).
#include "mpigan/data/dataset.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/data/file_list.hpp"
#include "mpigan/data/parallel.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace mpigan::data {
namespace {

constexpr std::int64_t kUnitProbeEvents = 32;

// Resolves the units of one file: explicit, or detected from its first events.
std::pair<Units, std::string> resolve_units(const EventFile& f, Units requested) {
  if (requested != Units::automatic) return {requested, "explicit"};
  const std::int64_t n = std::min(kUnitProbeEvents, f.events());
  std::vector<float> cells(static_cast<std::size_t>(n * f.cells()));
  f.read_events(0, n, cells);
  std::vector<double> ratios;
  for (std::int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (std::int64_t c = 0; c < f.cells(); ++c) s += cells[static_cast<std::size_t>(i * f.cells() + c)];
    ratios.push_back(s / f.energy()[static_cast<std::size_t>(i)]);
  }
  const UnitsGuess g = guess_units(ratios);
  if (!g.units) {
    MPIGAN_THROW(DataError, "data file '{}', dataset 'ECAL': cannot tell the units: {}; set units to gev or gev_x50",
                 f.path(), g.explain());
  }
  return {*g.units, "auto: " + g.explain()};
}

}  // namespace

Dataset::Dataset(std::string name, std::vector<Part> parts, Geometry geometry, Preprocess preprocess, int scan_threads,
                 std::int64_t max_events)
    : m_name(std::move(name)), m_geometry(geometry), m_preprocess(std::move(preprocess)) {
  const Preprocess& pp = m_preprocess;
  MPIGAN_CHECK(pp.model_units != Units::automatic, "dataset '{}': the model's units must be gev or gev_x50", m_name);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const Part& part = parts[i];
    const double factor = unit_factor(part.units, pp.model_units);
    m_factor.push_back(factor);
    FileUse use{part.file, part.units, part.units_reason, part.id_offset, 0, 0};
    std::vector<double> sums;
    if (pp.min_ecal_sum > 0) {
      const std::int64_t n = part.end - part.begin;
      sums.resize(static_cast<std::size_t>(n));
      if (part.file->stored_sum()) {
        // The file's `sum` is the raw sum in file units; the cut is on the sum after conversion and
        // xscale. The threshold is not applied to it (0 in the angle model); load() verifies.
        for (std::int64_t j = 0; j < n; ++j) {
          sums[static_cast<std::size_t>(j)] =
              (*part.file->stored_sum())[static_cast<std::size_t>(part.begin + j)] * factor * pp.xscale;
        }
      } else {
        spdlog::info("dataset '{}': scanning {} events of '{}' for the ECAL-sum cut (the file has no 'sum' dataset)",
                     m_name, n, part.file->path());
        parallel_for(n, resolve_threads(scan_threads), [&](std::int64_t j) {
          thread_local std::vector<float> scratch;
          scratch.resize(static_cast<std::size_t>(part.file->cells()));
          sums[static_cast<std::size_t>(j)] = scan_sum(part, part.begin + j, scratch);
        });
      }
    }
    for (std::int64_t e = part.begin; e < part.end; ++e) {
      if (max_events > 0 && static_cast<std::int64_t>(m_refs.size()) >= max_events) break;
      if (pp.min_ecal_sum > 0 && !(sums[static_cast<std::size_t>(e - part.begin)] > pp.min_ecal_sum)) {
        ++use.dropped;
        continue;
      }
      m_refs.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(e)});
      ++use.used;
    }
    if (use.dropped > 0) {
      spdlog::info("dataset '{}': file '{}': dropped {} of {} events with ECAL sum <= {:g} (model units, after xscale)",
                   m_name, part.file->path(), use.dropped, part.end - part.begin, pp.min_ecal_sum);
    }
    m_dropped += use.dropped;
    m_files.push_back(std::move(use));
  }
  if (m_refs.empty()) {
    MPIGAN_THROW(DataError, "dataset '{}': no events left ({} files, {} dropped by the ECAL-sum cut <= {:g})", m_name,
                 m_files.size(), m_dropped, pp.min_ecal_sum);
  }
  spdlog::info("dataset '{}': {} events from {} files, geometry {}, {}{}", m_name, m_refs.size(), m_files.size(),
               to_string(m_geometry), pp.describe(),
               m_dropped > 0 ? fmt::format(", {} events dropped by the ECAL-sum cut", m_dropped) : std::string());
}

double Dataset::scan_sum(const Part& part, std::int64_t index, std::span<float> scratch) const {
  part.file->read_event(index, scratch);
  return preprocess_cells(scratch, unit_factor(part.units, m_preprocess.model_units), m_preprocess);
}

std::uint64_t Dataset::event_id(std::int64_t k) const {
  const EventRef r = ref(k);
  return m_files[r.file].id_offset + r.index;
}

float Dataset::energy(std::int64_t k) const {
  const EventRef r = ref(k);
  return m_files[r.file].file->energy()[r.index];
}

float Dataset::angle(std::int64_t k) const {
  const EventRef r = ref(k);
  const auto& a = m_files[r.file].file->angle();
  MPIGAN_CHECK(!a.empty(), "dataset '{}': no angle label (geometry {})", m_name, to_string(m_geometry));
  return a[r.index];
}

double Dataset::load(std::int64_t k, std::span<float> cells) const {
  const EventRef r = ref(k);
  const FileUse& use = m_files[r.file];
  use.file->read_event(r.index, cells);
  const double sum = preprocess_cells(cells, m_factor[r.file], m_preprocess);
  if (m_preprocess.min_ecal_sum > 0 && !(sum > m_preprocess.min_ecal_sum)) {
    MPIGAN_THROW(DataError,
                 "data file '{}', dataset 'ECAL', event {}: ECAL sum {:g} (model units) is <= the cut {:g}, but the "
                 "index kept the event (the file's 'sum' dataset disagrees with the image)",
                 use.file->path(), r.index, sum, m_preprocess.min_ecal_sum);
  }
  apply_power(cells, m_preprocess.power);
  return sum;
}

namespace {

/// Cross-validation (DatasetSpec::folds): fold `spec.fold` of the training parts becomes the
/// validation set, the other folds train. Fold f of n items is [f*n/K, (f+1)*n/K).
void apply_fold(const DatasetSpec& spec, std::vector<Dataset::Part>& train, std::vector<Dataset::Part>& val) {
  const std::int64_t k = spec.folds, f = spec.fold;
  std::vector<Dataset::Part> keep, held;
  if (spec.split == SplitMode::files) {
    const auto n = static_cast<std::int64_t>(train.size());
    if (n < k)
      MPIGAN_THROW(ConfigError,
                   "data.cross_validation: {} folds by files need at least {} training files, found {}; use "
                   "data.split: events",
                   k, k, n);
    for (std::int64_t i = 0; i < n; ++i)
      (i >= f * n / k && i < (f + 1) * n / k ? held : keep).push_back(train[static_cast<std::size_t>(i)]);
  } else {
    for (const Dataset::Part& p : train) {
      const std::int64_t n = p.end - p.begin, lo = p.begin + f * n / k, hi = p.begin + (f + 1) * n / k;
      Dataset::Part before = p, fold = p, after = p;
      before.end = lo;
      fold.begin = lo;
      fold.end = hi;
      after.begin = hi;
      for (Dataset::Part* q : {&before, &after})
        if (q->end > q->begin) keep.push_back(*q);
      if (hi > lo) held.push_back(fold);
    }
  }
  if (keep.empty() || held.empty())
    MPIGAN_THROW(ConfigError, "data.cross_validation: fold {} of {} leaves {} (too few training events)", f, k,
                 keep.empty() ? "no training events" : "no held-out events");
  train = std::move(keep);
  val = std::move(held);
}

/// data.validation_fraction of the training files (split: files, the last ones) or of each file's
/// events (split: events, the last ones of each) moved to validation.
void split_validation(const DatasetSpec& spec, std::vector<Dataset::Part>& train_parts,
                      std::vector<Dataset::Part>& val_parts) {
  if (spec.split == SplitMode::files) {
    const auto nfiles = static_cast<std::int64_t>(train_parts.size());
    const auto nval = std::max<std::int64_t>(1, std::llround(spec.validation_fraction * static_cast<double>(nfiles)));
    if (nval >= nfiles) {
      MPIGAN_THROW(ConfigError,
                   "data: validation_fraction {} by files leaves no training file ({} files); use split: events or "
                   "more files",
                   spec.validation_fraction, nfiles);
    }
    val_parts.assign(train_parts.end() - nval, train_parts.end());
    train_parts.resize(static_cast<std::size_t>(nfiles - nval));
  } else {
    for (auto& part : train_parts) {
      const std::int64_t n = part.end - part.begin;
      const std::int64_t nval = std::llround(spec.validation_fraction * static_cast<double>(n));
      if (nval == 0) continue;
      Dataset::Part v = part;
      v.begin = part.end - nval;
      part.end = v.begin;
      val_parts.push_back(v);
    }
  }
}

}  // namespace

Datasets open_datasets(const DatasetSpec& spec) {
  std::vector<std::string> problems;
  if (spec.train_files.empty()) problems.push_back("data: no training files given");
  if (spec.validation_fraction < 0.0 || spec.validation_fraction >= 1.0) {
    problems.push_back(fmt::format("data: validation_fraction {} must be in [0, 1)", spec.validation_fraction));
  }
  if (spec.preprocess.model_units == Units::automatic)
    problems.push_back("data: preprocess model units must be gev or gev_x50");
  if (spec.geometry == Geometry::ecal51 && spec.preprocess.angle_key.empty())
    problems.push_back("data: ecal51 needs an angle_key");
  MPIGAN_CHECK_PROBLEMS(problems);

  // A pattern that matches nothing is named with the experiment key it came from.
  const auto expand = [](const std::vector<std::string>& entries, const char* key) {
    try {
      return expand_file_list(entries);
    } catch (const DataError& e) {
      MPIGAN_THROW(DataError, "{}: {} (relative paths are from the working directory)", key, e.message());
    }
  };
  const std::vector<std::string> train_paths = expand(spec.train_files, "data.train");
  const std::vector<std::string> val_paths = expand(spec.validation_files, "data.validation");
  {
    std::vector<std::string> all = train_paths;
    all.insert(all.end(), val_paths.begin(), val_paths.end());
    expand_file_list(all);  // throws when a file is both a training and a validation file
  }
  const std::string angle_key = spec.geometry == Geometry::ecal51 ? spec.preprocess.angle_key : "";

  // Open and validate every file; ids run over train files then validation files.
  std::vector<Dataset::Part> train_parts, val_parts;
  std::uint64_t offset = 0;
  auto open_parts = [&](const std::vector<std::string>& paths, std::vector<Dataset::Part>& parts) {
    for (const auto& p : paths) {
      std::shared_ptr<const EventFile> f = EventFile::open(p, spec.geometry, angle_key);
      auto [units, reason] = resolve_units(*f, spec.units);
      if (spec.units == Units::automatic) spdlog::info("data file '{}': units {}", p, reason);
      parts.push_back({f, units, reason, offset, 0, f->events()});
      if (f->events_per_chunk() > 1) {
        spdlog::warn(
            "data file '{}': ECAL chunks hold {} events; shuffled reads decompress a whole chunk per event "
            "(h5repack -l ECAL:CHUNK=1x{}x{}x{} makes them one event each)",
            p, f->events_per_chunk(), f->ecal_info().dims[1], f->ecal_info().dims[2], f->ecal_info().dims[3]);
      }
      offset += static_cast<std::uint64_t>(f->events());
    }
  };
  open_parts(train_paths, train_parts);
  open_parts(val_paths, val_parts);

  if (val_parts.empty() && spec.validation_fraction > 0.0) split_validation(spec, train_parts, val_parts);
  if (spec.folds >= 2) apply_fold(spec, train_parts, val_parts);
  Datasets out;
  out.train = std::make_shared<Dataset>("train", train_parts, spec.geometry, spec.preprocess, spec.scan_threads,
                                        spec.max_events);
  if (!val_parts.empty()) {
    out.validation =
        std::make_shared<Dataset>("validation", val_parts, spec.geometry, spec.preprocess, spec.scan_threads);
  }
  return out;
}

}  // namespace mpigan::data
