// HDF5 RAII handles, error-stack capture and the small read/write helpers of the data layer.
#include "mpigan/data/hdf5.hpp"

#include <algorithm>
#include <filesystem>

namespace mpigan::data::h5 {
namespace {

// Recursive: a Hid destroyed inside a locked member function closes its id under the same lock.
std::recursive_mutex& library_mutex() {
  static std::recursive_mutex m;
  return m;
}

herr_t walk_error(unsigned n, const H5E_error2_t* err, void* client) {
  auto* out = static_cast<std::string*>(client);
  if (n > 0) *out += "; ";
  char minor[128] = "";
  H5Eget_msg(err->min_num, nullptr, minor, sizeof(minor));
  *out += fmt::format("{}(): {}", err->func_name ? err->func_name : "?", err->desc ? err->desc : "");
  if (minor[0] != '\0') *out += fmt::format(" ({})", minor);
  return 0;
}

}  // namespace

Lock::Lock() : m_lock(library_mutex()) {
  // Per thread in thread-safe builds, global otherwise: switch automatic printing off every time.
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

std::string error_stack() {
  std::string out;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walk_error, &out);
  H5Eclear2(H5E_DEFAULT);
  return out;
}

Hid& Hid::operator=(Hid&& o) noexcept {
  if (this != &o) {
    reset();
    m_id = o.m_id;
    o.m_id = H5I_INVALID_HID;
  }
  return *this;
}

void Hid::reset() {
  if (m_id >= 0) {
    std::lock_guard guard(library_mutex());
    H5Idec_ref(m_id);
    m_id = H5I_INVALID_HID;
  }
}

std::string TypeInfo::name() const {
  std::string base;
  switch (cls) {
    case H5T_FLOAT:
      base = fmt::format("float{}", size * 8);
      break;
    case H5T_INTEGER:
      base = fmt::format("int{}", size * 8);
      break;
    case H5T_STRING:
      base = "string";
      break;
    case H5T_COMPOUND:
      base = "compound";
      break;
    default:
      base = fmt::format("type-class-{}", static_cast<int>(cls));
      break;
  }
  if (!little_endian && size > 1 && (cls == H5T_FLOAT || cls == H5T_INTEGER)) base += " big-endian";
  return base;
}

std::string DatasetInfo::shape_string() const {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + (dims.size() == 1 ? ",)" : ")");
}

File File::open_read(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) MPIGAN_THROW(DataError, "data file '{}' does not exist", path);
  if (fs::is_directory(path, ec)) MPIGAN_THROW(DataError, "data file '{}' is a directory, not an HDF5 file", path);
  // A FIFO or a device would block the open or be read forever.
  if (!fs::is_regular_file(path, ec))
    MPIGAN_THROW(DataError, "data file '{}' is not a regular file (a FIFO, socket or device); expected an HDF5 file",
                 path);
  Lock lock;
  File f;
  f.m_path = path;
  const htri_t is_h5 = H5Fis_hdf5(path.c_str());
  if (is_h5 <= 0) {
    const std::string stack = error_stack();
    MPIGAN_THROW(DataError, "data file '{}' is not an HDF5 file (no HDF5 signature; size {} bytes){}", path,
                 fs::file_size(path, ec), stack.empty() ? "" : " [HDF5: " + stack + "]");
  }
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  MPIGAN_H5_CHECK(id, "data file '{}' cannot be opened (truncated or damaged?)", path);
  f.m_file = Hid(id);
  return f;
}

File File::create_with(const std::string& path, hid_t fapl) {
  Lock lock;
  File f;
  f.m_path = path;
  Hid fcpl(H5Pcreate(H5P_FILE_CREATE));
  MPIGAN_H5_CHECK(fcpl.get(), "file '{}': creating the file-creation property list", path);
  // The root group is an object too: without this its header carries the creation time.
  MPIGAN_H5_CHECK(H5Pset_obj_track_times(fcpl.get(), false), "file '{}': disabling time tracking", path);
  const hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl);
  MPIGAN_H5_CHECK(id, "cannot create data file '{}'", path);
  f.m_file = Hid(id);
  return f;
}

File File::create(const std::string& path) {
  return create_with(path, H5P_DEFAULT);
}

File File::create_in_memory(const std::string& name) {
  Hid fapl;
  {
    Lock lock;
    fapl = Hid(H5Pcreate(H5P_FILE_ACCESS));
    MPIGAN_H5_CHECK(fapl.get(), "file '{}': creating the file-access property list", name);
    MPIGAN_H5_CHECK(H5Pset_fapl_core(fapl.get(), 1 << 20, false), "file '{}': the in-memory driver", name);
  }
  return create_with(name, fapl.get());
}

std::vector<char> File::image() const {
  flush();
  Lock lock;
  const ssize_t n = H5Fget_file_image(m_file.get(), nullptr, 0);
  MPIGAN_H5_CHECK(n, "file '{}': size of the file image", m_path);
  std::vector<char> bytes(static_cast<std::size_t>(n));
  MPIGAN_H5_CHECK(H5Fget_file_image(m_file.get(), bytes.data(), bytes.size()), "file '{}': the file image", m_path);
  return bytes;
}

bool File::has(const std::string& name) const {
  Lock lock;
  const htri_t r = H5Lexists(m_file.get(), name.c_str(), H5P_DEFAULT);
  MPIGAN_H5_CHECK(r, "file '{}': looking up '{}'", m_path, name);
  return r > 0;
}

std::vector<std::string> File::names() const {
  Lock lock;
  std::vector<std::string> out;
  auto cb = [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
    static_cast<std::vector<std::string>*>(data)->emplace_back(name);
    return 0;
  };
  MPIGAN_H5_CHECK(H5Literate(m_file.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, cb, &out),
                  "file '{}': listing the root group", m_path);
  std::sort(out.begin(), out.end());
  return out;
}

Hid open_dataset(const File& file, const std::string& name) {
  const htri_t exists = H5Lexists(file.id(), name.c_str(), H5P_DEFAULT);
  if (exists <= 0) {
    error_stack();  // clear
    MPIGAN_THROW(DataError, "data file '{}': dataset '{}' is missing", file.path(), name);
  }
  const hid_t id = H5Dopen2(file.id(), name.c_str(), H5P_DEFAULT);
  MPIGAN_H5_CHECK(id, "data file '{}': cannot open '{}' as a dataset", file.path(), name);
  return Hid(id);
}

DatasetInfo dataset_info(hid_t dset, const std::string& name, const std::string& path) {
  DatasetInfo info;
  info.name = name;
  Hid space(H5Dget_space(dset));
  MPIGAN_H5_CHECK(space.get(), "data file '{}', dataset '{}': reading the dataspace", path, name);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  MPIGAN_H5_CHECK(rank, "data file '{}', dataset '{}': reading the rank", path, name);
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  MPIGAN_H5_CHECK(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), "data file '{}', dataset '{}': dims",
                  path, name);
  info.dims.assign(dims.begin(), dims.end());

  Hid type(H5Dget_type(dset));
  MPIGAN_H5_CHECK(type.get(), "data file '{}', dataset '{}': reading the type", path, name);
  info.type.cls = H5Tget_class(type.get());
  info.type.size = H5Tget_size(type.get());
  if (info.type.cls == H5T_FLOAT || info.type.cls == H5T_INTEGER)
    info.type.little_endian = H5Tget_order(type.get()) == H5T_ORDER_LE;

  Hid dcpl(H5Dget_create_plist(dset));
  MPIGAN_H5_CHECK(dcpl.get(), "data file '{}', dataset '{}': creation properties", path, name);
  if (H5Pget_layout(dcpl.get()) == H5D_CHUNKED) {
    std::vector<hsize_t> chunk(static_cast<std::size_t>(rank));
    MPIGAN_H5_CHECK(H5Pget_chunk(dcpl.get(), rank, chunk.data()), "data file '{}', dataset '{}': chunk dims", path,
                    name);
    info.chunk.assign(chunk.begin(), chunk.end());
  }
  const int nfilters = H5Pget_nfilters(dcpl.get());
  for (int i = 0; i < nfilters; ++i) {
    unsigned flags = 0, cd[8] = {};
    std::size_t ncd = 8;
    const H5Z_filter_t f = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &ncd, cd, 0, nullptr, nullptr);
    info.filters.push_back(f);
    if (f == H5Z_FILTER_DEFLATE && ncd >= 1) info.deflate_level = static_cast<int>(cd[0]);
  }
  return info;
}

DatasetInfo File::info(const std::string& name) const {
  Lock lock;
  Hid dset = open_dataset(*this, name);
  return dataset_info(dset.get(), name, m_path);
}

std::vector<double> File::read_all(const std::string& name) const {
  Lock lock;
  Hid dset = open_dataset(*this, name);
  const DatasetInfo info = dataset_info(dset.get(), name, m_path);
  if (info.type.cls != H5T_FLOAT && info.type.cls != H5T_INTEGER) {
    MPIGAN_THROW(DataError, "data file '{}', dataset '{}': expected a numeric type, found {}", m_path, name,
                 info.type.name());
  }
  std::int64_t n = 1;
  for (auto d : info.dims) n *= d;
  std::vector<double> out(static_cast<std::size_t>(n));
  if (n > 0) {
    MPIGAN_H5_CHECK(H5Dread(dset.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()),
                    "data file '{}', dataset '{}': reading {} values (truncated or damaged file?)", m_path, name, n);
  }
  return out;
}

void File::write_vector(const std::string& name, const std::vector<float>& values, int gzip_level,
                        std::int64_t chunk) const {
  Lock lock;
  const hsize_t n = values.size();
  Hid space(H5Screate_simple(1, &n, nullptr));
  MPIGAN_H5_CHECK(space.get(), "file '{}', dataset '{}': dataspace", m_path, name);
  Hid dcpl(H5Pcreate(H5P_DATASET_CREATE));
  MPIGAN_H5_CHECK(H5Pset_obj_track_times(dcpl.get(), false), "file '{}', dataset '{}': time tracking", m_path, name);
  if (n > 0 && gzip_level >= 0) {
    const hsize_t c = static_cast<hsize_t>(std::clamp<std::int64_t>(chunk, 1, static_cast<std::int64_t>(n)));
    MPIGAN_H5_CHECK(H5Pset_chunk(dcpl.get(), 1, &c), "file '{}', dataset '{}': chunking", m_path, name);
    MPIGAN_H5_CHECK(H5Pset_deflate(dcpl.get(), static_cast<unsigned>(gzip_level)), "file '{}', dataset '{}': gzip",
                    m_path, name);
  }
  Hid dset(H5Dcreate2(m_file.get(), name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
  MPIGAN_H5_CHECK(dset.get(), "file '{}': creating dataset '{}'", m_path, name);
  if (n > 0) {
    MPIGAN_H5_CHECK(H5Dwrite(dset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()),
                    "file '{}': writing dataset '{}'", m_path, name);
  }
}

void File::flush() const {
  Lock lock;
  MPIGAN_H5_CHECK(H5Fflush(m_file.get(), H5F_SCOPE_LOCAL), "file '{}': flush", m_path);
}

void File::close() {
  if (!m_file.valid()) return;
  Lock lock;
  // H5Fclose reports a failed final flush, which H5Idec_ref in ~Hid would swallow.
  MPIGAN_H5_CHECK(H5Fclose(m_file.release()), "file '{}': closing (final write failed?)", m_path);
}

}  // namespace mpigan::data::h5
