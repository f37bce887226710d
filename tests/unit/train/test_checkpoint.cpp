// Checkpoints: round trip, atomic replacement, layout checks; and the single-process trainer
// resuming from a checkpoint to the same weights, bit for bit, as an uninterrupted run.
#include "test_utils.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/train/checkpoint.hpp"
#include "mpigan/train/run_dir.hpp"
#include "mpigan/train/session.hpp"
#include "mpigan/train/trainer.hpp"

#include <sys/resource.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

using namespace mpigan;
using namespace mpigan::train;
namespace fs = std::filesystem;

namespace {
using test::temp_dir;

/// The message of the @p E thrown by @p f while files may grow to @p bytes at most (the case fails
/// when none is): RLIMIT_FSIZE makes write() fail with EFBIG past it, as a full disk fails it with
/// ENOSPC, without root or a small filesystem. The limit and SIGXFSZ's action are restored.
template <class E, class F>
std::string error_past_file_size(rlim_t bytes, F&& f) {
  struct rlimit old {};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit lim = old;
  lim.rlim_cur = bytes;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
  const std::string what = test::error_message<E>(std::forward<F>(f));
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  return what;
}
}  // namespace

TEST_CASE("checkpoint round trip and atomic writes") {
  const std::string dir = temp_dir("ckpt");
  const std::string path = dir + "/a.h5";
  {
    CheckpointWriter w(path);
    w.put("x/y/values", std::vector<float>{1.5f, -2.0f, 3.25f});
    w.put_int("progress/step", 42);
    w.put_string("experiment/name", "quickstart");
    w.put("d", std::vector<double>{0.5, 7.0});
    w.put("i", std::vector<std::int64_t>{3, -1, 1LL << 40});
    w.commit();
  }
  CheckpointReader r(path);
  CHECK(r.floats("x/y/values") == std::vector<float>{1.5f, -2.0f, 3.25f});
  CHECK(r.get_int("progress/step") == 42);
  CHECK(r.get_string("experiment/name") == "quickstart");
  CHECK(!r.has("x/z"));
  CHECK_THROWS_WITH_AS(r.floats("nope"), doctest::Contains("no entry 'nope'"), Error);
  CHECK(r.doubles("d", 2) == std::vector<double>{0.5, 7.0});
  CHECK_THROWS_WITH_AS(r.doubles("d", 3), doctest::Contains("'d' holds 2 values, not 3"), DataError);
  CHECK(r.int64s("i") == std::vector<std::int64_t>{3, -1, 1LL << 40});
  CHECK(r.int64s("d")[1] == 7);  // doubles read as integers: states written so before int64 arrays
  {
    // A writer that never commits (a crash while writing) leaves the old file intact.
    CheckpointWriter w(path);
    w.put_int("progress/step", 43);
  }
  CHECK(!fs::exists(path + ".tmp"));
  CHECK(CheckpointReader(path).get_int("progress/step") == 42);
  std::ofstream(dir + "/trunc.h5") << "not hdf5";
  CHECK_THROWS_AS(CheckpointReader(dir + "/trunc.h5"), DataError);
}

TEST_CASE("optimizers: saved and loaded with their slots and iterations; another optimizer is an error") {
  const std::string dir = temp_dir("ckpt-opt");
  auto be = make_backend("cpu");
  ParameterSet w;
  w.add("dense/kernel", {3, 2});
  w.allocate(*be);
  auto rmsprop = nn::make_optimizer(nn::OptimizerConfig::defaults("rmsprop"), *be, w);
  rmsprop->set_iterations(7);
  auto& ms = *rmsprop->slots().front().second;
  Tensor m = ms.flat();
  std::vector<float> slot(ms.size());  // the 6 weights, then the zero gap to the segment alignment
  for (std::size_t i = 0; i < 6; ++i) slot[i] = static_cast<float>(i + 1);
  be->from_host(Tensor::from(m.shape(), slot), m);
  {
    CheckpointWriter out(dir + "/o.h5");
    save_optimizer(out, "optimizer/generator", *rmsprop, *be);
    // What a master rule's checkpoint held before the key was "name".
    out.put_string("old/optimizer", "rmsprop");
    out.put_int("old/iterations", 3);
    save_parameters(out, "old/ms", ms, *be);
    out.commit();
  }
  const CheckpointReader r(dir + "/o.h5");
  auto again = nn::make_optimizer(nn::OptimizerConfig::defaults("rmsprop"), *be, w);
  load_optimizer(r, "optimizer/generator", *again, *be, "generator");
  CHECK(again->iterations() == 7);
  const Tensor got = be->to_host(again->slots().front().second->flat());
  CHECK(std::vector<float>(got.values().begin(), got.values().end()) == slot);
  load_optimizer(r, "old", *again, *be, "master");
  CHECK(again->iterations() == 3);
  auto adam = nn::make_optimizer(nn::OptimizerConfig::defaults("adam"), *be, w);
  CHECK_THROWS_WITH_AS(load_optimizer(r, "optimizer/generator", *adam, *be, "generator"),
                       doctest::Contains("the generator optimizer was 'rmsprop', this experiment uses 'adam'"),
                       DataError);
  CHECK_THROWS_WITH_AS(load_optimizer(r, "old", *adam, *be, "master"),
                       doctest::Contains("the master optimizer was 'rmsprop'"), DataError);
}

TEST_CASE("loading parameters into another model names the first difference") {
  auto be = make_backend("cpu");
  ParameterSet a, b;
  a.add("conv/kernel", {4, 2});
  a.add("conv/bias", {4});
  b.add("conv/kernel", {4, 3});
  b.add("conv/bias", {4});
  a.allocate(*be);
  b.allocate(*be);
  const std::string path = temp_dir("layout") + "/p.h5";
  CheckpointWriter w(path);
  save_parameters(w, "model", a, *be);
  w.commit();
  CHECK_THROWS_WITH_AS(load_parameters(CheckpointReader(path), "model", b, *be),
                       doctest::Contains("parameter layouts differ at 'conv/kernel"), DataError);
}

TEST_CASE("a checkpoint whose values are not finite (a damaged file) is refused, naming the file and entry") {
  auto be = make_backend("cpu");
  ParameterSet a;
  a.add("conv/kernel", {4, 2});
  a.allocate(*be);
  Tensor flat = a.flat();
  const Tensor host = be->to_host(flat);
  std::vector<float> v(host.values().begin(), host.values().end());
  std::fill(v.begin(), v.end(), 0.5F);
  v[5] = std::numeric_limits<float>::quiet_NaN();
  be->from_host(Tensor::from(flat.shape(), v), flat);
  const std::string path = temp_dir("nan") + "/p.h5";
  CheckpointWriter w(path);
  save_parameters(w, "model", a, *be);
  w.commit();
  CHECK_THROWS_WITH_AS(load_parameters(CheckpointReader(path), "model", a, *be),
                       doctest::Contains("'model/values' holds 1 value that is not finite (the first at index 5)"),
                       DataError);
}

TEST_CASE("a single-process run stopped and resumed ends with the same weights, bit for bit") {
  init_logging("warn");
  const std::string dir = temp_dir("resume");
  const std::string yaml = fmt::format(R"(
name: resume
seed: 7
model: {{name: 3dgan-25}}
data:
  train: {0}/data/*.h5
  simulate: {{events: 48, energy: [20, 200], events_per_file: 24, dir: {0}/data}}
training: {{batch: 2, max_updates: 4}}
validation: {{batches: 1}}
checkpoint: {{every: 2, keep: 5}}
logging: {{level: warn}}
)",
                                       dir);
  std::ofstream(dir + "/exp.yaml") << yaml;
  // Uninterrupted: 4 steps (of the real 3DGAN at batch 2: its BatchNorm state, its data files).
  const auto full = ExperimentConfig::load(dir + "/exp.yaml");
  const auto s1 = run_single_process(full, {dir + "/full", ""});
  CHECK(s1.steps == 4);
  // Interrupted after 2 steps (3 samples at batch 2: the 2nd step spends them), then resumed to 4.
  const auto part = ExperimentConfig::load(dir + "/exp.yaml", {"training.max_samples=3"});
  const auto s0 = run_single_process(part, {dir + "/split", ""});
  CHECK(s0.steps == 2);
  CHECK(s0.samples == 4);
  // A run killed after its last checkpoint had logged two more steps: the resumed run drops them
  // (it logs those steps again) instead of repeating them.
  std::ofstream(dir + "/split/metrics.csv", std::ios::app) << "step,0,3,6,1,1,9,9,9,9\nstep,0,4,8,1,1,9,9,9,9\n";
  const auto s2 = run_single_process(full, {"", dir + "/split"});
  CHECK(s2.steps == 4);
  CheckpointReader a(s1.last_checkpoint), b(s2.last_checkpoint);
  for (const char* name :
       {"model/generator/weights/values", "model/discriminator/weights/values", "model/generator/state/values",
        "model/discriminator/state/values", "optimizer/generator/ms/values", "optimizer/discriminator/ms/values"}) {
    INFO(name);
    const auto x = a.floats(name), y = b.floats(name);
    REQUIRE(x.size() == y.size());
    CHECK(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
  }
  // The metrics of the resumed run continue the file: 4 step rows in both.
  auto count_steps = [](const std::string& f) {
    std::ifstream in(f);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) n += line.starts_with("step,");
    return n;
  };
  CHECK(count_steps(dir + "/full/metrics.csv") == 4);
  CHECK(count_steps(dir + "/split/metrics.csv") == 4);
}

TEST_CASE("a resume that would change what the run trains is refused with both values; a later budget is taken") {
  init_logging("error");
  const std::string dir = temp_dir("resume-config");
  std::ofstream(dir + "/exp.yaml") << "name: r\nseed: 3\nmodel: {name: tiny-8}\ndata: {synthetic: {events: 64}}\n"
                                      "training: {batch: 4, max_samples: 8}\noptimizer: {lr: 0.001}\n"
                                      "checkpoint: {every: 1}\nlogging: {level: error}\n";
  const std::string run = dir + "/run";
  CHECK(run_single_process(ExperimentConfig::load(dir + "/exp.yaml"), {run, ""}).steps == 2);
  auto config = [&] { return YAML::LoadFile(run + "/config.yaml"); };
  auto text = [](const std::string& f) {
    std::ifstream in(f);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string before = text(run + "/config.yaml");
  // The seed and the batch decide what the checkpoints were trained on: both named, with both values.
  const auto refused =
      ExperimentConfig::load(dir + "/exp.yaml", {"seed=1", "training.batch=8", "training.max_samples=16"});
  std::string what;
  try {
    run_single_process(refused, {"", run});
  } catch (const ConfigError& e) {
    what = e.what();
  }
  INFO(what);
  CHECK(what.find("seed differs from the run's (" + run + "/config.yaml: 3, now: 1)") != std::string::npos);
  CHECK(what.find("training.batch differs from the run's (" + run + "/config.yaml: 4, now: 8)") != std::string::npos);
  CHECK(what.find("max_samples") == std::string::npos);  // a budget may change: not among the refused
  CHECK(what.find("mpigan train " + run + "/config.yaml --resume " + run) != std::string::npos);
  CHECK(text(run + "/config.yaml") == before);  // the run's record is untouched
  // A new run (no --resume) into it: refused before anything is written.
  const std::string metrics = text(run + "/metrics.csv");
  what.clear();
  try {
    run_single_process(ExperimentConfig::load(dir + "/exp.yaml", {"optimizer.lr=0.0005"}), {run, ""});
  } catch (const ConfigError& e) {
    what = e.what();
  }
  INFO(what);
  CHECK(what.find("'" + run + "' already holds a run (" + run + "/checkpoints/latest)") != std::string::npos);
  CHECK(what.find("--resume " + run) != std::string::npos);
  CHECK(text(run + "/config.yaml") == before);
  CHECK(text(run + "/metrics.csv") == metrics);
  // A resume of a directory that holds no run: refused, nothing created there.
  CHECK_THROWS_WITH_AS(RunDirectory(dir + "/none", true), doctest::Contains("no checkpoint found"), Error);
  CHECK_FALSE(std::filesystem::exists(dir + "/none"));
  // A later budget and a smaller learning rate are taken; config.yaml then holds them.
  const auto later = ExperimentConfig::load(dir + "/exp.yaml", {"training.max_samples=16", "optimizer.lr=0.0005"});
  CHECK(run_single_process(later, {"", run}).steps == 4);
  CHECK(config()["training"]["max_samples"].as<int>() == 16);
  CHECK(config()["seed"].as<int>() == 3);
  // The run's own configuration resumes it as it was.
  const auto own = ExperimentConfig::load(run + "/config.yaml", {"training.max_samples=24"});
  CHECK(run_single_process(own, {"", run}).steps == 6);
}

TEST_CASE("a run written by an earlier mpigan resumes: a model key its config.yaml lacks takes its default") {
  init_logging("error");
  const std::string dir = temp_dir("resume-older");
  std::ofstream(dir + "/exp.yaml") << "name: r\nseed: 3\nmodel: {name: tiny-8}\ndata: {synthetic: {events: 64}}\n"
                                      "training: {batch: 4, max_samples: 8}\noptimizer: {lr: 0.001}\n"
                                      "checkpoint: {every: 1}\nlogging: {level: error}\n";
  const std::string run = dir + "/run";
  CHECK(run_single_process(ExperimentConfig::load(dir + "/exp.yaml"), {run, ""}).steps == 2);
  // What an mpigan from before these keys existed wrote: the model section without them.
  YAML::Node older = YAML::LoadFile(run + "/config.yaml");
  REQUIRE(older["model"]["generator_width"]);
  REQUIRE(older["model"]["input"]);
  older["model"].remove("generator_width");
  older["model"].remove("input");
  older["model"]["loss_weights"].remove("hlf");
  std::ofstream(run + "/config.yaml") << older;
  // Resumed with its own configuration (as the refusal message advises): the absent keys hold this
  // version's defaults, which are what the run trained with.
  CHECK(
      run_single_process(ExperimentConfig::load(run + "/config.yaml", {"training.max_samples=16"}), {"", run}).steps ==
      4);
  CHECK(YAML::LoadFile(run + "/config.yaml")["model"]["generator_width"].as<int>() == 1);
  // A value other than the default for such a key still changes what the run trains: refused.
  std::ofstream(run + "/config.yaml") << older;
  std::string what;
  try {
    run_single_process(ExperimentConfig::load(run + "/config.yaml", {"model.input=concat", "training.max_samples=24"}),
                       {"", run});
  } catch (const ConfigError& e) {
    what = e.what();
  }
  INFO(what);
  CHECK(what.find("model.input differs from the run's (" + run + "/config.yaml: (absent), now: concat)") !=
        std::string::npos);
  CHECK(what.find("generator_width") == std::string::npos);
}

TEST_CASE("losses that blow up: the last sane checkpoint is spared and named; a resume keeps the run's scale") {
  init_logging("error");
  const std::string dir = temp_dir("ckpt-sane");
  std::ofstream(dir + "/exp.yaml") << fmt::format(R"(
name: sane
seed: 3
model: {{name: 3dgan-5}}
data:
  train: {0}/data/*.h5
  simulate: {{events: 256, energy: [20, 200], events_per_file: 256, dir: {0}/data}}
optimizer: {{name: rmsprop, lr: 1.0e-4, schedule: constant}}
training: {{batch: 16, epochs: 100, max_updates: 20}}
validation: {{every: 0, physics: {{every: 0}}}}
checkpoint: {{every: 10, keep: 1}}
logging: {{level: error}}
)",
                                                  dir);
  const std::string run = dir + "/run", ckpts = run + "/checkpoints/";
  const auto last_sane = [&](const std::string& name) {
    return CheckpointReader(ckpts + name).get_string("progress/last_sane");
  };
  // 20 healthy steps: each checkpoint is its own last sane one.
  run_single_process(ExperimentConfig::load(dir + "/exp.yaml"), {run, ""});
  CHECK(last_sane("step-00000020.h5") == "step-00000020.h5");
  const std::string scale = CheckpointReader(ckpts + "step-00000020.h5").get_string("progress/loss_scale");
  CHECK(std::isfinite(std::stod(scale)));
  // Resumed with a learning rate 10 000x too large: the losses grow by many orders of magnitude.
  // keep: 1, yet step 20 stays, and the blown-up checkpoints name it; the scale is the run's.
  run_single_process(ExperimentConfig::load(dir + "/exp.yaml", {"optimizer.lr=1", "training.max_updates=60"}),
                     {"", run});
  CHECK(fs::exists(ckpts + "step-00000020.h5"));
  CHECK(fs::exists(ckpts + "step-00000060.h5"));
  CHECK_FALSE(fs::exists(ckpts + "step-00000050.h5"));
  CHECK(last_sane("step-00000060.h5") == "step-00000020.h5");
  CHECK(CheckpointReader(ckpts + "step-00000060.h5").get_string("progress/loss_scale") == scale);
  // Larger still: the run either ends, still naming step 20, or diverges to inf/NaN; then its error
  // offers step 20 and 'latest' names it, so that --resume starts from sane weights and state.
  try {
    run_single_process(ExperimentConfig::load(dir + "/exp.yaml", {"optimizer.lr=1000", "training.max_updates=100"}),
                       {"", run});
    CHECK(last_sane("step-00000100.h5") == "step-00000020.h5");
  } catch (const NumericError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find(ckpts + "step-00000020.h5, the last checkpoint written before the losses grew 100x") !=
          std::string::npos);
    CHECK(RunDirectory(run, true).latest_checkpoint() == ckpts + "step-00000020.h5");
  }
  CHECK(fs::exists(ckpts + "step-00000020.h5"));
}

TEST_CASE("a checkpoint that cannot be written (disk full) is one clear error; the previous file stays") {
  // RLIMIT_FSIZE makes write() fail with EFBIG past 256 KiB, as a full disk fails it with ENOSPC,
  // without root or a small filesystem (docs/distributed.md "faults" has the tmpfs run).
  const std::string dir = temp_dir("ckpt-full");
  const std::string path = dir + "/step.h5";
  const std::vector<float> small(1000, 1.0f), big(1 << 18, 2.0f);  // 4 KB and 1 MiB
  {
    CheckpointWriter w(path);
    w.put("x", small);
    w.commit();
  }
  const auto before = fs::file_size(path);
  const std::string what = error_past_file_size<Error>(256 << 10, [&] {
    CheckpointWriter w(path);
    w.put("x", big);
    w.put_string("note", "a large checkpoint");
    w.commit();
  });
  INFO(what);
  CHECK(what.find("checkpoint '" + path + "' could not be written") != std::string::npos);
  CHECK(what.find("errno " + std::to_string(EFBIG)) != std::string::npos);
  CHECK(what.find("262144 of") != std::string::npos);  // bytes written before the failure
  CHECK(what.find("The previous checkpoint stays 'latest'") != std::string::npos);
  CHECK(what.size() < 600);  // one line, not HDF5's error stack
  CHECK_FALSE(fs::exists(path + ".tmp"));
  REQUIRE(fs::file_size(path) == before);  // the previous checkpoint is intact and readable
  CHECK(CheckpointReader(path).floats("x") == small);
  // A writer dropped without commit() leaves nothing and never throws.
  { CheckpointWriter w(dir + "/dropped.h5"); }
  CHECK_FALSE(fs::exists(dir + "/dropped.h5.tmp"));
}

TEST_CASE("a run directory's files on a full disk: the error names the system's reason; no empty .tmp is left") {
  const std::string dir = temp_dir("config-full");
  RunDirectory run(dir, false);
  YAML::Node resolved;
  resolved["name"] = "full";
  resolved["comment"] = std::string(4096, 'x');
  run.write_config(resolved);  // the previous config.yaml, intact afterwards
  const auto before = fs::file_size(dir + "/config.yaml");
  resolved["comment"] = std::string(8192, 'y');
  const std::string what = error_past_file_size<Error>(1024, [&] { run.write_config(resolved); });
  INFO(what);
  CHECK(what.find("run file '" + dir + "/config.yaml' could not be written: writing '" + dir +
                  "/config.yaml.tmp' failed after 1024 of") != std::string::npos);
  CHECK(what.find("'" + dir + "/config.yaml' is unchanged") != std::string::npos);
  CHECK(what.find("(errno " + std::to_string(EFBIG) + ")") != std::string::npos);
  CHECK_FALSE(fs::exists(dir + "/config.yaml.tmp"));
  CHECK(fs::file_size(dir + "/config.yaml") == before);
}

TEST_CASE("a session with a non-finite value anywhere names it, so that no checkpoint holds inf or NaN") {
  const std::string dir = temp_dir("ckpt-finite");
  std::ofstream(dir + "/exp.yaml") << "name: f\nmodel: {name: tiny-8}\ndata: {synthetic: {events: 64}}\n";
  const ExperimentConfig e = ExperimentConfig::load(dir + "/exp.yaml");
  Session s = Session::create(e, 1);
  CHECK(s.first_non_finite().empty());
  // BatchNorm state and optimizer slots count as much as the weights.
  auto& state = s.model->generator.state();
  REQUIRE(state.size() > 0);
  std::vector<float> host(state.size());
  copy_to_host(*s.backend, state, host);
  host[3] = std::numeric_limits<float>::infinity();
  copy_from_host(*s.backend, host, state);
  CHECK(s.first_non_finite() == fmt::format("generator BatchNorm state (1 of {} values)", host.size()));
  host[3] = 0.5f;
  copy_from_host(*s.backend, host, state);
  CHECK(s.first_non_finite().empty());
  auto slots = s.opt_d->slots();
  REQUIRE(!slots.empty());
  std::vector<float> slot(slots.front().second->size(), std::numeric_limits<float>::quiet_NaN());
  copy_from_host(*s.backend, slot, *slots.front().second);
  CHECK(s.first_non_finite().find("discriminator optimizer " + slots.front().first) == 0);
}

TEST_CASE("metrics.csv of an earlier version (fewer columns) is resumed: the header gains the new columns") {
  const std::string dir = temp_dir("csv-append");
  const std::string path = dir + "/metrics.csv";
  std::ofstream(path) << "kind,step,kpd\nphysics,4,0.5\n";
  {
    CsvLog log(path, {"kind", "step", "kpd", "empty_showers"}, true);
    log.row({"physics", "8", "0.25", "3"});
  }
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  CHECK(all.str() == "kind,step,kpd,empty_showers\nphysics,4,0.5\nphysics,8,0.25,3\n");
  // Columns that differ otherwise still refuse to append, naming both headers.
  CHECK_THROWS_WITH_AS(CsvLog(path, {"kind", "epoch"}, true), doctest::Contains("cannot append"), Error);
}
