// Readers, units, preprocessing, datasets and the Loader on real (small) HDF5 files.
#include <doctest/doctest.h>

#include "data_test_util.hpp"
#include "mpigan/data/angle_measure.hpp"
#include "mpigan/data/dataset.hpp"
#include "mpigan/data/event_file.hpp"
#include "mpigan/data/file_list.hpp"
#include "mpigan/data/loader.hpp"
#include "mpigan/data/preprocess.hpp"

#include <cmath>
#include <fstream>
#include <map>
#include <numbers>
#include <set>

using namespace mpigan;
using namespace mpigan::data;
using namespace mpigan::data::test;

TEST_CASE("event file: float32/float64, energy/target, chunked/contiguous layouts read the same values") {
  TempDir dir;
  struct Case {
    hid_t dtype;
    std::string key;
    std::int64_t chunk;
    bool direct;
  };
  for (const Case& c : {Case{H5T_IEEE_F32LE, "energy", 1, true}, Case{H5T_IEEE_F64LE, "energy", 1, true},
                        Case{H5T_IEEE_F32LE, "target", 3, false}, Case{H5T_IEEE_F64LE, "target", 0, false},
                        Case{H5T_IEEE_F32BE, "energy", 1, false}}) {
    CAPTURE(c.key);
    CAPTURE(c.chunk);
    const std::string path =
        dir.file(fmt::format("f_{}_{}_{}.h5", c.key, c.chunk, H5Tget_size(c.dtype)) + (c.direct ? "" : "x"));
    FileSpec s;
    s.events = 6;
    s.dtype = c.dtype;
    s.energy_key = c.key;
    s.chunk_events = c.chunk;
    write_file(path, s);
    auto f = EventFile::open(path, std::nullopt);
    CHECK(f->geometry() == Geometry::ecal25);
    CHECK(f->events() == 6);
    CHECK(f->direct_chunks() == c.direct);
    CHECK(f->energy_source() == (c.key == "energy" ? "energy" : "target[:,1]"));
    CHECK(f->energy()[4] == doctest::Approx(50.0));
    std::vector<float> cells(15625);
    f->read_event(4, cells);
    const auto want = pattern_event(0.02 * 50.0, 15625);
    // The axis mapping: file (x, y, depth) -> flat index ((x*25)+y)*25+depth, unchanged.
    const std::int64_t k = (3 * 25 + 7) * 25 + 11;
    CHECK(cells[k] == doctest::Approx(want[k]).epsilon(1e-6));
    CHECK(cells[0] == doctest::Approx(1e-8));
    std::vector<float> two(2 * 15625);
    f->read_events(3, 2, two);
    CHECK(std::equal(cells.begin(), cells.end(), two.begin() + 15625));
  }
}

TEST_CASE("units: detection from sum(ECAL)/E, explicit units, conversion") {
  CHECK(guess_units({0.021, 0.019, 0.02}).units == Units::gev);
  CHECK(guess_units({1.0, 0.98, 1.05}).units == Units::gev_x50);
  CHECK_FALSE(guess_units({50.0, 51.0}).units.has_value());
  CHECK_FALSE(guess_units({}).units.has_value());
  CHECK(unit_factor(Units::gev, Units::gev_x50) == 50.0);
  CHECK(unit_factor(Units::gev_x50, Units::gev) == doctest::Approx(0.02));
  CHECK(parse_units("auto") == Units::automatic);
  CHECK(parse_geometry("51x51x25") == Geometry::ecal51);
  CHECK_THROWS_AS(parse_geometry("25x25"), ConfigError);
  CHECK_THROWS_AS(parse_units("mev"), ConfigError);

  TempDir dir;
  FileSpec raw;
  raw.events = 4;
  write_file(dir.file("raw.h5"), raw);
  FileSpec x50 = raw;
  x50.x50 = true;
  write_file(dir.file("x50.h5"), x50);
  // The fixed-angle model on either file sees the same preprocessed image (units resolved per file).
  DatasetSpec spec;
  spec.train_files = {dir.file("raw.h5"), dir.file("x50.h5")};
  auto ds = open_datasets(spec).train;
  REQUIRE(ds->files().size() == 2);
  CHECK(ds->files()[0].units == Units::gev);
  CHECK(ds->files()[1].units == Units::gev_x50);
  CHECK(ds->files()[1].units_reason.find("auto") != std::string::npos);
  std::vector<float> a(15625), b(15625);
  const double ea = ds->load(2, a), eb = ds->load(4 + 2, b);
  CHECK(ea == doctest::Approx(0.02 * 30 * 100).epsilon(1e-4));  // sum after xscale 100
  CHECK(eb == doctest::Approx(ea).epsilon(1e-4));
  CHECK(a[100] == doctest::Approx(b[100]).epsilon(1e-5));
  // Explicit (wrong) units are obeyed, not second-guessed.
  spec.units = Units::gev_x50;
  spec.preprocess.threshold = 0;  // the /50 cells would fall under 1e-6
  spec.train_files = {dir.file("raw.h5")};
  auto forced = open_datasets(spec).train;
  CHECK(forced->load(2, a) == doctest::Approx(0.02 * 30 * 100 / 50).epsilon(1e-4));
}

TEST_CASE("preprocess: the 3DGAN and AngleGAN transforms and their inverse") {
  const Preprocess fixed = preprocess_3dgan();
  CHECK(fixed.threshold == 1e-6f);
  CHECK(fixed.xscale == 100.0f);
  std::vector<float> cells = {5e-7f, 2e-6f, 0.01f, -1.0f};
  const double sum = preprocess_cells(cells, 1.0, fixed);
  CHECK(cells[0] == 0.0f);
  CHECK(cells[1] == doctest::Approx(2e-4));
  CHECK(cells[2] == doctest::Approx(1.0));
  CHECK(cells[3] == 0.0f);
  CHECK(sum == doctest::Approx(1.0002));

  const Preprocess angle = preprocess_anglegan();
  CHECK(angle.model_units == Units::gev_x50);
  CHECK(angle.power == 0.85f);
  CHECK(angle.min_ecal_sum == 10.0f);
  std::vector<float> c2 = {0.02f, 4.0f, -0.5f};  // raw GeV input -> x50
  const double s2 = preprocess_cells(c2, unit_factor(Units::gev, Units::gev_x50), angle);
  CHECK(s2 == doctest::Approx(201.0));
  apply_power(c2, angle.power);
  CHECK(c2[0] == doctest::Approx(1.0));
  CHECK(c2[1] == doctest::Approx(std::pow(200.0, 0.85)).epsilon(1e-6));
  CHECK(c2[2] == 0.0f);

  // Inverse: preprocessed -> file units, both models.
  Tensor gen = Tensor::from({1, 1, 1, 1, 3}, std::vector<float>{std::pow(200.0f, 0.85f), 1.0f, -0.1f});
  Tensor back = postprocess_images(gen, angle, Units::gev);
  CHECK(back.values()[0] == doctest::Approx(4.0).epsilon(1e-5));
  CHECK(back.values()[1] == doctest::Approx(0.02).epsilon(1e-5));
  CHECK(back.values()[2] == 0.0f);
  Tensor g2 = Tensor::from({1, 1, 1, 1, 2}, std::vector<float>{1.0f, 250.0f});
  Tensor b2 = postprocess_images(g2, fixed, Units::gev);
  CHECK(b2.values()[0] == doctest::Approx(0.01));
  CHECK(b2.values()[1] == doctest::Approx(2.5));
  CHECK(energy_from_target(1.5f, fixed) == doctest::Approx(150.0));
}

TEST_CASE("measPython: a straight tilted track gives its angle; an empty image gives 100") {
  const Dims3 d{51, 51, 25};
  std::vector<float> cells(static_cast<std::size_t>(d.product()), 0.0f);
  CHECK(measure_angle(cells, d) == 100.0);
  // One cell per layer along y = 10 + z (slope 1 cell per layer): m = 1 -> pi/2 - pi/4. 24 layers,
  // so no layer sits exactly at the barycentre (numpy's 0/0 there would make the result nan).
  for (int z = 0; z < 24; ++z) cells[static_cast<std::size_t>((25 * 51 + 10 + z) * 25 + z)] = 1.0f;
  CHECK(measure_angle(cells, d) == doctest::Approx(std::numbers::pi / 4).epsilon(1e-9));
  std::fill(cells.begin(), cells.end(), 0.0f);
  for (int z = 0; z < 24; ++z) cells[static_cast<std::size_t>((25 * 51 + 40 - z) * 25 + z)] = 1.0f;
  CHECK(measure_angle(cells, d) == doctest::Approx(3 * std::numbers::pi / 4).epsilon(1e-9));
}

TEST_CASE("file lists: globs sorted, @list files relative to the list, duplicates refused") {
  TempDir dir;
  for (const char* n : {"b_2.h5", "b_1.h5", "a.h5"}) std::ofstream(dir.file(n)) << "x";
  const auto files = expand_file_list({dir.file("b_*.h5")});
  REQUIRE(files.size() == 2);
  CHECK(files[0] == dir.file("b_1.h5"));
  std::ofstream(dir.file("list.txt")) << "# training files\n\na.h5\n  b_2.h5  \n";
  const auto listed = expand_file_list({"@" + dir.file("list.txt")});
  REQUIRE(listed.size() == 2);
  CHECK(listed[0] == dir.file("a.h5"));
  CHECK(listed[1] == dir.file("b_2.h5"));
  CHECK_THROWS_AS(expand_file_list({dir.file("a.h5"), dir.file("*.h5")}), DataError);
  CHECK_THROWS_AS(expand_file_list({"@" + dir.file("missing.txt")}), DataError);
}

TEST_CASE("datasets: split by files and by events, disjoint ids, max_events") {
  TempDir dir;
  for (int i = 0; i < 4; ++i) {
    FileSpec s;
    s.events = 10 + i;  // uneven files
    write_file(dir.file(fmt::format("EleEscan_{}.h5", i)), s);
  }
  DatasetSpec spec;
  spec.train_files = {dir.file("EleEscan_*.h5")};
  spec.validation_fraction = 0.25;
  auto by_files = open_datasets(spec);
  REQUIRE(by_files.validation);
  CHECK(by_files.train->size() == 10 + 11 + 12);
  CHECK(by_files.validation->size() == 13);
  CHECK(by_files.validation->event_id(0) == 33);

  spec.split = SplitMode::events;
  spec.validation_fraction = 0.2;
  auto by_events = open_datasets(spec);
  CHECK(by_events.train->size() + by_events.validation->size() == 46);
  CHECK(by_events.validation->size() == 2 + 2 + 2 + 3);
  std::set<std::uint64_t> ids;
  for (auto* d : {by_events.train.get(), by_events.validation.get()}) {
    for (std::int64_t k = 0; k < d->size(); ++k) CHECK(ids.insert(d->event_id(k)).second);
  }
  CHECK(ids.size() == 46);

  spec.validation_fraction = 0;
  spec.validation_files = {dir.file("EleEscan_3.h5")};
  spec.train_files = {dir.file("EleEscan_[012].h5")};
  spec.max_events = 15;
  auto explicit_split = open_datasets(spec);
  CHECK(explicit_split.train->size() == 15);
  CHECK(explicit_split.validation->size() == 13);
  // A file both in train and validation would be seen twice.
  spec.train_files = {dir.file("EleEscan_*.h5")};
  CHECK_THROWS_AS(open_datasets(spec), DataError);
}

TEST_CASE("datasets: K-fold cross-validation by files and by events; the validation set is left out") {
  TempDir dir;
  for (int i = 0; i < 5; ++i) {
    FileSpec s;
    s.events = 10 + i;  // 10, 11, 12, 13, 14 events
    write_file(dir.file(fmt::format("EleEscan_{}.h5", i)), s);
  }
  DatasetSpec spec;
  spec.train_files = {dir.file("EleEscan_*.h5")};
  spec.validation_fraction = 0.2;  // the last file (14 events): the test set, never a fold
  spec.folds = 2;
  // By files: the 4 training files, fold f = files [2f, 2f + 2).
  std::set<std::uint64_t> held;
  for (int f = 0; f < 2; ++f) {
    spec.fold = f;
    const auto d = open_datasets(spec);
    REQUIRE(d.validation);
    CHECK(d.train->size() + d.validation->size() == 10 + 11 + 12 + 13);
    CHECK(d.validation->size() == (f == 0 ? 10 + 11 : 12 + 13));
    for (std::int64_t k = 0; k < d.validation->size(); ++k) {
      CHECK(d.validation->event_id(k) < 46);                 // never an event of the test file (ids 46..59)
      CHECK(held.insert(d.validation->event_id(k)).second);  // each event is held out once
    }
    for (std::int64_t k = 0; k < d.train->size(); ++k) CHECK(d.train->event_id(k) < 46);
  }
  CHECK(held.size() == 46);

  // By events: fold f of each file's n events is [f n / K, (f + 1) n / K); with K = 3 over the
  // 5 files' training parts (fraction 0.2 of each file held out as the test set).
  spec.split = SplitMode::events;
  spec.folds = 3;
  held.clear();
  std::int64_t train_total = -1;
  for (int f = 0; f < 3; ++f) {
    spec.fold = f;
    const auto d = open_datasets(spec);
    const std::int64_t total = d.train->size() + d.validation->size();
    if (train_total < 0) train_total = total;
    CHECK(total == train_total);  // the same events, split differently
    for (std::int64_t k = 0; k < d.validation->size(); ++k) CHECK(held.insert(d.validation->event_id(k)).second);
  }
  // The training parts: 10 - 2, 11 - 2, 12 - 2, 13 - 3, 14 - 3 events (llround of 0.2 n held out).
  CHECK(train_total == 8 + 9 + 10 + 10 + 11);
  CHECK(static_cast<std::int64_t>(held.size()) == train_total);

  spec.split = SplitMode::files;
  spec.folds = 5;  // 4 training files cannot make 5 folds
  spec.fold = 0;
  CHECK_THROWS_WITH_AS(open_datasets(spec),
                       doctest::Contains("5 folds by files need at least 5 training files, found 4"), ConfigError);
}

TEST_CASE("datasets: the AngleGAN cut drops low-sum events, counted, from `sum` or from a scan") {
  TempDir dir;
  for (bool with_sum : {true, false}) {
    CAPTURE(with_sum);
    FileSpec s;
    s.geometry = Geometry::ecal51;
    s.x50 = true;
    s.events = 6;
    s.energy0 = 2.0;  // energies 2, 12, 22, ...: ECAL sum (x50) = E, so event 0 (sum 2 <= 10) is cut
    s.with_sum = with_sum;
    const std::string path = dir.file(with_sum ? "with_sum.h5" : "no_sum.h5");
    write_file(path, s);
    DatasetSpec spec;
    spec.train_files = {path};
    spec.geometry = Geometry::ecal51;
    spec.preprocess = preprocess_anglegan();
    auto ds = open_datasets(spec).train;
    CHECK(ds->size() == 5);
    CHECK(ds->dropped() == 1);
    CHECK(ds->files()[0].dropped == 1);
    CHECK(ds->event_id(0) == 1);
    CHECK(ds->angle(0) == doctest::Approx(1.26));  // mtheta of event 1
    LoaderOptions opt;
    opt.batch = 5;
    opt.shuffle = false;
    Loader loader(ds, opt);
    Batch b;
    REQUIRE(loader.next(b));
    CHECK(b.image.shape() == Shape{5, 1, 51, 51, 25});
    CHECK(b.ecal.at({0, 0}) == doctest::Approx(12.0).epsilon(1e-4));
    CHECK(b.energy.at({0, 0}) == doctest::Approx(0.12));
    CHECK(b.angle.at({4, 0}) == doctest::Approx(1.30));
    // The image is ecal-summed before the power: sum(image^(1/0.85)) == ecal.
    double inv = 0;
    for (std::int64_t k = 0; k < 51 * 51 * 25; ++k) inv += std::pow(b.image.data()[k], 1.0 / 0.85);
    CHECK(inv == doctest::Approx(12.0).epsilon(1e-3));
  }
}

TEST_CASE("loader: W shards over uneven files see every event exactly once per epoch, in lock-step") {
  TempDir dir;
  const std::vector<std::int64_t> sizes = {7, 13, 5, 11};  // 36 events
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    FileSpec s;
    s.events = sizes[i];
    write_file(dir.file(fmt::format("f{}.h5", i)), s);
  }
  DatasetSpec spec;
  spec.train_files = {dir.file("f*.h5")};
  spec.units = Units::gev;
  auto ds = open_datasets(spec).train;
  REQUIRE(ds->size() == 36);
  for (int w : {1, 3, 5}) {
    CAPTURE(w);
    std::map<std::uint64_t, int> count;
    std::vector<std::int64_t> batches;
    for (int s = 0; s < w; ++s) {
      LoaderOptions opt;
      opt.batch = 4;
      opt.shard = s;
      opt.num_shards = w;
      opt.seed = 99;
      opt.prefetch_batches = 2;
      Loader loader(ds, opt);
      for (int epoch = 0; epoch < 2; ++epoch) {
        Batch b;
        std::int64_t n = 0;
        while (loader.next(b)) {
          ++n;
          CHECK(b.image.shape()[0] == b.size());
          if (epoch == 1) {
            for (auto id : b.event_ids) ++count[id];
          }
        }
        CHECK(n == loader.batches_per_epoch());
        CHECK(loader.epoch() == epoch + 1);
      }
      batches.push_back(loader.batches_per_epoch());
    }
    CHECK(count.size() == 36);
    for (const auto& [id, c] : count) CHECK(c == 1);
    CHECK(std::all_of(batches.begin(), batches.end(), [&](std::int64_t k) { return k == batches[0]; }));
  }
}

TEST_CASE("loader: batch content, reshuffle per epoch, reproducible, exact resume") {
  TempDir dir;
  FileSpec s;
  s.events = 23;
  write_file(dir.file("a.h5"), s);
  DatasetSpec spec;
  spec.train_files = {dir.file("a.h5")};
  auto ds = open_datasets(spec).train;
  LoaderOptions opt;
  opt.batch = 5;
  opt.seed = 7;
  auto collect = [&](Loader& l, int epochs) {
    std::vector<std::vector<std::uint64_t>> out;
    for (int e = 0; e < epochs; ++e) {
      Batch b;
      while (l.next(b)) out.push_back(b.event_ids);
      out.push_back({});  // epoch marker
    }
    return out;
  };
  Loader a(ds, opt);
  const auto ra = collect(a, 3);
  opt.read_threads = 3;  // decoding threads do not change anything
  Loader b(ds, opt);
  CHECK(collect(b, 3) == ra);
  // Epochs are reshuffled: epoch 0 and 1 differ.
  CHECK(ra[0] != ra[6]);

  // Content: energy, ECAL target and image agree with Dataset::load of the same event.
  Loader c(ds, opt);
  Batch batch;
  REQUIRE(c.next(batch));
  const std::uint64_t id = batch.event_ids[2];
  std::vector<float> cells(15625);
  const double ecal = ds->load(static_cast<std::int64_t>(id), cells);
  CHECK(batch.ecal.at({2, 0}) == doctest::Approx(ecal));
  CHECK(batch.energy.at({2, 0}) == doctest::Approx((10.0 + 10.0 * static_cast<double>(id)) / 100.0));
  CHECK(batch.image.at({2, 0, 3, 4, 5}) == doctest::Approx(cells[(3 * 25 + 4) * 25 + 5]));
  CHECK_FALSE(batch.angle.defined());

  // Resume: take 2 batches of epoch 1, remember the position, continue elsewhere.
  Loader d(ds, opt);
  Batch x;
  while (d.next(x)) {
  }
  d.next(x);
  d.next(x);
  const Loader::Position pos = d.position();
  CHECK(pos.epoch == 1);
  CHECK(pos.cursor == 2);
  Loader e(ds, opt);
  e.seek(pos);
  Batch y, z;
  REQUIRE(d.next(y));
  REQUIRE(e.next(z));
  CHECK(y.event_ids == z.event_ids);
  CHECK(e.position() == d.position());
  // Seeking to the end of an epoch gives the end marker first.
  e.seek({4, e.batches_per_epoch()});
  CHECK_FALSE(e.next(z));
  CHECK(e.position() == Loader::Position{5, 0});
  CHECK_THROWS(e.seek({0, 99}));
}
