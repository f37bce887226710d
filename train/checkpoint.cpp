// Checkpoint files (checkpoint.hpp): atomic HDF5 writes, reads, and ParameterSets in and out with
// their layout checked.
#include "mpigan/train/checkpoint.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/paths.hpp"
#include "mpigan/data/hdf5.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

namespace mpigan::train {

namespace h5 = data::h5;

namespace {

/// Opens (creating as needed) the groups of "a/b/c" and returns the parent of "c" and "c".
std::pair<h5::Hid, std::string> parent_group(hid_t file, const std::string& name, const std::string& path) {
  h5::Hid g(H5Gopen2(file, "/", H5P_DEFAULT));
  MPIGAN_H5_CHECK(g.get(), "checkpoint '{}': opening the root group", path);
  std::size_t start = 0;
  while (true) {
    const auto slash = name.find('/', start);
    if (slash == std::string::npos) return {std::move(g), name.substr(start)};
    const std::string part = name.substr(start, slash - start);
    h5::Hid next;
    if (H5Lexists(g.get(), part.c_str(), H5P_DEFAULT) > 0) {
      next = h5::Hid(H5Gopen2(g.get(), part.c_str(), H5P_DEFAULT));
    } else {
      next = h5::Hid(H5Gcreate2(g.get(), part.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    }
    MPIGAN_H5_CHECK(next.get(), "checkpoint '{}': group '{}' of '{}'", path, part, name);
    g = std::move(next);
    start = slash + 1;
  }
}

}  // namespace

struct CheckpointWriter::Impl {
  std::string path, tmp;
  h5::File file;  ///< in memory: only commit() touches the disk, with its own error handling
  bool committed = false;
};

CheckpointWriter::CheckpointWriter(std::string path) : m_path(std::move(path)), m_impl(std::make_unique<Impl>()) {
  m_impl->path = m_path;
  m_impl->tmp = m_path + ".tmp";
  m_impl->file = h5::File::create_in_memory(m_impl->tmp);
}

CheckpointWriter::~CheckpointWriter() = default;

namespace {
void write_array(hid_t file, const std::string& name, const std::string& path, hid_t type, const void* data,
                 std::size_t n) {
  h5::Lock lock;
  auto [g, leaf] = parent_group(file, name, path);
  const hsize_t dims[1] = {static_cast<hsize_t>(n)};
  h5::Hid space(H5Screate_simple(1, dims, nullptr));
  MPIGAN_H5_CHECK(space.get(), "checkpoint '{}': dataspace of '{}'", path, name);
  h5::Hid ds(H5Dcreate2(g.get(), leaf.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  MPIGAN_H5_CHECK(ds.get(), "checkpoint '{}': creating dataset '{}'", path, name);
  if (n > 0)
    MPIGAN_H5_CHECK(H5Dwrite(ds.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "checkpoint '{}': writing '{}'",
                    path, name);
}
}  // namespace

template <class T>
void CheckpointWriter::note_finite(const std::string& name, std::span<const T> v) {
  if (!m_non_finite.empty()) return;
  const auto bad = std::count_if(v.begin(), v.end(), [](T x) { return !std::isfinite(x); });
  if (bad > 0) m_non_finite = fmt::format("{} ({} of {} values)", name, bad, v.size());
}

void CheckpointWriter::put(const std::string& name, std::span<const float> v) {
  note_finite(name, v);
  write_array(m_impl->file.id(), name, m_path, H5T_NATIVE_FLOAT, v.data(), v.size());
}
void CheckpointWriter::put(const std::string& name, std::span<const double> v) {
  note_finite(name, v);
  write_array(m_impl->file.id(), name, m_path, H5T_NATIVE_DOUBLE, v.data(), v.size());
}
void CheckpointWriter::put(const std::string& name, std::span<const std::int64_t> v) {
  write_array(m_impl->file.id(), name, m_path, H5T_NATIVE_INT64, v.data(), v.size());
}
void CheckpointWriter::put_int(const std::string& name, std::int64_t value) {
  write_array(m_impl->file.id(), name, m_path, H5T_NATIVE_INT64, &value, 1);
}

void CheckpointWriter::put_string(const std::string& name, const std::string& value) {
  h5::Lock lock;
  auto [g, leaf] = parent_group(m_impl->file.id(), name, m_path);
  h5::Hid type(H5Tcopy(H5T_C_S1));
  MPIGAN_H5_CHECK(H5Tset_size(type.get(), std::max<std::size_t>(1, value.size())), "checkpoint '{}': string type",
                  m_path);
  h5::Hid space(H5Screate(H5S_SCALAR));
  h5::Hid ds(H5Dcreate2(g.get(), leaf.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  MPIGAN_H5_CHECK(ds.get(), "checkpoint '{}': creating string '{}'", m_path, name);
  const std::string padded = value.empty() ? std::string(1, '\0') : value;
  MPIGAN_H5_CHECK(H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, padded.data()),
                  "checkpoint '{}': writing '{}'", m_path, name);
}

void CheckpointWriter::commit() {
  const std::vector<char> bytes = m_impl->file.image();
  m_impl->file.close();
  write_file_atomically(m_path, std::string_view(bytes.data(), bytes.size()), "checkpoint",
                        ". The previous checkpoint stays 'latest': free space, then --resume");
  m_impl->committed = true;
}

struct CheckpointReader::Impl {
  h5::File file;
};

CheckpointReader::CheckpointReader(std::string path) : m_path(std::move(path)), m_impl(std::make_unique<Impl>()) {
  m_impl->file = h5::File::open_read(m_path);
}

CheckpointReader::~CheckpointReader() = default;

bool CheckpointReader::has(const std::string& name) const {
  h5::Lock lock;
  // Walk the path: H5Lexists needs each parent to exist.
  std::size_t start = 0;
  while (true) {
    const auto slash = name.find('/', start);
    const std::string prefix = name.substr(0, slash);
    if (H5Lexists(m_impl->file.id(), prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

namespace {

template <class T>
std::vector<T> read_array(const h5::File& file, const std::string& path, const std::string& name, hid_t type) {
  h5::Lock lock;
  h5::Hid ds = h5::open_dataset(file, name);
  h5::Hid space(H5Dget_space(ds.get()));
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  MPIGAN_H5_CHECK(n, "checkpoint '{}': size of '{}'", path, name);
  std::vector<T> v(static_cast<std::size_t>(n));
  if (n > 0)
    MPIGAN_H5_CHECK(H5Dread(ds.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), "checkpoint '{}': reading '{}'",
                    path, name);
  return v;
}

}  // namespace

std::vector<float> CheckpointReader::floats(const std::string& name) const {
  MPIGAN_CHECK(has(name), "checkpoint '{}': no entry '{}'", m_path, name);
  return read_array<float>(m_impl->file, m_path, name, H5T_NATIVE_FLOAT);
}

std::vector<double> CheckpointReader::doubles(const std::string& name) const {
  MPIGAN_CHECK(has(name), "checkpoint '{}': no entry '{}'", m_path, name);
  return read_array<double>(m_impl->file, m_path, name, H5T_NATIVE_DOUBLE);
}

std::vector<double> CheckpointReader::doubles(const std::string& name, std::size_t n) const {
  std::vector<double> v = doubles(name);
  if (v.size() != n)
    MPIGAN_THROW(DataError, "checkpoint '{}': '{}' holds {} values, not {} (written by another build?)", m_path, name,
                 v.size(), n);
  return v;
}

std::vector<std::int64_t> CheckpointReader::int64s(const std::string& name) const {
  MPIGAN_CHECK(has(name), "checkpoint '{}': no entry '{}'", m_path, name);
  return read_array<std::int64_t>(m_impl->file, m_path, name, H5T_NATIVE_INT64);
}

std::int64_t CheckpointReader::get_int(const std::string& name) const {
  MPIGAN_CHECK(has(name), "checkpoint '{}': no entry '{}'", m_path, name);
  h5::Lock lock;
  h5::Hid ds = h5::open_dataset(m_impl->file, name);
  std::int64_t v = 0;
  MPIGAN_H5_CHECK(H5Dread(ds.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v),
                  "checkpoint '{}': reading '{}'", m_path, name);
  return v;
}

std::string CheckpointReader::get_string(const std::string& name) const {
  MPIGAN_CHECK(has(name), "checkpoint '{}': no entry '{}'", m_path, name);
  h5::Lock lock;
  h5::Hid ds = h5::open_dataset(m_impl->file, name);
  h5::Hid type(H5Dget_type(ds.get()));
  const std::size_t size = H5Tget_size(type.get());
  std::string s(size, '\0');
  MPIGAN_H5_CHECK(H5Dread(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, s.data()),
                  "checkpoint '{}': reading '{}'", m_path, name);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string layout_string(const ParameterSet& p) {
  std::ostringstream os;
  for (const auto& s : p.segments()) os << s.name << ':' << s.shape.to_string() << ';';
  return os.str();
}

void save_parameters(CheckpointWriter& w, const std::string& name, const ParameterSet& p, Backend& backend) {
  const Tensor host = backend.to_host(p.flat());
  w.put(name + "/values", host.values());
  w.put_string(name + "/layout", layout_string(p));
}

void load_parameters(const CheckpointReader& r, const std::string& name, ParameterSet& p, Backend& backend) {
  const std::string want = layout_string(p), got = r.get_string(name + "/layout");
  if (want != got) {
    // Name the first differing segment.
    std::size_t i = 0;
    while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
    const auto seg_start = want.rfind(';', i == 0 ? 0 : i - 1);
    const std::string at = want.substr(seg_start == std::string::npos ? 0 : seg_start + 1, 80);
    MPIGAN_THROW(DataError,
                 "checkpoint '{}': '{}' was saved from another model: parameter layouts differ at '{}' "
                 "(this model has {} segments / {} values)",
                 r.path(), name, at.substr(0, at.find(';')), p.segments().size(), p.size());
  }
  const std::vector<float> v = r.floats(name + "/values");
  MPIGAN_CHECK(v.size() == p.size(), "checkpoint '{}': '{}' holds {} values, the model needs {}", r.path(), name,
               v.size(), p.size());
  // mpigan writes no checkpoint with a value that is not finite: one here is a damaged file.
  const auto first_bad = std::find_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
  if (first_bad != v.end()) {
    const auto bad = std::count_if(first_bad, v.end(), [](float x) { return !std::isfinite(x); });
    MPIGAN_THROW(
        DataError,
        "checkpoint '{}': '{}/values' holds {} value{} that {} not finite (the first at index {}): the file is "
        "damaged; use an earlier checkpoint of the run (its checkpoints/ directory)",
        r.path(), name, bad, bad == 1 ? "" : "s", bad == 1 ? "is" : "are", first_bad - v.begin());
  }
  Tensor flat = p.flat();
  backend.from_host(Tensor::from(flat.shape(), v), flat);
}

void save_optimizer(CheckpointWriter& w, const std::string& base, const nn::Optimizer& opt, Backend& backend) {
  w.put_string(base + "/name", opt.name());
  w.put_int(base + "/iterations", opt.iterations());
  // slots() hands out the optimizer's own buffers; saving only reads them.
  for (const auto& [slot, p] : const_cast<nn::Optimizer&>(opt).slots())
    save_parameters(w, base + "/" + slot, *p, backend);
}

void load_optimizer(const CheckpointReader& r, const std::string& base, nn::Optimizer& opt, Backend& backend,
                    const std::string& what) {
  // "name"; "optimizer" in master rules' checkpoints before this key; none in workers' parts before it.
  const std::string key = r.has(base + "/name") ? base + "/name" : base + "/optimizer";
  if (r.has(key)) {
    const std::string saved = r.get_string(key);
    if (saved != opt.name())
      MPIGAN_THROW(DataError, "checkpoint '{}': the {} optimizer was '{}', this experiment uses '{}'", r.path(), what,
                   saved, opt.name());
  }
  opt.set_iterations(r.get_int(base + "/iterations"));
  for (const auto& [slot, p] : opt.slots()) load_parameters(r, base + "/" + slot, *p, backend);
}

}  // namespace mpigan::train
