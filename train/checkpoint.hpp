// Checkpoints: HDF5 files written atomically (to NAME.tmp, then renamed over NAME), holding flat
// float arrays, integers and strings by slash-separated path ("generator/weights"). A crash or a
// kill while writing leaves the previous checkpoint intact; a reader never sees a partial file.
// What goes in (weights, BatchNorm state, optimizer slots, update-rule state, RNG and data
// position) is decided by the trainer and the master; ParameterSets carry their segment layout so
// that loading into a different model is an error naming the first mismatch.
#pragma once

#include "mpigan/core/backend.hpp"
#include "mpigan/core/parameter_set.hpp"
#include "mpigan/nn/optimizer.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace mpigan::train {

class CheckpointWriter {
 public:
  explicit CheckpointWriter(std::string path);
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  void put(const std::string& name, std::span<const float> values);
  void put(const std::string& name, std::span<const double> values);
  void put(const std::string& name, std::span<const std::int64_t> values);
  void put_int(const std::string& name, std::int64_t value);
  void put_string(const std::string& name, const std::string& value);
  /// Flush, close and rename into place. Without commit() the temporary file is removed.
  /// The file is built in memory and written by commit() alone (write_file_atomically): a failed
  /// write (a full disk) throws one Error naming the file, the system's reason and errno, the bytes
  /// written and the space left, after removing the temporary file; the destructor never throws.
  void commit();
  const std::string& path() const { return m_path; }
  /// The first float or double array put so far that holds a non-finite value, as "rule/m (3 of
  /// 872808 values)"; empty when all are finite. Nothing is committed by the callers that check
  /// it (a checkpoint nothing could resume from).
  const std::string& first_non_finite() const { return m_non_finite; }

 private:
  template <class T>
  void note_finite(const std::string& name, std::span<const T> v);
  struct Impl;
  std::string m_path;
  std::unique_ptr<Impl> m_impl;
  std::string m_non_finite;
};

class CheckpointReader {
 public:
  /// Throws DataError naming the file when it is missing, truncated or not HDF5.
  explicit CheckpointReader(std::string path);
  ~CheckpointReader();
  bool has(const std::string& name) const;
  std::vector<float> floats(const std::string& name) const;
  std::vector<double> doubles(const std::string& name) const;
  /// @p n doubles, or a DataError naming the file, the entry and both counts.
  std::vector<double> doubles(const std::string& name, std::size_t n) const;
  /// An integer array (written as doubles or integers: HDF5 converts).
  std::vector<std::int64_t> int64s(const std::string& name) const;
  std::int64_t get_int(const std::string& name) const;
  std::string get_string(const std::string& name) const;
  const std::string& path() const { return m_path; }

 private:
  struct Impl;
  std::string m_path;
  std::unique_ptr<Impl> m_impl;
};

/// ParameterSet <-> checkpoint: NAME/values (the flat buffer, host copy) and NAME/layout (segment
/// names and shapes). load_parameters throws DataError when the layout differs, naming the first
/// differing segment.
void save_parameters(CheckpointWriter& w, const std::string& name, const ParameterSet& p, Backend& backend);
void load_parameters(const CheckpointReader& r, const std::string& name, ParameterSet& p, Backend& backend);
std::string layout_string(const ParameterSet& p);

/// An optimizer's name, iteration count and slots under BASE/name, BASE/iterations and BASE/SLOT.
void save_optimizer(CheckpointWriter& w, const std::string& base, const nn::Optimizer& opt, Backend& backend);
/// The same back; a different optimizer's name is a DataError naming the file and @p what ("the
/// generator").
void load_optimizer(const CheckpointReader& r, const std::string& base, nn::Optimizer& opt, Backend& backend,
                    const std::string& what);

}  // namespace mpigan::train
