// HDF5 access for the data layer: RAII handles, one checking macro, and the error stack of the
// HDF5 library captured into our exception messages.
//
// Invariants:
//  - The library's automatic error printing is switched off (H5Eset_auto2) on every thread before
//    it makes an HDF5 call, so nothing is printed raw. When a call fails, its error stack is walked
//    (H5Ewalk2) into the text of a DataError that also names the file and the object.
//  - Every HDF5 call made through this layer happens under one process-wide mutex (H5Lock). The
//    Debian library is built thread-safe, but a serial build need not be; the mutex makes both
//    correct. Work that does not touch the library (inflating chunks) happens outside the lock.
//  - Hid owns exactly one identifier and closes it with the matching H5*close function.
#pragma once

#include "mpigan/core/error.hpp"

#include <hdf5.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace mpigan::data::h5 {

/// Serialises calls into libhdf5 and switches its error printing off for the calling thread.
class Lock {
 public:
  Lock();
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  std::unique_lock<std::recursive_mutex> m_lock;
};

/// The current thread's HDF5 error stack as text ("H5Fopen(): unable to open file: file signature
/// not found; ..."), then cleared. Empty when the stack is empty.
std::string error_stack();

/// One HDF5 identifier (file, dataset, dataspace, type, property list), released with H5Idec_ref.
class Hid {
 public:
  Hid() = default;
  explicit Hid(hid_t id) : m_id(id) {}
  ~Hid() { reset(); }
  Hid(Hid&& o) noexcept : m_id(o.m_id) { o.m_id = H5I_INVALID_HID; }
  Hid& operator=(Hid&& o) noexcept;
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;

  hid_t get() const { return m_id; }
  bool valid() const { return m_id >= 0; }
  void reset();
  /// Gives up ownership without closing.
  hid_t release() {
    const hid_t id = m_id;
    m_id = H5I_INVALID_HID;
    return id;
  }

 private:
  hid_t m_id = H5I_INVALID_HID;
};

/// Element type of a dataset, as far as the readers care.
struct TypeInfo {
  H5T_class_t cls = H5T_NO_CLASS;
  std::size_t size = 0;  ///< bytes per element
  bool little_endian = true;
  std::string name() const;  ///< "float32", "float64 big-endian", "int64", ...
  bool is_float() const { return cls == H5T_FLOAT; }
};

/// Shape, type and storage of one dataset.
struct DatasetInfo {
  std::string name;
  std::vector<std::int64_t> dims;
  TypeInfo type;
  std::vector<std::int64_t> chunk;    ///< empty when not chunked
  std::vector<H5Z_filter_t> filters;  ///< filter pipeline, in order
  int deflate_level = -1;             ///< when the pipeline has deflate
  std::string shape_string() const;   ///< "(10000,25,25,25)"
};

/// Read-only handle on one HDF5 file. All members take the lock themselves.
class File {
 public:
  /// Opens @p path read-only. Throws DataError naming the file when it is missing, not HDF5, or
  /// truncated, with the HDF5 error stack in the message.
  static File open_read(const std::string& path);
  /// Creates (truncates) @p path for writing; object modification times are not tracked so the
  /// same content gives the same bytes.
  static File create(const std::string& path);
  /// Creates a file that lives in memory only (HDF5's core driver, no backing store), named
  /// @p name in messages; image() returns its bytes. Writes to it cannot fail for lack of disk.
  static File create_in_memory(const std::string& name);
  /// The bytes of the file as it would be on disk (flushes first).
  std::vector<char> image() const;

  const std::string& path() const { return m_path; }
  hid_t id() const { return m_file.get(); }

  bool has(const std::string& name) const;
  /// Names of the root group's members, sorted.
  std::vector<std::string> names() const;
  /// Info of dataset @p name; throws DataError naming file and dataset when it is missing.
  DatasetInfo info(const std::string& name) const;
  /// Whole dataset converted to float64 (any numeric type), row-major.
  std::vector<double> read_all(const std::string& name) const;

  /// Writes a whole 1-D float32 dataset, gzip-compressed in chunks of up to @p chunk elements.
  void write_vector(const std::string& name, const std::vector<float>& values, int gzip_level = 4,
                    std::int64_t chunk = 10000) const;
  void flush() const;
  void close();

 private:
  /// Creates (truncates) @p path with file-access properties @p fapl, times not tracked.
  static File create_with(const std::string& path, hid_t fapl);
  std::string m_path;
  Hid m_file;
};

/// Opens dataset @p name of @p file (lock must be held). Throws DataError naming both.
Hid open_dataset(const File& file, const std::string& name);
/// Info of an open dataset (lock must be held).
DatasetInfo dataset_info(hid_t dset, const std::string& name, const std::string& path);

}  // namespace mpigan::data::h5

/// Checks an HDF5 return value (negative = failure); throws DataError with the message and the
/// HDF5 error stack. The lock must be held by the caller.
#define MPIGAN_H5_CHECK(expr, ...)                                                               \
  do {                                                                                           \
    if ((expr) < 0) [[unlikely]] {                                                               \
      const std::string mpigan_h5_stack_ = ::mpigan::data::h5::error_stack();                    \
      MPIGAN_THROW(::mpigan::DataError, "{} [HDF5: {}]", fmt::format(__VA_ARGS__),               \
                   mpigan_h5_stack_.empty() ? std::string("no error stack") : mpigan_h5_stack_); \
    }                                                                                            \
  } while (0)
