// `mpigan generate`'s library: showers from a trained generator are the generator's output mapped
// back through the inverse preprocessing, with the requested conditions as labels, the same file
// for the same seed, and errors that name what is missing.
#include "test_utils.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/data/event_file.hpp"
#include "mpigan/data/hdf5.hpp"
#include "mpigan/data/preprocess.hpp"
#include "mpigan/train/checkpoint.hpp"
#include "mpigan/train/generate.hpp"
#include "mpigan/train/session.hpp"
#include "mpigan/train/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

using namespace mpigan;
using namespace mpigan::train;
namespace fs = std::filesystem;

namespace {
using test::temp_dir;
std::string bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
}  // namespace

TEST_CASE("generate: a trained tiny-8 run's showers, labels, reproducibility and errors") {
  const std::string dir = temp_dir("generate");
  std::ofstream(dir + "/exp.yaml") << R"(
name: gen
seed: 3
threads: 2
model: {name: tiny-8}
data:
  synthetic: {events: 256, validation_events: 32}
training: {batch: 16, epochs: 1}
checkpoint: {every: 0}
logging: {level: warn}
)";
  const ExperimentConfig e = ExperimentConfig::load(dir + "/exp.yaml");
  const auto summary = run_single_process(e, {dir + "/run", ""});
  REQUIRE(!summary.last_checkpoint.empty());

  const TrainedModel m = locate_trained(dir + "/run");
  CHECK(m.checkpoint == summary.last_checkpoint);
  CHECK(m.experiment.model.name == "tiny-8");
  CHECK(locate_trained(summary.last_checkpoint).run_dir == fs::absolute(dir + "/run").string());

  GenerateOptions o;
  o.events = 40;
  o.energy = std::pair{20.0, 200.0};
  o.batch = 16;  // three calls, the last one short
  o.seed = 9;
  o.out = dir + "/a.h5";
  const auto r = generate_showers(m, o);
  CHECK(r.events == 40);
  CHECK(r.showers_per_s > 0);
  o.out = dir + "/b.h5";
  generate_showers(m, o);
  CHECK(bytes(dir + "/a.h5") == bytes(dir + "/b.h5"));  // same seed, same file
  o.seed = 10;
  o.out = dir + "/c.h5";
  generate_showers(m, o);
  CHECK(bytes(dir + "/a.h5") != bytes(dir + "/c.h5"));

  // The file: energies in range, `sum` = the sum of each shower's cells, and the showers equal the
  // generator's output for the same conditions and seed, mapped back by postprocess_images.
  const data::h5::File f = data::h5::File::open_read(dir + "/a.h5");
  const auto energy = f.read_all("energy");
  const auto sum = f.read_all("sum");
  const auto ecal = f.read_all("ECAL");
  REQUIRE(energy.size() == 40);
  REQUIRE(ecal.size() == 40 * 512);
  for (double x : energy) CHECK((x >= 20.0 && x <= 200.0));
  for (std::size_t i = 0; i < 40; ++i) {
    double s = 0;
    for (std::size_t j = 0; j < 512; ++j) s += ecal[i * 512 + j];
    CHECK(sum[i] == doctest::Approx(s).epsilon(1e-5));
  }
  Session s = Session::create(m.experiment, 9);
  CheckpointReader ck(m.checkpoint);
  load_parameters(ck, "model/generator/weights", s.model->generator.weights(), *s.backend);
  load_parameters(ck, "model/generator/state", s.model->generator.state(), *s.backend);
  Tensor cond = Tensor::empty({16, 1});
  for (int i = 0; i < 16; ++i)
    cond.data()[i] =
        static_cast<float>(energy[static_cast<std::size_t>(i)]) * m.experiment.data.preprocess.energy_scale;
  const Tensor want =
      data::postprocess_images(s.step->generate(cond, Tensor(), 9), m.experiment.data.preprocess, data::Units::gev);
  std::vector<double> got(ecal.begin(), ecal.begin() + 16 * 512), ref(want.data(), want.data() + 16 * 512);
  test::check_close("first batch of showers", got, ref, {1e-6, 1e-6});

  // --recalibrate-bn: the generator's statistics re-estimated first, on one batch of the
  // conditions spread over all 40 (events i * 40 / 16), then the same showers from them.
  GenerateOptions rc = o;
  rc.seed = 9;
  rc.recalibrate_batches = 4;
  rc.out = dir + "/r.h5";
  generate_showers(m, rc);
  Tensor spread = Tensor::empty({16, 1});
  for (int i = 0; i < 16; ++i)
    spread.data()[i] =
        static_cast<float>(energy[static_cast<std::size_t>(i * 40 / 16)]) * m.experiment.data.preprocess.energy_scale;
  s.step->recalibrate_generator_state(spread, Tensor(), 4, 9);
  const Tensor want_rc =
      data::postprocess_images(s.step->generate(cond, Tensor(), 9), m.experiment.data.preprocess, data::Units::gev);
  const auto ecal_rc = data::h5::File::open_read(dir + "/r.h5").read_all("ECAL");
  std::vector<double> got_rc(ecal_rc.begin(), ecal_rc.begin() + 16 * 512),
      ref_rc(want_rc.data(), want_rc.data() + 16 * 512);
  test::check_close("first batch, recalibrated", got_rc, ref_rc, {1e-6, 1e-6});
  double moved = 0;  // and the statistics did change the showers
  for (std::size_t i = 0; i < got.size(); ++i) moved = std::max(moved, std::abs(got_rc[i] - got[i]));
  CHECK(moved > 1e-4);

  // --batch-statistics: the generator's BatchNorm layers on each batch's own statistics, in batches
  // of the experiment's training batch size; its running statistics are neither used nor changed.
  GenerateOptions bs = o;
  bs.seed = 9;
  bs.batch_statistics = true;
  bs.out = dir + "/s.h5";
  generate_showers(m, bs);
  const std::int64_t nb = std::min<std::int64_t>(m.experiment.batch, 40);
  Tensor first = Tensor::empty({nb, 1});
  for (std::int64_t i = 0; i < nb; ++i)
    first.data()[i] =
        static_cast<float>(energy[static_cast<std::size_t>(i)]) * m.experiment.data.preprocess.energy_scale;
  const Tensor state_before = s.model->generator.state().flat().clone();
  const Tensor want_bs = data::postprocess_images(s.step->generate(first, Tensor(), 9, true),
                                                  m.experiment.data.preprocess, data::Units::gev);
  const Tensor state_after = s.model->generator.state().flat();
  CHECK(std::equal(state_before.data(), state_before.data() + state_before.numel(), state_after.data()));
  const auto ecal_bs = data::h5::File::open_read(dir + "/s.h5").read_all("ECAL");
  const auto cells = static_cast<std::size_t>(nb * 512);
  std::vector<double> got_bs(ecal_bs.begin(), ecal_bs.begin() + static_cast<std::ptrdiff_t>(cells)),
      ref_bs(want_bs.data(), want_bs.data() + cells);
  test::check_close("first batch, batch statistics", got_bs, ref_bs, {1e-6, 1e-6});
  double apart = 0;  // not the running statistics' showers
  for (std::size_t i = 0; i < 16 * 512; ++i) apart = std::max(apart, std::abs(got_bs[i] - got[i]));
  CHECK(apart > 1e-4);
  GenerateOptions both = bs;
  both.recalibrate_batches = 2;
  CHECK_THROWS_WITH_AS(generate_showers(m, both), doctest::Contains("give one of the two"), Error);

  // Errors name what is wrong.
  CHECK_THROWS_WITH_AS(locate_trained(dir + "/nothing"), doctest::Contains("does not exist"), Error);
  fs::create_directories(dir + "/empty");
  CHECK_THROWS_WITH_AS(locate_trained(dir + "/empty"), doctest::Contains("no complete checkpoint"), Error);
  GenerateOptions bad = o;
  bad.energy.reset();
  CHECK_THROWS_WITH_AS(generate_showers(m, bad), doctest::Contains("--energy A:B or --like"), Error);
  bad.out = dir + "/never.h5";
  for (const auto& [lo, hi] : {std::pair{-50.0, -10.0}, std::pair{0.0, 100.0}, std::pair{10.0, HUGE_VAL}}) {
    bad.energy = std::pair{lo, hi};
    CHECK_THROWS_WITH_AS(generate_showers(m, bad), doctest::Contains("must satisfy 0 < LO <= HI"), Error);
  }
  bad.energy = o.energy;
  bad.angle = std::pair{0.5, 1.0};  // tiny-8 has no angle
  CHECK_THROWS_WITH_AS(generate_showers(m, bad), doctest::Contains("conditioned on the energy only"), Error);
  bad.angle.reset();
  bad.events = 1'000'000'000'000'000;
  CHECK_THROWS_WITH_AS(generate_showers(m, bad), doctest::Contains("generate in several files"), Error);
  CHECK_FALSE(fs::exists(bad.out));  // nothing written
  bad.events = 10;
  bad.out = dir + "/nodir/x.h5";
  const std::string nodir = "cannot write '" + bad.out + "': the directory '";
  CHECK_THROWS_WITH_AS(generate_showers(m, bad), doctest::Contains(nodir.c_str()), Error);
  CHECK_FALSE(fs::exists(dir + "/a.h5.tmp"));  // written under a temporary name, then renamed
  fs::remove_all(dir);
}

TEST_CASE("shipped generators: listed with their validation, used by name, generating the rung's showers") {
  test::ScopedEnv unset("MPIGAN_GENERATORS", nullptr);
  const auto list = shipped_generators();
  const auto it = std::find_if(list.begin(), list.end(), [](const auto& g) { return g.name == "3dgan-5"; });
  REQUIRE(it != list.end());
  CHECK(it->summary.find("fpd_hlf") != std::string::npos);
  CHECK(it->summary.find("AUC") != std::string::npos);
  const TrainedModel m = locate_trained("3dgan-5");
  CHECK(m.experiment.model.name == "3dgan-5");
  CHECK(m.experiment.data.geometry == data::Geometry::ecal5);
  CHECK(fs::path(m.checkpoint).filename() == "best.h5");
  const std::string dir = temp_dir("shipped");
  GenerateOptions o;
  o.events = 64;
  o.energy = std::pair{100.0, 100.0};
  o.out = dir + "/g.h5";
  o.threads = 1;
  generate_showers(m, o);
  auto f = data::EventFile::open(o.out, data::Geometry::ecal5);
  REQUIRE(f->events() == 64);
  // A trained generator, not noise: the mean sampling fraction at 100 GeV within 10 % of the
  // simulator's 2.06 %, and the centre column of cells holding most of the energy.
  std::vector<float> cells(125);
  double sf = 0, centre = 0;
  for (std::int64_t e = 0; e < 64; ++e) {
    f->read_event(e, cells);
    double s = 0;
    for (float c : cells) s += c;
    for (int z = 0; z < 5; ++z) centre += cells[static_cast<std::size_t>((2 * 5 + 2) * 5 + z)] / s / 64;
    sf += s / 100.0 / 64;
  }
  CHECK(sf == doctest::Approx(0.0206).epsilon(0.10));
  CHECK(centre > 0.7);
  // Another folder of shipped generators: the name is unknown there, and the error says where to look.
  test::ScopedEnv other("MPIGAN_GENERATORS", dir.c_str());
  CHECK(shipped_generators().empty());
  CHECK_THROWS_WITH(locate_trained("3dgan-5"), doctest::Contains("mpigan generate --list"));
}
