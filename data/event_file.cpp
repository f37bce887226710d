// EventFile: validation of one data file and event reads (see event_file.hpp).
#include "mpigan/data/event_file.hpp"

#include <zlib.h>

#include <cmath>
#include <cstring>

namespace mpigan::data {
namespace {

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "'" : ", '") + n + "'";
  return s.empty() ? "none" : s;
}

// Reads a label dataset of shape (N,) (or column @p column of (N, k)) as floats, checking the
// shape, the length and finiteness.
std::vector<float> read_label(const h5::File& file, const std::string& name, std::int64_t events, int column,
                              int columns) {
  const h5::DatasetInfo info = file.info(name);
  const bool ok_shape = columns == 0 ? info.dims.size() == 1 : info.dims.size() == 2 && info.dims[1] >= columns;
  if (!ok_shape) {
    MPIGAN_THROW(DataError, "data file '{}', dataset '{}': expected shape {}, found {}", file.path(), name,
                 columns == 0 ? std::string("(N,)") : fmt::format("(N,{})", columns), info.shape_string());
  }
  if (info.dims[0] != events) {
    MPIGAN_THROW(DataError, "data file '{}': dataset '{}' has {} entries but 'ECAL' has {} events", file.path(), name,
                 info.dims[0], events);
  }
  if (!info.type.is_float() && info.type.cls != H5T_INTEGER) {
    MPIGAN_THROW(DataError, "data file '{}', dataset '{}': expected a numeric type, found {}", file.path(), name,
                 info.type.name());
  }
  const std::vector<double> all = file.read_all(name);
  const std::int64_t stride = columns == 0 ? 1 : info.dims[1];
  std::vector<float> out(static_cast<std::size_t>(events));
  for (std::int64_t i = 0; i < events; ++i) {
    const double v = all[static_cast<std::size_t>(i * stride + column)];
    if (!std::isfinite(v)) {
      MPIGAN_THROW(DataError, "data file '{}', dataset '{}', event {}: value {} is not finite", file.path(), name, i,
                   v);
    }
    out[static_cast<std::size_t>(i)] = static_cast<float>(v);
  }
  return out;
}

}  // namespace

std::unique_ptr<EventFile> EventFile::open(const std::string& path, std::optional<Geometry> geometry,
                                           const std::string& angle_key) {
  std::unique_ptr<EventFile> f(new EventFile());
  f->m_file = h5::File::open_read(path);
  if (!f->m_file.has(keys::ecal)) {
    MPIGAN_THROW(DataError, "data file '{}': dataset 'ECAL' is missing (datasets present: {})", path,
                 join(f->m_file.names()));
  }
  {
    h5::Lock lock;
    f->m_ecal = h5::open_dataset(f->m_file, keys::ecal);
    f->m_ecal_info = h5::dataset_info(f->m_ecal.get(), keys::ecal, path);
  }
  const h5::DatasetInfo& ecal = f->m_ecal_info;
  if (ecal.dims.size() != 4) {
    MPIGAN_THROW(DataError,
                 "data file '{}', dataset 'ECAL': expected rank 4 (N, x, y, depth), found rank {} with shape {}", path,
                 ecal.dims.size(), ecal.shape_string());
  }
  const std::optional<Geometry> found = geometry_from_ecal_dims(ecal.dims);
  if (geometry) {
    const Dims3 want = geometry_dims(*geometry);
    if (found != geometry) {
      MPIGAN_THROW(DataError, "data file '{}', dataset 'ECAL': expected shape (N,{},{},{}) for geometry {}, found {}",
                   path, want.d, want.h, want.w, to_string(*geometry), ecal.shape_string());
    }
  } else if (!found) {
    MPIGAN_THROW(DataError, "data file '{}', dataset 'ECAL': shape {} is neither (N,25,25,25) nor (N,51,51,25)", path,
                 ecal.shape_string());
  }
  f->m_geometry = *found;
  if (!ecal.type.is_float() || (ecal.type.size != 4 && ecal.type.size != 8)) {
    MPIGAN_THROW(DataError, "data file '{}', dataset 'ECAL': expected float32 or float64 cells, found {}", path,
                 ecal.type.name());
  }
  f->m_events = ecal.dims[0];
  f->m_cells = ecal.dims[1] * ecal.dims[2] * ecal.dims[3];
  if (f->m_events <= 0)
    MPIGAN_THROW(DataError, "data file '{}', dataset 'ECAL': holds no events (shape {})", path, ecal.shape_string());

  // Direct chunk reads: one event per chunk, no filter or deflate only, little-endian floats.
  const bool one_event_chunks = ecal.chunk.size() == 4 && ecal.chunk[0] == 1 && ecal.chunk[1] == ecal.dims[1] &&
                                ecal.chunk[2] == ecal.dims[2] && ecal.chunk[3] == ecal.dims[3];
  const bool simple_filters =
      ecal.filters.empty() || (ecal.filters.size() == 1 && ecal.filters[0] == H5Z_FILTER_DEFLATE);
  f->m_direct = one_event_chunks && simple_filters && ecal.type.little_endian;

  // Energy: `energy` (N,) preferred, else `target` (N,2) column 1.
  if (f->m_file.has(keys::energy)) {
    f->m_energy_source = keys::energy;
    f->m_energy = read_label(f->m_file, keys::energy, f->m_events, 0, 0);
  } else if (f->m_file.has(keys::target)) {
    f->m_energy_source = "target[:,1]";
    f->m_energy = read_label(f->m_file, keys::target, f->m_events, 1, 2);
  } else {
    MPIGAN_THROW(DataError,
                 "data file '{}': has neither dataset 'energy' (N,) nor 'target' (N,2) (datasets present: {})", path,
                 join(f->m_file.names()));
  }
  for (std::int64_t i = 0; i < f->m_events; ++i) {
    const float e = f->m_energy[static_cast<std::size_t>(i)];
    if (!(e > 0.0f)) {
      MPIGAN_THROW(DataError, "data file '{}', dataset '{}', event {}: energy {} GeV, expected > 0", path,
                   f->m_energy_source, i, e);
    }
  }
  if (!angle_key.empty()) {
    if (!f->m_file.has(angle_key)) {
      MPIGAN_THROW(DataError,
                   "data file '{}': angle dataset '{}' is missing (datasets present: {}); set the angle key "
                   "to one that exists ('mtheta' or 'theta')",
                   path, angle_key, join(f->m_file.names()));
    }
    f->m_angle_key = angle_key;
    f->m_angle = read_label(f->m_file, angle_key, f->m_events, 0, 0);
  }
  if (f->m_file.has(keys::sum)) f->m_sum = read_label(f->m_file, keys::sum, f->m_events, 0, 0);
  return f;
}

std::int64_t EventFile::events_per_chunk() const {
  return m_ecal_info.chunk.empty() ? 0 : m_ecal_info.chunk[0];
}

void EventFile::check_cells(std::int64_t first_event, std::span<const float> cells) const {
  const auto& d = m_ecal_info.dims;
  const auto where = [&](std::size_t k) {
    const auto cell = static_cast<std::int64_t>(k) % m_cells;
    return fmt::format("data file '{}', dataset 'ECAL', event {}: cell ({},{},{})", path(),
                       first_event + static_cast<std::int64_t>(k) / m_cells, cell / (d[2] * d[3]), (cell / d[3]) % d[2],
                       cell % d[3]);
  };
  const auto per_event = static_cast<std::size_t>(m_cells);
  for (std::size_t first = 0; first < cells.size(); first += per_event) {
    // No cell can hold more than the primary's energy: E in GeV, 50 E in GeV x 50, the largest
    // supported units. Twice that is impossible whatever the units.
    const double energy = m_energy[static_cast<std::size_t>(first_event) + first / per_event];
    const auto limit = static_cast<float>(2.0 * kX50 * energy);
    for (std::size_t k = first; k < first + per_event; ++k) {
      const float c = cells[k];
      if (c >= 0.0f && c <= limit) [[likely]]
        continue;
      if (!std::isfinite(c)) MPIGAN_THROW(DataError, "{} is {} (non-finite)", where(k), c);
      if (c < 0.0f) MPIGAN_THROW(DataError, "{} is {}: a deposited energy, expected >= 0", where(k), c);
      MPIGAN_THROW(DataError,
                   "{} is {:.4g}, impossible for an event of {:.4g} GeV (a cell holds at most the primary's energy: "
                   "{:.4g} in GeV, {:.4g} in GeV x 50)",
                   where(k), c, energy, energy, kX50 * energy);
    }
  }
}

void EventFile::read_direct(std::int64_t index, std::span<float> dst) const {
  thread_local std::vector<unsigned char> compressed;
  thread_local std::vector<double> wide;
  const hsize_t offset[4] = {static_cast<hsize_t>(index), 0, 0, 0};
  std::uint32_t filter_mask = 0;
  {
    h5::Lock lock;
    hsize_t bytes = 0;
    MPIGAN_H5_CHECK(H5Dget_chunk_storage_size(m_ecal.get(), offset, &bytes),
                    "data file '{}', dataset 'ECAL', event {}: locating the chunk", path(), index);
    if (bytes == 0) {
      MPIGAN_THROW(DataError, "data file '{}', dataset 'ECAL', event {}: chunk was never written (incomplete file?)",
                   path(), index);
    }
    compressed.resize(bytes);
    MPIGAN_H5_CHECK(H5Dread_chunk(m_ecal.get(), H5P_DEFAULT, offset, &filter_mask, compressed.data()),
                    "data file '{}', dataset 'ECAL', event {}: reading the chunk (truncated or damaged file?)", path(),
                    index);
  }
  const std::size_t elem = m_ecal_info.type.size;
  const std::size_t want = static_cast<std::size_t>(m_cells) * elem;
  unsigned char* out =
      elem == 4 ? reinterpret_cast<unsigned char*>(dst.data())
                : (wide.resize(static_cast<std::size_t>(m_cells)), reinterpret_cast<unsigned char*>(wide.data()));
  const bool deflated = !m_ecal_info.filters.empty() && (filter_mask & 1u) == 0;
  if (deflated) {
    uLongf got = static_cast<uLongf>(want);
    const int rc = uncompress(out, &got, compressed.data(), static_cast<uLong>(compressed.size()));
    if (rc != Z_OK || got != want) {
      MPIGAN_THROW(DataError, "data file '{}', dataset 'ECAL', event {}: corrupt gzip chunk (zlib: {}, {} of {} bytes)",
                   path(), index, rc == Z_OK ? "ok" : zError(rc), static_cast<std::size_t>(got), want);
    }
  } else {
    if (compressed.size() != want) {
      MPIGAN_THROW(DataError, "data file '{}', dataset 'ECAL', event {}: raw chunk has {} bytes, expected {}", path(),
                   index, compressed.size(), want);
    }
    std::memcpy(out, compressed.data(), want);
  }
  if (elem == 8) {
    for (std::int64_t k = 0; k < m_cells; ++k)
      dst[static_cast<std::size_t>(k)] = static_cast<float>(wide[static_cast<std::size_t>(k)]);
  }
}

void EventFile::read_event(std::int64_t index, std::span<float> dst) const {
  MPIGAN_CHECK(index >= 0 && index < m_events, "data file '{}': event {} out of range [0, {})", path(), index,
               m_events);
  MPIGAN_CHECK(static_cast<std::int64_t>(dst.size()) == m_cells, "data file '{}': buffer of {} floats for {} cells",
               path(), dst.size(), m_cells);
  if (m_direct) {
    read_direct(index, dst);
    // float64 -> float32 can overflow to inf; check after the conversion.
    check_cells(index, dst);
    return;
  }
  read_events(index, 1, dst);
}

void EventFile::read_events(std::int64_t begin, std::int64_t count, std::span<float> dst) const {
  MPIGAN_CHECK(begin >= 0 && count >= 0 && begin + count <= m_events,
               "data file '{}': events [{}, {}) out of range [0, {})", path(), begin, begin + count, m_events);
  MPIGAN_CHECK(static_cast<std::int64_t>(dst.size()) == count * m_cells,
               "data file '{}': buffer of {} floats for {} events", path(), dst.size(), count);
  if (count == 0) return;
  if (m_direct) {
    for (std::int64_t i = 0; i < count; ++i) {
      read_direct(begin + i, dst.subspan(static_cast<std::size_t>(i * m_cells), static_cast<std::size_t>(m_cells)));
    }
  } else {
    h5::Lock lock;
    const auto& d = m_ecal_info.dims;
    const hsize_t start[4] = {static_cast<hsize_t>(begin), 0, 0, 0};
    const hsize_t size[4] = {static_cast<hsize_t>(count), static_cast<hsize_t>(d[1]), static_cast<hsize_t>(d[2]),
                             static_cast<hsize_t>(d[3])};
    h5::Hid fspace(H5Dget_space(m_ecal.get()));
    MPIGAN_H5_CHECK(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, size, nullptr),
                    "data file '{}', dataset 'ECAL': selecting events [{}, {})", path(), begin, begin + count);
    h5::Hid mspace(H5Screate_simple(4, size, nullptr));
    MPIGAN_H5_CHECK(H5Dread(m_ecal.get(), H5T_NATIVE_FLOAT, mspace.get(), fspace.get(), H5P_DEFAULT, dst.data()),
                    "data file '{}', dataset 'ECAL', events [{}, {}): read failed (truncated or damaged file?)", path(),
                    begin, begin + count);
  }
  check_cells(begin, dst);
}

}  // namespace mpigan::data
