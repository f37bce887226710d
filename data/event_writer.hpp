// EventWriter: writes a data file in the real 3DGAN layout, `ECAL` (N, x, y, depth) float32
// chunked one event per chunk and gzip-compressed like the LCD converter's h5py output, plus 1-D
// float32 label datasets. h5py reads the result like the real files.
//
// Invariants:
//  - Chunks are compressed by compress() (zlib, the HDF5 deflate filter's format) outside the HDF5
//    lock, so many threads can compress, and written with H5Dwrite_chunk in the order given.
//  - Object times are not tracked: the same events written in the same order give the same bytes.
//  - close() must be called to finish the file; it checks that every event was written.
#pragma once

#include "mpigan/data/hdf5.hpp"
#include "mpigan/data/layout.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mpigan::data {

class EventWriter {
 public:
  EventWriter(const std::string& path, const Dims3& dims, std::int64_t events, int gzip_level = 4);

  /// One event's cells (x-major, depth fastest) compressed for the ECAL dataset.
  static std::vector<unsigned char> compress(std::span<const float> cells, int gzip_level);

  /// Writes the compressed chunk of event @p index (from compress() with this writer's level).
  void write_compressed(std::int64_t index, const std::vector<unsigned char>& chunk);
  /// A 1-D float32 label dataset of length events().
  void write_labels(const std::string& name, const std::vector<float>& values);
  void close();

  const std::string& path() const { return m_file.path(); }
  std::int64_t events() const { return m_events; }
  int gzip_level() const { return m_level; }

 private:
  h5::File m_file;
  h5::Hid m_ecal;
  std::int64_t m_events;
  int m_level;
  std::int64_t m_written = 0;
};

}  // namespace mpigan::data
