// `mpigan simulate` data sets: the real layouts and units, readable by our readers (and h5py; see
// docs/data.md), byte-identical for the same seed whatever the thread count, and inspectable.
#include <doctest/doctest.h>

#include "data_test_util.hpp"
#include "mpigan/data/dataset.hpp"
#include "mpigan/data/inspect.hpp"
#include "mpigan/data/loader.hpp"
#include "mpigan/data/simulator/simulate_dataset.hpp"

#include <cmath>
#include <fstream>
#include <iterator>
#include <numbers>

using namespace mpigan;
using namespace mpigan::data;
using namespace mpigan::data::sim;
using namespace mpigan::data::test;

namespace {
std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
}  // namespace

TEST_CASE("simulate: 25x25x25 files in raw GeV with ECAL and energy, split over files") {
  TempDir dir;
  SimulateOptions o;
  o.events = 7;
  o.events_per_file = 3;
  o.energy_lo = 50;
  o.energy_hi = 150;
  o.out_dir = dir.file("fixed");
  o.threads = 2;
  const SimulateReport r = simulate_dataset(o);
  REQUIRE(r.files.size() == 3);
  CHECK(r.events == 7);
  CHECK(r.files[0].ends_with("EleEscan_001.h5"));
  auto f = EventFile::open(r.files[2], Geometry::ecal25);
  CHECK(f->events() == 1);
  CHECK(f->direct_chunks());
  CHECK(f->ecal_info().type.name() == "float32");
  CHECK(f->ecal_info().deflate_level == 4);
  CHECK_FALSE(f->file().has("theta"));
  const FileSummary s = inspect_file(r.files[0]);
  CHECK(s.events == 3);
  CHECK(s.units.units == Units::gev);
  CHECK(s.units.median_ratio == doctest::Approx(0.021).epsilon(0.15));
  CHECK(s.energy.min >= 50.0);
  CHECK(s.energy.max <= 150.0);
  CHECK(format_summary(s).find("gev") != std::string::npos);
}

TEST_CASE("simulate: a 5x5x5 file is exactly the 25x25x25 file of the same seed read out in merged cells") {
  TempDir dir;
  SimulateOptions o;
  o.events = 6;
  o.energy_lo = 20;
  o.energy_hi = 400;
  o.threads = 2;
  o.seed = 17;
  o.out_dir = dir.file("fine");
  const SimulateReport fine = simulate_dataset(o);
  o.geometry = Geometry::ecal5;
  o.out_dir = dir.file("coarse");
  const SimulateReport coarse = simulate_dataset(o);
  REQUIRE(coarse.files.size() == 1);
  CHECK(coarse.files[0].ends_with("EleEscan5_001.h5"));
  auto ff = EventFile::open(fine.files[0], Geometry::ecal25);
  auto fc = EventFile::open(coarse.files[0], Geometry::ecal5);
  REQUIRE(fc->events() == 6);
  CHECK(std::equal(ff->energy().begin(), ff->energy().end(), fc->energy().begin()));
  std::vector<float> big(25 * 25 * 25), small(125), rebinned(125);
  for (std::int64_t e = 0; e < 6; ++e) {
    ff->read_event(e, big);
    fc->read_event(e, small);
    rebin_shower(Geometry::ecal5, big.data(), rebinned.data());
    CHECK(small == rebinned);
    // By hand: coarse cell (2, 1, 3) is fine x 10..14, y 5..9, depth 15..19.
    double cell = 0, all = 0;
    for (int x = 0; x < 25; ++x)
      for (int y = 0; y < 25; ++y)
        for (int z = 0; z < 25; ++z) {
          const float c = big[static_cast<std::size_t>((x * 25 + y) * 25 + z)];
          all += c;
          if (x / 5 == 2 && y / 5 == 1 && z / 5 == 3) cell += c;
        }
    CHECK(small[(2 * 5 + 1) * 5 + 3] == doctest::Approx(cell).epsilon(1e-6));
    double sum = 0;
    for (float c : small) sum += c;
    CHECK(sum == doctest::Approx(all).epsilon(1e-6));
  }
  CHECK(parse_geometry("5x5x5") == Geometry::ecal5);
  CHECK(merge_factors(Geometry::ecal5) == Dims3{5, 5, 5});
  CHECK(geometry_from_ecal_dims({3, 5, 5, 5}) == Geometry::ecal5);
  o.angle_lo = o.angle_hi = 60;
  CHECK_THROWS_WITH(validate(o), doctest::Contains("needs --geometry 51x51x25"));
}

TEST_CASE("simulate: 51x51x25 files in GeV x 50 with theta, eta, mtheta, sum; trainable by the angle model") {
  TempDir dir;
  SimulateOptions o;
  o.geometry = Geometry::ecal51;
  o.events = 12;
  o.events_per_file = 6;
  o.energy_lo = 100;
  o.energy_hi = 200;
  o.angle_lo = 60;
  o.angle_hi = 120;
  o.out_dir = dir.path().string();
  simulate_dataset(o);
  const std::string path = dir.file("EleEscan_RandomAngle_001.h5");
  auto f = EventFile::open(path, Geometry::ecal51, "theta");
  for (float th : f->angle()) {
    CHECK(th >= 60 * std::numbers::pi / 180 - 1e-6);
    CHECK(th <= 120 * std::numbers::pi / 180 + 1e-6);
  }
  REQUIRE(f->stored_sum());
  std::vector<float> cells(static_cast<std::size_t>(f->cells()));
  f->read_event(0, cells);
  double sum = 0;
  for (float c : cells) sum += c;
  CHECK((*f->stored_sum())[0] == doctest::Approx(sum).epsilon(1e-5));
  CHECK(sum / f->energy()[0] == doctest::Approx(1.0).epsilon(0.15));  // GeV x 50: sum/E ~ 50 * 2 %
  const auto eta = f->file().read_all("eta");
  CHECK(eta[0] == doctest::Approx(-std::log(std::tan(f->angle()[0] / 2.0))).epsilon(1e-5));
  const FileSummary s = inspect_file(path);
  CHECK(s.units.units == Units::gev_x50);
  REQUIRE(s.angles.size() == 3);

  DatasetSpec spec;
  spec.train_files = {dir.file("*.h5")};
  spec.geometry = Geometry::ecal51;
  spec.preprocess = preprocess_anglegan();
  auto ds = open_datasets(spec).train;
  CHECK(ds->size() == 12);  // 100-200 GeV: nothing under the ECAL-sum cut
  CHECK(ds->files()[0].units == Units::gev_x50);
  LoaderOptions lo;
  lo.batch = 4;
  Loader loader(ds, lo);
  Batch b;
  REQUIRE(loader.next(b));
  for (std::int64_t i = 0; i < 4; ++i) {
    CHECK(b.energy.at({i, 0}) >= 1.0f);
    CHECK(b.energy.at({i, 0}) <= 2.0f);
    CHECK(b.ecal.at({i, 0}) / (100 * b.energy.at({i, 0})) == doctest::Approx(1.0).epsilon(0.15));
    CHECK(std::fabs(b.angle.at({i, 0}) - std::numbers::pi / 2) < 0.7);
  }
}

TEST_CASE("simulate: the same seed gives the same bytes whatever the thread count; another seed differs") {
  TempDir dir;
  SimulateOptions o;
  o.events = 40;
  o.events_per_file = 40;
  o.energy_lo = 10;
  o.energy_hi = 100;
  o.seed = 5;
  o.threads = 1;
  o.out_dir = dir.file("one");
  simulate_dataset(o);
  o.threads = 3;
  o.out_dir = dir.file("three");
  simulate_dataset(o);
  o.seed = 6;
  o.out_dir = dir.file("other");
  simulate_dataset(o);
  const std::string a = bytes_of(dir.file("one/EleEscan_001.h5"));
  CHECK(a.size() > 10000);
  CHECK(a == bytes_of(dir.file("three/EleEscan_001.h5")));
  CHECK(a != bytes_of(dir.file("other/EleEscan_001.h5")));
  // Into a directory that holds a set already: refused, the set left as it was.
  o.out_dir = dir.file("one");
  o.events = 10;
  CHECK_THROWS_WITH_AS(simulate_dataset(o),
                       doctest::Contains("already holds 1 file(s) of a 25x25x25 data set (EleEscan_001.h5)"),
                       DataError);
  CHECK(a == bytes_of(dir.file("one/EleEscan_001.h5")));
}

TEST_CASE("simulate: option checks and range parsing") {
  CHECK(parse_range("10:500", "--energy") == std::pair<double, double>{10, 500});
  CHECK(parse_range("100", "--energy") == std::pair<double, double>{100, 100});
  CHECK_THROWS_AS(parse_range("500:10", "--energy"), ConfigError);
  CHECK_THROWS_AS(parse_range("a:b", "--energy"), ConfigError);
  SimulateOptions o;
  o.out_dir = "/tmp/x";
  o.angle_lo = 60;  // angles need the 51x51x25 geometry
  CHECK_THROWS_AS(validate(o), ConfigError);
  o.geometry = Geometry::ecal51;
  CHECK_NOTHROW(validate(o));
  o.energy_lo = 0;
  o.events = 0;
  try {
    validate(o);
    FAIL("expected ConfigError");
  } catch (const ConfigError& e) {
    CHECK(e.problems().size() == 2);  // every problem, not just the first
  }
}
