// EventWriter (see event_writer.hpp).
#include "mpigan/data/event_writer.hpp"

#include <zlib.h>

namespace mpigan::data {

EventWriter::EventWriter(const std::string& path, const Dims3& dims, std::int64_t events, int gzip_level)
    : m_file(h5::File::create(path)), m_events(events), m_level(gzip_level) {
  MPIGAN_CHECK(events > 0 && gzip_level >= 0 && gzip_level <= 9, "writer '{}': {} events, gzip level {}", path, events,
               gzip_level);
  h5::Lock lock;
  const hsize_t shape[4] = {static_cast<hsize_t>(events), static_cast<hsize_t>(dims.d), static_cast<hsize_t>(dims.h),
                            static_cast<hsize_t>(dims.w)};
  const hsize_t chunk[4] = {1, shape[1], shape[2], shape[3]};
  h5::Hid space(H5Screate_simple(4, shape, nullptr));
  MPIGAN_H5_CHECK(space.get(), "file '{}': ECAL dataspace", path);
  h5::Hid dcpl(H5Pcreate(H5P_DATASET_CREATE));
  MPIGAN_H5_CHECK(H5Pset_chunk(dcpl.get(), 4, chunk), "file '{}': ECAL chunking", path);
  MPIGAN_H5_CHECK(H5Pset_deflate(dcpl.get(), static_cast<unsigned>(gzip_level)), "file '{}': ECAL gzip", path);
  MPIGAN_H5_CHECK(H5Pset_obj_track_times(dcpl.get(), false), "file '{}': ECAL time tracking", path);
  m_ecal =
      h5::Hid(H5Dcreate2(m_file.id(), keys::ecal, H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
  MPIGAN_H5_CHECK(m_ecal.get(), "file '{}': creating dataset 'ECAL'", path);
}

std::vector<unsigned char> EventWriter::compress(std::span<const float> cells, int gzip_level) {
  const auto bytes = static_cast<uLong>(cells.size_bytes());
  uLongf size = compressBound(bytes);
  std::vector<unsigned char> out(size);
  const int rc = compress2(out.data(), &size, reinterpret_cast<const Bytef*>(cells.data()), bytes, gzip_level);
  MPIGAN_CHECK(rc == Z_OK, "zlib compress2 failed: {}", zError(rc));
  out.resize(size);
  return out;
}

void EventWriter::write_compressed(std::int64_t index, const std::vector<unsigned char>& chunk) {
  MPIGAN_CHECK(index >= 0 && index < m_events, "writer '{}': event {} out of range [0, {})", path(), index, m_events);
  h5::Lock lock;
  const hsize_t offset[4] = {static_cast<hsize_t>(index), 0, 0, 0};
  MPIGAN_H5_CHECK(H5Dwrite_chunk(m_ecal.get(), H5P_DEFAULT, 0u, offset, chunk.size(), chunk.data()),
                  "file '{}', dataset 'ECAL', event {}: writing the chunk", path(), index);
  ++m_written;
}

void EventWriter::write_labels(const std::string& name, const std::vector<float>& values) {
  MPIGAN_CHECK(static_cast<std::int64_t>(values.size()) == m_events,
               "writer '{}': dataset '{}' has {} values for {} events", path(), name, values.size(), m_events);
  m_file.write_vector(name, values, m_level);
}

void EventWriter::close() {
  MPIGAN_CHECK(m_written == m_events, "writer '{}': {} of {} events written", path(), m_written, m_events);
  m_ecal.reset();
  m_file.close();
}

}  // namespace mpigan::data
