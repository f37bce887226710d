// Bad input: every case is a DataError whose message names the file, the
// dataset and, where it applies, the event; nothing is skipped silently and nothing crashes.
#include <doctest/doctest.h>

#include "data_test_util.hpp"
#include "mpigan/data/dataset.hpp"
#include "mpigan/data/event_file.hpp"
#include "mpigan/data/file_list.hpp"
#include "mpigan/data/inspect.hpp"
#include "mpigan/data/loader.hpp"
#include "test_utils.hpp"

#include <cmath>
#include <fstream>
#include <limits>
#include <utility>

using namespace mpigan;
using namespace mpigan::data;
using namespace mpigan::data::test;

namespace {

// The message of the DataError thrown by @p f (the case fails when none is thrown).
template <class F>
std::string data_error(F&& f) {
  return mpigan::test::error_message<DataError>(std::forward<F>(f));
}

bool has(const std::string& msg, const std::string& part) {
  return msg.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("bad input: a missing file") {
  TempDir dir;
  const std::string path = dir.file("nope.h5");
  const std::string msg = data_error([&] { EventFile::open(path, Geometry::ecal25); });
  CHECK(has(msg, path));
  CHECK(has(msg, "does not exist"));
  // Through the Dataset too.
  DatasetSpec spec;
  spec.train_files = {path};
  CHECK(has(data_error([&] { open_datasets(spec); }), path));
  // A glob that matches nothing names the pattern.
  spec.train_files = {dir.file("*.h5")};
  const std::string nomatch = data_error([&] { open_datasets(spec); });
  CHECK(has(nomatch, "matches no files"));
  CHECK(has(nomatch, "data.train: file pattern '" + dir.file("*.h5") + "'"));
}

TEST_CASE("bad input: a file that is not HDF5, and a truncated file (HDF5 error stack captured)") {
  TempDir dir;
  const std::string text = dir.file("text.h5");
  std::ofstream(text) << "this is not an HDF5 file\n";
  std::string msg = data_error([&] { EventFile::open(text, Geometry::ecal25); });
  CHECK(has(msg, text));
  CHECK(has(msg, "not an HDF5 file"));

  const std::string good = dir.file("good.h5");
  FileSpec s;
  s.events = 20;
  write_file(good, s);
  const auto size = std::filesystem::file_size(good);
  const std::string cut = dir.file("cut.h5");
  std::filesystem::copy_file(good, cut);
  std::filesystem::resize_file(cut, size / 2);
  msg = data_error([&] { EventFile::open(cut, Geometry::ecal25); });
  MESSAGE(msg);
  CHECK(has(msg, cut));
  CHECK(has(msg, "HDF5:"));      // the library's own stack is in the message...
  CHECK(has(msg, "truncated"));  // ...and it says what happened
}

TEST_CASE("bad input: missing datasets") {
  TempDir dir;
  const std::string no_ecal = dir.file("no_ecal.h5");
  write_raw(no_ecal, "energy", {3}, {1, 2, 3});
  std::string msg = data_error([&] { EventFile::open(no_ecal, Geometry::ecal25); });
  CHECK(has(msg, no_ecal));
  CHECK(has(msg, "'ECAL' is missing"));
  CHECK(has(msg, "'energy'"));  // lists what is there

  const std::string no_energy = dir.file("no_energy.h5");
  write_raw(no_energy, "ECAL", {2, 25, 25, 25}, std::vector<double>(2 * 15625, 0.001));
  msg = data_error([&] { EventFile::open(no_energy, Geometry::ecal25); });
  CHECK(has(msg, no_energy));
  CHECK(has(msg, "neither dataset 'energy'"));

  const std::string no_angle = dir.file("no_angle.h5");
  FileSpec s;
  s.geometry = Geometry::ecal51;
  s.events = 3;
  s.x50 = true;
  s.with_angles = false;
  write_file(no_angle, s);
  msg = data_error([&] { EventFile::open(no_angle, Geometry::ecal51, "mtheta"); });
  CHECK(has(msg, no_angle));
  CHECK(has(msg, "'mtheta' is missing"));
}

TEST_CASE("bad input: wrong rank, wrong shape, wrong type") {
  TempDir dir;
  const std::string rank3 = dir.file("rank3.h5");
  write_raw(rank3, "ECAL", {2, 25, 25}, std::vector<double>(2 * 625, 0.01));
  write_raw(rank3, "energy", {2}, {10, 20});
  std::string msg = data_error([&] { EventFile::open(rank3, Geometry::ecal25); });
  CHECK(has(msg, rank3));
  CHECK(has(msg, "dataset 'ECAL'"));
  CHECK(has(msg, "expected rank 4"));
  CHECK(has(msg, "(2,25,25)"));

  const std::string shape = dir.file("shape.h5");
  write_raw(shape, "ECAL", {2, 25, 25, 24}, std::vector<double>(2 * 25 * 25 * 24, 0.01));
  write_raw(shape, "energy", {2}, {10, 20});
  msg = data_error([&] { EventFile::open(shape, Geometry::ecal25); });
  CHECK(has(msg, "expected shape (N,25,25,25)"));
  CHECK(has(msg, "found (2,25,25,24)"));

  // A valid 25^3 file opened as the 51x51x25 geometry.
  const std::string fixed = dir.file("fixed.h5");
  FileSpec s;
  s.events = 2;
  write_file(fixed, s);
  msg = data_error([&] { EventFile::open(fixed, Geometry::ecal51, "mtheta"); });
  CHECK(has(msg, "expected shape (N,51,51,25) for geometry 51x51x25"));

  const std::string energy2d = dir.file("energy2d.h5");
  write_raw(energy2d, "ECAL", {2, 25, 25, 25}, std::vector<double>(2 * 15625, 0.001));
  write_raw(energy2d, "energy", {2, 3}, std::vector<double>(6, 10.0));
  msg = data_error([&] { EventFile::open(energy2d, Geometry::ecal25); });
  CHECK(has(msg, "dataset 'energy'"));
  CHECK(has(msg, "expected shape (N,)"));

  const std::string ints = dir.file("ints.h5");
  write_raw(ints, "ECAL", {2, 25, 25, 25}, std::vector<double>(2 * 15625, 1.0), H5T_STD_I32LE);
  write_raw(ints, "energy", {2}, {10, 20});
  msg = data_error([&] { EventFile::open(ints, Geometry::ecal25); });
  CHECK(has(msg, "expected float32 or float64 cells, found int32"));
}

TEST_CASE("bad input: datasets of different lengths") {
  TempDir dir;
  const std::string path = dir.file("lengths.h5");
  write_raw(path, "ECAL", {3, 25, 25, 25}, std::vector<double>(3 * 15625, 0.001));
  write_raw(path, "energy", {2}, {10, 20});
  std::string msg = data_error([&] { EventFile::open(path, Geometry::ecal25); });
  CHECK(has(msg, path));
  CHECK(has(msg, "dataset 'energy' has 2 entries but 'ECAL' has 3 events"));

  const std::string angle = dir.file("angle_len.h5");
  FileSpec s;
  s.geometry = Geometry::ecal51;
  s.events = 3;
  s.x50 = true;
  s.with_angles = false;
  write_file(angle, s);
  write_raw(angle, "mtheta", {4}, {1, 1, 1, 1});
  msg = data_error([&] { EventFile::open(angle, Geometry::ecal51, "mtheta"); });
  CHECK(has(msg, "dataset 'mtheta' has 4 entries but 'ECAL' has 3 events"));
}

TEST_CASE("bad input: energy <= 0 and non-finite labels name the event") {
  TempDir dir;
  const std::string zero = dir.file("zero.h5");
  write_raw(zero, "ECAL", {3, 25, 25, 25}, std::vector<double>(3 * 15625, 0.001));
  write_raw(zero, "energy", {3}, {10, 0, 30});
  std::string msg = data_error([&] { EventFile::open(zero, Geometry::ecal25); });
  CHECK(has(msg, zero));
  CHECK(has(msg, "dataset 'energy', event 1"));
  CHECK(has(msg, "expected > 0"));

  const std::string neg = dir.file("neg_target.h5");
  write_raw(neg, "ECAL", {2, 25, 25, 25}, std::vector<double>(2 * 15625, 0.001));
  write_raw(neg, "target", {2, 2}, {11, 50, 11, -5});
  msg = data_error([&] { EventFile::open(neg, Geometry::ecal25); });
  CHECK(has(msg, "dataset 'target[:,1]', event 1"));

  const std::string nan = dir.file("nan_energy.h5");
  write_raw(nan, "ECAL", {3, 25, 25, 25}, std::vector<double>(3 * 15625, 0.001));
  write_raw(nan, "energy", {3}, {10, 20, std::numeric_limits<double>::quiet_NaN()});
  msg = data_error([&] { EventFile::open(nan, Geometry::ecal25); });
  CHECK(has(msg, "dataset 'energy', event 2"));
  CHECK(has(msg, "not finite"));

  const std::string inf_angle = dir.file("inf_angle.h5");
  FileSpec s;
  s.geometry = Geometry::ecal51;
  s.events = 3;
  s.x50 = true;
  s.with_angles = false;
  write_file(inf_angle, s);
  write_raw(inf_angle, "mtheta", {3}, {1, std::numeric_limits<double>::infinity(), 1});
  msg = data_error([&] { EventFile::open(inf_angle, Geometry::ecal51, "mtheta"); });
  CHECK(has(msg, "dataset 'mtheta', event 1"));
}

TEST_CASE("bad input: a non-finite ECAL cell names file, dataset, event and cell (direct and hyperslab reads)") {
  TempDir dir;
  for (std::int64_t chunk : {1, 4, 0}) {
    CAPTURE(chunk);
    const std::string path = dir.file("nan_cell_" + std::to_string(chunk) + ".h5");
    std::vector<double> ecal(5 * 15625, 0.001);
    ecal[3 * 15625 + (2 * 25 + 3) * 25 + 4] = std::numeric_limits<double>::quiet_NaN();  // event 3, cell (2,3,4)
    std::vector<hsize_t> chunks;
    if (chunk > 0) chunks = {static_cast<hsize_t>(chunk), 25, 25, 25};
    write_raw(path, "ECAL", {5, 25, 25, 25}, ecal, H5T_IEEE_F64LE, chunks, chunk > 0 ? 4 : -1);
    write_raw(path, "energy", {5}, {10, 20, 30, 40, 50});
    auto f = EventFile::open(path, Geometry::ecal25);  // opening is fine: cells are checked when read
    CHECK(f->direct_chunks() == (chunk == 1));
    std::vector<float> cells(15625);
    f->read_event(2, cells);
    const std::string msg = data_error([&] { f->read_event(3, cells); });
    CHECK(has(msg, path));
    CHECK(has(msg, "dataset 'ECAL', event 3"));
    CHECK(has(msg, "cell (2,3,4)"));
    // inspect finds it too, and the loader's background thread passes it on to next().
    CHECK(has(data_error([&] { inspect_file(path); }), "event 3"));
    DatasetSpec spec;
    spec.train_files = {path};
    spec.units = Units::gev;
    auto ds = open_datasets(spec).train;
    LoaderOptions opt;
    opt.batch = 5;
    opt.shuffle = false;
    Loader loader(ds, opt);
    Batch b;
    const std::string lmsg = data_error([&] { loader.next(b); });
    CHECK(has(lmsg, "event 3"));
    CHECK(has(lmsg, path));
    // The loader stays failed rather than skipping the event.
    CHECK(has(data_error([&] { loader.next(b); }), "event 3"));
  }
}

TEST_CASE("bad input: physically impossible cells (negative, beyond the event's energy) are named, not trained on") {
  TempDir dir;
  struct Case {
    const char* name;
    double value;
    const char* expect;
  };
  // Event 1 has 20 GeV: a cell may hold up to 20 (GeV) or 1 000 (GeV x 50); 2 000 is the limit.
  for (const Case& c : {Case{"negative", -0.25, "is -0.25: a deposited energy, expected >= 0"},
                        Case{"huge", 3e38, "is 3e+38, impossible for an event of 20 GeV"},
                        Case{"just-over", 2001.0, "is 2001, impossible for an event of 20 GeV"}}) {
    for (std::int64_t chunk : {1, 0}) {
      CAPTURE(c.name);
      CAPTURE(chunk);
      const std::string path = dir.file(std::string(c.name) + "_" + std::to_string(chunk) + ".h5");
      std::vector<double> ecal(3 * 15625, 0.001);
      ecal[1 * 15625 + (4 * 25 + 5) * 25 + 6] = c.value;  // event 1, cell (4,5,6)
      std::vector<hsize_t> chunks;
      if (chunk > 0) chunks = {1, 25, 25, 25};
      write_raw(path, "ECAL", {3, 25, 25, 25}, ecal, H5T_IEEE_F64LE, chunks, chunk > 0 ? 4 : -1);
      write_raw(path, "energy", {3}, {10, 20, 30});
      auto f = EventFile::open(path, Geometry::ecal25);
      std::vector<float> cells(15625);
      f->read_event(0, cells);
      f->read_event(2, cells);
      const std::string msg = data_error([&] { f->read_event(1, cells); });
      CHECK(has(msg, path));
      CHECK(has(msg, "dataset 'ECAL', event 1: cell (4,5,6)"));
      CHECK(has(msg, c.expect));
      CHECK(has(data_error([&] { inspect_file(path); }), c.expect));
      DatasetSpec spec;
      spec.train_files = {path};
      spec.units = Units::gev;
      Loader loader(open_datasets(spec).train, LoaderOptions{.batch = 3, .shuffle = false});
      Batch b;
      CHECK(has(data_error([&] { loader.next(b); }), c.expect));
    }
  }
  // At the limit and in GeV x 50 (a cell of 1 000 at 20 GeV): a legitimate file.
  const std::string path = dir.file("x50.h5");
  std::vector<double> ecal(3 * 15625, 0.0);
  ecal[1 * 15625] = 1000.0;
  ecal[2 * 15625] = 3000.0;  // 30 GeV: 1 500 x 2 = 3 000 is the limit itself
  write_raw(path, "ECAL", {3, 25, 25, 25}, ecal, H5T_IEEE_F64LE, {}, -1);
  write_raw(path, "energy", {3}, {10, 20, 30});
  CHECK(inspect_file(path).max_cell == doctest::Approx(3000.0));
}

TEST_CASE("bad input: a chunk damaged after the file was written") {
  TempDir dir;
  const std::string path = dir.file("damaged.h5");
  FileSpec s;
  s.events = 4;
  write_file(path, s);
  // Overwrite the stored (compressed) chunk of event 2 with garbage bytes.
  haddr_t addr = 0;
  hsize_t bytes = 0;
  {
    hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t dset = H5Dopen2(file, "ECAL", H5P_DEFAULT);
    const hsize_t offset[4] = {2, 0, 0, 0};
    unsigned mask = 0;
    REQUIRE(H5Dget_chunk_info_by_coord(dset, offset, &mask, &addr, &bytes) >= 0);
    H5Dclose(dset);
    H5Fclose(file);
  }
  REQUIRE(bytes > 16);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(addr + 8));
    const std::string junk(static_cast<std::size_t>(bytes - 8), '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  auto f = EventFile::open(path, Geometry::ecal25);
  std::vector<float> cells(15625);
  f->read_event(1, cells);
  const std::string msg = data_error([&] { f->read_event(2, cells); });
  CHECK(has(msg, path));
  CHECK(has(msg, "dataset 'ECAL', event 2"));
  CHECK(has(msg, "corrupt gzip chunk"));
}

TEST_CASE("a file list must be a regular, bounded text file (@/dev/zero would be read forever)") {
  CHECK_THROWS_WITH_AS(data::expand_file_list({"@/dev/zero"}), doctest::Contains("is not a regular file"), DataError);
  CHECK_THROWS_WITH_AS(data::expand_file_list({"@/nonexistent/list.txt"}), doctest::Contains("does not exist"),
                       DataError);
}
