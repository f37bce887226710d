// Physics validation during training (train/physics_monitor.hpp): the figure of
// merit rows in metrics.csv, checkpoints/best.h5 following the best of them, early stopping on it,
// determinism, a diverged generator named as such, and the summary's warning when off the scale.
#include "test_utils.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/train/checkpoint.hpp"
#include "mpigan/train/early_stopper.hpp"
#include "mpigan/train/generate.hpp"
#include "mpigan/train/physics_monitor.hpp"
#include "mpigan/train/session.hpp"
#include "mpigan/train/sources.hpp"
#include "mpigan/train/trainer.hpp"

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

using namespace mpigan;
using namespace mpigan::train;
namespace fs = std::filesystem;

namespace {
using test::temp_dir;

const char* kExperiment = R"(
name: phys
seed: 5
threads: 2
model: {name: tiny-8}
data:
  synthetic: {events: 256, validation_events: 64}
training: {batch: 16, epochs: 1}
validation:
  every: 8
  batches: 1
  physics: {every: 4, events: 48, batch: 16}
checkpoint: {every: 0}
logging: {level: warn}
)";

ExperimentConfig experiment(const std::string& dir, const std::string& extra = "") {
  std::string text = kExperiment;
  text.insert(text.find("checkpoint:"), extra);
  std::ofstream(dir + "/exp.yaml") << text;
  return ExperimentConfig::load(dir + "/exp.yaml");
}

/// The physics rows of a metrics.csv: (step, fpd_hlf).
std::vector<std::pair<std::int64_t, double>> physics_rows(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  const auto fom_col = [&] {
    std::stringstream h(line);
    std::string c;
    for (int i = 0; std::getline(h, c, ','); ++i)
      if (c == "fpd_hlf") return i;
    return -1;
  }();
  REQUIRE(fom_col > 0);
  std::vector<std::pair<std::int64_t, double>> rows;
  while (std::getline(in, line)) {
    if (!line.starts_with("physics,")) continue;
    std::vector<std::string> f;
    std::stringstream s(line);
    std::string c;
    while (std::getline(s, c, ',')) f.push_back(c);
    REQUIRE(static_cast<int>(f.size()) > fom_col);
    rows.emplace_back(std::stoll(f[2]), std::stod(f[static_cast<std::size_t>(fom_col)]));
  }
  return rows;
}

/// A physics monitor on the test experiment in a fresh directory (best generator kept in
/// DIR/best.h5), and a session whose generator it scores.
struct Scoring {
  explicit Scoring(const std::string& name)
      : dir(temp_dir(name)),
        e(experiment(dir)),
        plan(DataPlan::open(e, false)),
        monitor(e, plan, dir + "/best.h5"),
        s(Session::create(e, 1)) {}
  /// Every generator weight set to @p v.
  void fill_generator(float v) {
    std::vector<float> w(s.model->generator.weights().size(), v);
    copy_from_host(*s.backend, w, s.model->generator.weights());
  }
  std::string dir;
  ExperimentConfig e;
  DataPlan plan;
  PhysicsMonitor monitor;
  Session s;
};

}  // namespace

TEST_CASE("physics validation: metrics rows, the best generator, determinism") {
  const std::string dir = temp_dir("physics-monitor");
  const ExperimentConfig e = experiment(dir);
  const auto summary = run_single_process(e, {dir + "/run", ""});
  CHECK(summary.steps == 16);
  CHECK_FALSE(summary.stopped_early);

  // Every 4 steps; the last step's score is not repeated at the end of the run.
  const auto rows = physics_rows(dir + "/run/metrics.csv");
  REQUIRE(rows.size() == 4);
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CHECK(rows[i].first == 4 * static_cast<std::int64_t>(i + 1));
    CHECK(std::isfinite(rows[i].second));
    CHECK(rows[i].second >= 0);
    best = std::min(best, rows[i].second);
  }
  REQUIRE(summary.physics.last.has_value());
  CHECK(summary.physics.last->step == 16);
  CHECK(summary.physics.last->fom == doctest::Approx(rows.back().second).epsilon(1e-9));
  CHECK(summary.physics.last->events == 48);
  REQUIRE(summary.physics.best.has_value());
  CHECK(*summary.physics.best == doctest::Approx(best).epsilon(1e-9));

  // best.h5 holds the generator of the best row: scoring it again gives that figure exactly
  // (fixed latent seed, same reference), and `generate` reads it.
  const std::string best_path = dir + "/run/checkpoints/best.h5";
  REQUIRE(fs::exists(best_path));
  const CheckpointReader r(best_path);
  CHECK(std::stod(r.get_string("physics/fpd_hlf")) == doctest::Approx(best).epsilon(1e-12));
  Session s = Session::create(e, 1);
  load_parameters(r, "model/generator/weights", s.model->generator.weights(), *s.backend);
  load_parameters(r, "model/generator/state", s.model->generator.state(), *s.backend);
  DataPlan plan = DataPlan::open(e, false);
  PhysicsMonitor monitor(e, plan, "");
  CHECK(monitor.reference_events() == 48);
  const PhysicsScore again = monitor.score(s, r.get_int("progress/step"), 0);
  CHECK(again.fom == doctest::Approx(best).epsilon(1e-6));
  CHECK(monitor.score(s, 0, 0).fom == again.fom);  // deterministic

  GenerateOptions o;
  o.events = 8;
  o.energy = std::pair{50.0, 100.0};
  o.out = dir + "/best-showers.h5";
  CHECK(generate_showers(locate_trained(best_path), o).events == 8);

  // A monitor opened on an existing best.h5 (a resumed run) must beat its figure.
  PhysicsMonitor resumed(e, plan, best_path);
  REQUIRE(resumed.best().has_value());
  CHECK(*resumed.best() == doctest::Approx(best).epsilon(1e-12));
  PhysicsScore worse = again;
  worse.fom = best * 2 + 1;
  CHECK_FALSE(resumed.keep_if_best(worse, s));
  PhysicsScore better = again;
  better.fom = best / 2;
  CHECK(resumed.keep_if_best(better, s));
  CHECK(std::stod(CheckpointReader(best_path).get_string("physics/fpd_hlf")) == doctest::Approx(best / 2));
}

TEST_CASE("physics validation: a diverged generator scores +inf and the summary says it is ruined") {
  Scoring t("physics-diverged");
  t.fill_generator(std::numeric_limits<float>::quiet_NaN());
  const PhysicsScore sc = t.monitor.score(t.s, 7, 112);
  CHECK(sc.diverged);
  CHECK(std::isinf(sc.fom));
  CHECK_FALSE(t.monitor.keep_if_best(sc, t.s));  // never kept as the best
  CHECK_FALSE(fs::exists(t.dir + "/best.h5"));
  PhysicsOutcome out{sc, std::nullopt, "", 0};
  CHECK(out.ruined());
  CHECK(out.summary().find("ruined") != std::string::npos);

  PhysicsScore off = sc;
  off.diverged = false;
  off.fom = 5 * kFomOffScale;
  out.last = off;
  CHECK(out.ruined());
  CHECK(out.summary().find("off the scale") != std::string::npos);
  off.fom = 0.5;
  out.last = off;
  CHECK_FALSE(out.ruined());
  CHECK(out.summary().find("WARNING") == std::string::npos);
}

TEST_CASE("physics validation: a dead generator (every shower empty) is named, and the summary warns") {
  Scoring t("physics-dead");
  const PhysicsScore alive = t.monitor.score(t.s, 0, 0);  // the initial generator makes showers
  CHECK(alive.empty < alive.events);
  CHECK_FALSE(alive.dead());
  // All weights zero: the output ReLU sees 0 everywhere, so every cell of every shower is 0.
  t.fill_generator(0.0f);
  const PhysicsScore sc = t.monitor.score(t.s, 9, 144);
  CHECK(sc.empty == 48);
  CHECK(sc.dead());
  CHECK_FALSE(sc.diverged);
  CHECK(sc.describe().find("dead: every one of the generator's 48 showers is empty") != std::string::npos);
  PhysicsOutcome out{sc, std::nullopt, "", 0};
  CHECK(out.ruined());
  CHECK(out.summary().find("WARNING: the generator is dead") != std::string::npos);
  const auto row = physics_row(metrics_columns(t.s.model->discriminator.output_names()), 0, 1.0, sc);
  CHECK(row[row.size() - 3] == "48");  // metrics.csv's empty_showers column
  CHECK(row.back().empty());           // auc_error: no classifier at 48 events (< kClassifierMinEvents)
  PhysicsScore with_auc = sc;
  with_auc.auc = 0.625;
  with_auc.auc_error = 0.0125;
  const auto cols = metrics_columns(t.s.model->discriminator.output_names());
  const auto auc_row = physics_row(cols, 0, 1.0, with_auc);
  REQUIRE(cols.size() >= 2);
  CHECK(cols[cols.size() - 2] == "auc");
  CHECK(cols.back() == "auc_error");
  CHECK(auc_row[auc_row.size() - 2] == "0.625");
  CHECK(auc_row.back() == "0.0125");

  // Part of the showers empty: alive, but the summary says it is dying, from 10 % of them on.
  PhysicsScore some = alive;
  some.fom = 0.5;
  some.empty = 4;
  PhysicsOutcome few{some, std::nullopt, "", 0};
  CHECK(few.summary().find("WARNING") == std::string::npos);  // 4 of 48: below 10 %
  few.last->empty = 5;
  CHECK_FALSE(few.ruined());
  CHECK(few.summary().find("WARNING: 5 of the generator's 48 showers (10 %) are empty") != std::string::npos);
  few.last->fom = 1e4;  // and off the scale too: both warnings
  CHECK(few.summary().find("off the scale") != std::string::npos);
  CHECK(few.summary().find("are empty") != std::string::npos);
}

TEST_CASE("physics validation with recalibrate_bn: scored on re-estimated statistics, training untouched") {
  const std::string dir = temp_dir("physics-recal");
  const ExperimentConfig plain = experiment(dir);
  CHECK_FALSE(plain.physics.recalibrate_bn.has_value());  // auto
  CHECK(plain.resolved["validation"]["physics"]["recalibrate_bn"].as<std::string>() == "auto");
  const ExperimentConfig& e = plain;
  ExperimentConfig recal = e;
  recal.physics.recalibrate_bn = 3;
  const auto a = run_single_process(plain, {dir + "/plain", ""});
  const auto b = run_single_process(recal, {dir + "/recal", ""});
  // One process trains on its own statistics: put back after each score, the training is the same
  // to the bit; the scores are not.
  const CheckpointReader ra(a.last_checkpoint), rb(b.last_checkpoint);
  for (const char* k :
       {"model/generator/weights/values", "model/generator/state/values", "model/discriminator/weights/values"}) {
    CAPTURE(k);
    CHECK(ra.floats(k) == rb.floats(k));
  }
  REQUIRE(b.physics.last.has_value());
  CHECK(b.physics.last->recalibrated == 3);
  CHECK(b.physics.last->describe().find("re-estimated over 3 batches") != std::string::npos);
  CHECK(b.physics.last->fom != a.physics.last->fom);
  // best.h5 keeps the statistics it was scored with: scored as it is, the same figure.
  const CheckpointReader best(dir + "/recal/checkpoints/best.h5");
  Session s = Session::create(e, 1);
  load_parameters(best, "model/generator/weights", s.model->generator.weights(), *s.backend);
  load_parameters(best, "model/generator/state", s.model->generator.state(), *s.backend);
  DataPlan plan = DataPlan::open(e, false);
  PhysicsMonitor monitor(e, plan, "");
  CHECK(monitor.score(s, 0, 0).fom == doctest::Approx(*b.physics.best).epsilon(1e-6));

  // The distributed master's monitor: the statistics handed over are re-estimated before the score.
  AsyncPhysicsMonitor async(e, plan, dir + "/async-best.h5");
  std::vector<float> w(s.model->generator.weights().size()), st(s.model->generator.state().size());
  copy_to_host(*s.backend, s.model->generator.weights(), w);
  std::vector<float> zero_state(st.size(), 0.0f);  // statistics that belong to no weights at all
  REQUIRE(async.start(w, zero_state, 5, 80, 3));
  const auto scored = async.wait();
  REQUIRE(scored.has_value());
  CHECK(scored->recalibrated == 3);
  monitor.recalibrate(s, 3);  // the same re-estimate, on the same weights: the same figure
  CHECK(monitor.score(s, 0, 0).fom == doctest::Approx(scored->fom).epsilon(1e-6));
  const auto kept = CheckpointReader(dir + "/async-best.h5").floats("model/generator/state/values");
  CHECK(std::any_of(kept.begin(), kept.end(), [](double x) { return x != 0.0; }));

  // Its configuration: a number of batches or auto.
  const auto with = [&](const std::string& v) {
    std::string text = kExperiment;
    text.replace(text.find("physics: {every: 4,"), 19, "physics: {recalibrate_bn: " + v + ", every: 4,");
    std::ofstream(dir + "/r.yaml") << text;
    return ExperimentConfig::load(dir + "/r.yaml");
  };
  CHECK(with("4").physics.recalibrate_bn == 4);
  CHECK(with("4").resolved["validation"]["physics"]["recalibrate_bn"].as<int>() == 4);
  CHECK_FALSE(with("auto").physics.recalibrate_bn.has_value());
  CHECK_THROWS_WITH_AS(with("-1"),
                       doctest::Contains("validation.physics.recalibrate_bn: '-1': expected a number of "
                                         "batches in [0, 10000], or 'auto'"),
                       ConfigError);
}

TEST_CASE("physics validation: early stopping on the figure of merit, and its configuration errors") {
  const std::string dir = temp_dir("physics-early");
  // Any finite figure reaches a threshold of 1e30: the run stops at its first physics validation.
  const ExperimentConfig e = experiment(dir, "  early_stopping: {metric: fpd_hlf, mode: min, threshold: 1.0e+30}\n");
  CHECK(e.early_stopping.metric == "fpd_hlf");
  const auto summary = run_single_process(e, {dir + "/run", ""});
  CHECK(summary.stopped_early);
  CHECK(summary.steps == 4);
  CHECK(physics_rows(dir + "/run/metrics.csv").size() == 1);

  std::ofstream(dir + "/bad.yaml") << R"(
model: {name: tiny-8}
data: {synthetic: {events: 64}}
validation:
  early_stopping: {metric: fpd_hlf, patience: 2}
  physics: {events: 3}
)";
  try {
    ExperimentConfig::load(dir + "/bad.yaml");
    FAIL("expected a ConfigError");
  } catch (const ConfigError& err) {
    const std::string what = err.what();
    CHECK(what.find("events") != std::string::npos);  // 3 < 10
  }
  std::ofstream(dir + "/bad2.yaml") << R"(
model: {name: tiny-8}
data: {synthetic: {events: 64}}
validation:
  early_stopping: {metric: fpd_hlf, patience: 2}
)";
  CHECK_THROWS_WITH_AS(ExperimentConfig::load(dir + "/bad2.yaml"), doctest::Contains("validation.physics"),
                       ConfigError);
}

TEST_CASE("early stopper: threshold and patience, minimised and maximised") {
  EarlyStoppingSpec spec;
  spec.enabled = true;
  spec.metric = "val_g_loss";
  spec.patience = 2;
  EarlyStopper min(spec);
  CHECK(min.watches("val_g_loss"));
  CHECK_FALSE(min.watches("fpd_hlf"));
  CHECK_FALSE(min.update(5));
  CHECK_FALSE(min.update(4));
  CHECK_FALSE(min.update(4));  // not better: 1 of 2
  CHECK_FALSE(min.update(3));  // better: the count restarts
  CHECK_FALSE(min.update(3.5));
  CHECK(min.update(3));  // the second validation in a row without improving on 3
  CHECK(*min.best() == 3);

  spec.minimize = false;
  spec.patience = 0;
  spec.threshold = 0.9;
  EarlyStopper max(spec);
  CHECK_FALSE(max.update(0.5));
  CHECK_FALSE(max.update(0.89));
  CHECK(max.update(0.9));
  spec.enabled = false;
  CHECK_FALSE(EarlyStopper(spec).watches("val_g_loss"));
}
