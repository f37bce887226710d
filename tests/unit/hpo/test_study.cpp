// The search space's encoding, the `search:` section's validation (every problem with its line),
// the objective read from a metrics.csv, and the results database's replay after a torn write.
#include "mpigan/core/error.hpp"
#include "mpigan/hpo/results.hpp"
#include "mpigan/hpo/study.hpp"

#include "test_utils.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

using namespace mpigan;
using namespace mpigan::hpo;

namespace {

SearchSpace mixed_space() {
  return SearchSpace({{"optimizer.lr", DimKind::log_real, 1e-4, 1e-2, {}},
                      {"training.batch", DimKind::integer, 8, 64, {}},
                      {"model.latent", DimKind::log_integer, 16, 256, {}},
                      {"optimizer.name", DimKind::categorical, 0, 0, {"rmsprop", "adam", "sgd"}},
                      {"model.dropout", DimKind::real, 0.0, 0.5, {}}});
}

/// The document's problems as doc.finish() reports them ("" when it has none).
std::string problems_of(const ConfigDocument& doc) {
  try {
    doc.finish();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("search space: encoding by hand, decoding back, sampling inside") {
  const SearchSpace s = mixed_space();
  CHECK(s.encoded_size() == 4 + 3);  // four numeric coordinates, a one-hot block of three
  const Point p{1e-3, 8, 256, 1, 0.25};
  const Eigen::VectorXd u = s.encode(p);
  // log-real: (ln 1e-3 - ln 1e-4) / (ln 1e-2 - ln 1e-4) = 1/2.
  CHECK(u[0] == doctest::Approx(0.5).epsilon(1e-12));
  // integer [8, 64]: each integer owns an equal share of [7.5, 64.5]; 8 sits at 0.5 / 57.
  CHECK(u[1] == doctest::Approx(0.5 / 57).epsilon(1e-6));
  // log-integer [16, 256]: the shares are [15.5, 256.5] in log space; 256 is the middle of its own.
  CHECK(u[2] == doctest::Approx((std::log(256.0) - std::log(15.5)) / (std::log(256.5) - std::log(15.5))).epsilon(1e-6));
  CHECK(u[3] == 0.0);
  CHECK(u[4] == 1.0);
  CHECK(u[5] == 0.0);
  CHECK(u[6] == doctest::Approx(0.5));
  const Point back = s.decode(u);
  for (std::size_t i = 0; i < p.size(); ++i) CHECK(back[i] == doctest::Approx(p[i]).epsilon(1e-9));
  CHECK(s.overrides(p) == std::vector<std::string>{"optimizer.lr=0.001", "training.batch=8", "model.latent=256",
                                                   "optimizer.name=adam", "model.dropout=0.25"});

  // Out-of-range encodings clamp; integers round; the largest coordinate picks the choice.
  Eigen::VectorXd v(7);
  v << -1, 2, 0.5, 0.1, 0.2, 0.9, 3;
  const Point q = s.decode(v);
  CHECK(q[0] == doctest::Approx(1e-4));
  CHECK(q[1] == 64);
  CHECK(q[2] == std::round(q[2]));
  CHECK(q[3] == 2);
  CHECK(q[4] == 0.5);
  CHECK(s.contains(q));

  // Uniform in log space: the median of log-real samples is near the geometric middle (1e-3),
  // and every integer of [8, 64] comes up.
  Rng rng(3);
  std::vector<double> lr;
  std::vector<int> seen(65, 0);
  for (int i = 0; i < 4000; ++i) {
    const Point r = s.sample(rng);
    REQUIRE(s.contains(r));
    lr.push_back(r[0]);
    seen[static_cast<std::size_t>(r[1])]++;
  }
  std::nth_element(lr.begin(), lr.begin() + 2000, lr.end());
  CHECK(lr[2000] == doctest::Approx(1e-3).epsilon(0.15));
  for (int k = 8; k <= 64; ++k) CHECK(seen[static_cast<std::size_t>(k)] > 30);  // 70 expected
}

TEST_CASE("search space: bad dimensions are refused with their name") {
  CHECK_THROWS_WITH_AS(SearchSpace({{"optimizer.lr", DimKind::log_real, 0.0, 1.0, {}}}),
                       doctest::Contains("'optimizer.lr' (log-real): a log scale needs low > 0"), ConfigError);
  CHECK_THROWS_WITH_AS(SearchSpace({{"training.batch", DimKind::integer, 1.5, 8, {}}}),
                       doctest::Contains("integer bounds must be whole"), ConfigError);
  CHECK_THROWS_WITH_AS(SearchSpace({{"optimizer.name", DimKind::categorical, 0, 0, {"adam"}}}),
                       doctest::Contains("at least 2 choices"), ConfigError);
  CHECK_THROWS_WITH_AS(SearchSpace({{"a", DimKind::real, 0, 1, {}}, {"a", DimKind::real, 0, 1, {}}}),
                       doctest::Contains("appears twice"), ConfigError);
}

TEST_CASE("search section: every problem at once, with its line, including keys the experiment refuses") {
  const std::string text = R"(name: t
search:
  dimensions:
    - {key: optimizer.lr, type: log-real, low: 0.0, high: 1.0e-2}
    - {key: optimizer.lrr, type: real, low: 0.1, high: 0.2}
    - {key: training.batch, type: integer, low: 4, hgh: 8}
    - {key: optimizer.name, type: categorical, choices: [adam, adamw]}
  objective: {metric: g_loss, mode: lowest}
  trials: 0
)";
  ConfigDocument doc = ConfigDocument::parse(text, "search.yaml");
  // The experiment stand-in: knows optimizer.lr, training.batch and optimizer.name, refuses adamw.
  const auto check = [](const std::vector<std::string>& ov) -> std::string {
    const std::string& o = ov.at(0);
    if (o.rfind("optimizer.lrr", 0) == 0) return "optimizer.lrr: unknown key";
    if (o == "optimizer.name=adamw") return "optimizer.name: 'adamw' is not one of rmsprop, adam, sgd";
    return "";
  };
  parse_study(doc, check);
  REQUIRE_FALSE(doc.ok());
  const std::string all = problems_of(doc);
  INFO(all);
  CHECK(all.find("search.yaml:4") != std::string::npos);  // the log scale at 0
  CHECK(all.find("a log scale needs low > 0") != std::string::npos);
  CHECK(all.find("search.yaml:5") != std::string::npos);  // the key the experiment does not know
  CHECK(all.find("optimizer.lrr: unknown key") != std::string::npos);
  CHECK(all.find("hgh") != std::string::npos);  // the typo in line 6
  CHECK(all.find("'adamw' is not one of") != std::string::npos);
  CHECK(all.find("'g_loss' is not a metrics.csv figure") != std::string::npos);
  CHECK(all.find("lowest") != std::string::npos);
  CHECK(all.find("search.trials") != std::string::npos);
}

TEST_CASE("search section: a valid one, with its defaults") {
  ConfigDocument doc = ConfigDocument::parse(R"(search:
  dimensions:
    - {key: optimizer.lr, type: log-real, low: 1.0e-4, high: 1.0e-2}
    - {key: optimizer.name, type: categorical, choices: [rmsprop, adam]}
  objective: {metric: val_g_loss, at: mean, last: 4}
  algorithm: evolution
  early_stopping: {rule: asha, eta: 2, min_samples: 256}
)",
                                             "ok.yaml");
  std::vector<std::string> probed;
  const StudyConfig s = parse_study(doc, [&](const std::vector<std::string>& ov) {
    probed.push_back(ov.at(0));
    return std::string();
  });
  doc.finish();
  CHECK(s.space.size() == 2);
  CHECK(probed == std::vector<std::string>{"optimizer.lr=0.0001", "optimizer.lr=0.01", "optimizer.name=rmsprop",
                                           "optimizer.name=adam"});
  CHECK(s.algorithm == "evolution");
  CHECK(s.trials == 20);
  CHECK(s.objective.source() == std::pair<std::string, std::string>{"validation", "g_loss"});
  CHECK(s.early_stopping.kind == PrunerKind::asha);
  CHECK(s.early_stopping.eta == 2);
  CHECK(s.early_stopping.min_resource == 256);
  CHECK(make_optimizer(s)->name() == "evolution");
}

TEST_CASE("search points: tried first, in order, the rest of each at the experiment's own values") {
  ConfigDocument doc = ConfigDocument::parse(R"(optimizer: {name: adam, lr: 2.0e-4}
training: {batch: 64}
search:
  dimensions:
    - {key: optimizer.lr, type: log-real, low: 1.0e-4, high: 1.0e-2}
    - {key: training.batch, type: integer, low: 16, high: 128}
    - {key: optimizer.name, type: categorical, choices: [rmsprop, adam]}
  algorithm: random
  trials: 5
  points:
    - {}
    - {optimizer.lr: 1.0e-3, optimizer.name: rmsprop}
)",
                                             "points.yaml");
  std::vector<std::vector<std::string>> checked;
  const StudyConfig s = parse_study(doc, [&](const std::vector<std::string>& ov) {
    checked.push_back(ov);
    return std::string();
  });
  doc.finish();
  REQUIRE(s.points.size() == 2);
  CHECK(s.points[0] == Point{2e-4, 64, 1});  // the experiment as written
  CHECK(s.points[1] == Point{1e-3, 64, 0});
  // Each point is checked against the whole experiment, after the dimensions' bounds and choices.
  REQUIRE(checked.size() == 6 + 2);
  CHECK(checked[6] == std::vector<std::string>{"optimizer.lr=0.0002", "training.batch=64", "optimizer.name=adam"});
  CHECK(checked[7] == std::vector<std::string>{"optimizer.lr=0.001", "training.batch=64", "optimizer.name=rmsprop"});

  // The points come first, whatever has finished; then the algorithm's own (random: inside the space,
  // from the stream it is given).
  const auto opt = make_optimizer(s);
  CHECK(opt->name() == "random");
  Rng rng(7);
  CHECK(opt->suggest({}, {}, rng) == s.points[0]);
  const std::vector<Point> running{s.points[0]};
  CHECK(opt->suggest({}, running, rng) == s.points[1]);
  const std::vector<Observation> done{{s.points[0], 0.3, false}, {s.points[1], 0.0, true}};
  Rng a(7), b(7);
  const Point third = opt->suggest(done, {}, a);
  CHECK(s.space.contains(third));
  CHECK(third == s.space.sample(b));
}

TEST_CASE("search points: every bad point named with its line; a dimension the experiment leaves unset must be given") {
  ConfigDocument doc = ConfigDocument::parse(R"(optimizer: {name: adamw, lr: 5.0e-2}
search:
  dimensions:
    - {key: optimizer.lr, type: log-real, low: 1.0e-4, high: 1.0e-2}
    - {key: training.batch, type: integer, low: 16, high: 128}
    - {key: optimizer.name, type: categorical, choices: [rmsprop, adam]}
  trials: 3
  points:
    - {optimizer.lr: 1.0e-3, training.batch: 20.5, optimizer.name: sgd}
    - {optimizer.beta1: 0.5, training.batch: 32, optimizer.name: adam}
    - {optimizer.lr: 1.0e-3, optimizer.name: adam}
    - {optimizer.lr: 2.0e-3, training.batch: 32, optimizer.name: rmsprop}
)",
                                             "bad-points.yaml");
  // The experiment stand-in refuses rmsprop at batch 32.
  const StudyConfig s = parse_study(doc, [](const std::vector<std::string>& ov) {
    return ov.size() == 3 && ov[1] == "training.batch=32" && ov[2] == "optimizer.name=rmsprop"
               ? std::string("optimizer: rmsprop needs a batch of 64")
               : std::string();
  });
  const std::string all = problems_of(doc);
  INFO(all);
  CHECK(s.points.empty());
  CHECK(all.find("bad-points.yaml:9") != std::string::npos);
  CHECK(all.find("20.5 is not a whole number") != std::string::npos);
  CHECK(all.find("'sgd' is not one of its choices (rmsprop, adam)") != std::string::npos);
  CHECK(all.find("bad-points.yaml:10") != std::string::npos);
  CHECK(all.find("'optimizer.beta1' is not a dimension of this search") != std::string::npos);
  CHECK(all.find("the experiment's own optimizer.lr = 5.0e-2 lies outside the dimension's [0.0001, 0.01]") !=
        std::string::npos);
  CHECK(all.find("the experiment does not set training.batch") != std::string::npos);  // the third point
  CHECK(all.find("rmsprop needs a batch of 64") != std::string::npos);                 // the fourth
  CHECK(all.find("4 points for 3 trials") != std::string::npos);
}

TEST_CASE("search section: asha's max_samples must leave a rung (at least min_samples * eta)") {
  const auto parse = [](const std::string& max_samples) {
    ConfigDocument doc = ConfigDocument::parse(R"(search:
  dimensions:
    - {key: optimizer.lr, type: log-real, low: 1.0e-4, high: 1.0e-2}
  early_stopping: {rule: asha, eta: 3, min_samples: 64000, max_samples: )" +
                                                   max_samples + "}\n",
                                               "asha.yaml");
    const StudyConfig s = parse_study(doc, [](const std::vector<std::string>&) { return std::string(); });
    return std::pair{s.early_stopping.max_resource, problems_of(doc)};
  };
  CHECK(parse("192000") == std::pair<std::int64_t, std::string>{192000, ""});
  const auto [budget, problems] = parse("191999");
  CHECK(budget == 191999);
  CHECK(problems.find("asha.yaml:4") != std::string::npos);
  CHECK(problems.find("191999 leaves no rung: it must be 0 (the trials' training.max_samples) or at least "
                      "min_samples * eta = 64000 * 3") != std::string::npos);
}

TEST_CASE("objective: last, best and mean of a curve, minimised or maximised; non-finite is no value") {
  Objective o;
  const std::vector<double> v{5, 2, 4, 3};
  CHECK(*o.of(v) == 3);
  o.at = Objective::At::best;
  CHECK(*o.of(v) == 2);
  o.at = Objective::At::mean;
  o.last = 3;
  CHECK(*o.of(v) == doctest::Approx(3.0));  // (2 + 4 + 3) / 3
  o.minimize = false;
  CHECK(*o.of(v) == doctest::Approx(-3.0));  // maximised: minus the value
  o.at = Objective::At::best;
  CHECK(*o.of(v) == -5);
  CHECK_FALSE(o.of({}));
  o.at = Objective::At::last;
  CHECK_FALSE(o.of({1.0, std::nan("")}));
}

TEST_CASE("read_curve: the objective's rows of a metrics.csv, by kind; a missing column is named") {
  const std::string dir = test::temp_dir("hpo-curve");
  const std::string path = dir + "/metrics.csv";
  std::ofstream(path) << "kind,epoch,step,samples,elapsed_s,g_loss,fpd_hlf\n"
                         "step,0,10,160,1.0,50.0,\n"
                         "validation,0,10,160,1.1,40.0,\n"
                         "physics,0,10,160,1.2,,900.5\n"
                         "validation,0,20,320,2.1,30.0,\n"
                         "physics,0,20,320,2.2,,nan\n"
                         "validation,0,20,320,2.3,30.0,\n";  // the final validation repeats the last row
  Objective val;
  val.metric = "val_g_loss";
  const Curve c = read_curve(path, val);
  REQUIRE(c.size() == 2);
  CHECK(c[0].step == 160);
  CHECK(c[0].value == 40.0);
  CHECK(c[1].step == 320);
  CHECK(c[1].value == 30.0);
  Objective fpd;
  const Curve p = read_curve(path, fpd);
  REQUIRE(p.size() == 2);
  CHECK(p[0].value == 900.5);
  CHECK(std::isnan(p[1].value));
  CHECK_FALSE(fpd.of({p[0].value, p[1].value}));  // the last figure is NaN: the trial has no value
  Objective kpd;
  kpd.metric = "kpd";
  CHECK_THROWS_WITH(read_curve(path, kpd), doctest::Contains("no column 'kpd'"));
  val.minimize = false;
  CHECK(minimised(c, val)[1].value == -30.0);
}

TEST_CASE("results database: replayed after a kill, the torn last line skipped") {
  const std::string dir = test::temp_dir("hpo-db");
  std::filesystem::remove(dir + "/trials.jsonl");
  {
    ResultsDb db(dir);
    TrialRecord t;
    t.id = 0;
    t.x = {1e-3, 2};
    t.overrides = {"optimizer.lr=0.001", "optimizer.name=sgd"};
    t.block = 1;
    t.run_dir = dir + "/trial-0000";
    t.config_hash = "00ff";
    db.start(t);
    t.status = TrialStatus::done;
    t.value = 12.5;
    t.spread = 0.5;
    t.folds = {{0, dir + "/trial-0000/fold-0", "done", 12.0, "", 3.0, 2.75},
               {1, dir + "/trial-0000/fold-1", "done", 13.0, "", 3.5}};
    db.end(t);
    TrialRecord u;
    u.id = 1;
    u.x = {1e-2, 0};
    u.block = 2;
    db.start(u);
  }
  std::ofstream(dir + "/trials.jsonl", std::ios::app) << R"({"event":"end","trial":1,"x":[0.01,0.0],"overr)";
  ResultsDb db(dir);
  CHECK(db.skipped_lines() == 1);
  REQUIRE(db.trials().size() == 2);
  const TrialRecord& t = db.trials()[0];
  CHECK(t.status == TrialStatus::done);
  CHECK(*t.value == 12.5);
  CHECK(t.x == Point{1e-3, 2});
  CHECK(t.config_hash == "00ff");
  REQUIRE(t.folds.size() == 2);
  CHECK(*t.folds[1].value == 13.0);
  CHECK(t.folds[1].seconds == 3.5);
  CHECK(t.folds[0].cpu_seconds == 2.75);
  CHECK(t.folds[1].cpu_seconds == -1.0);                 // not recorded
  CHECK(db.trials()[1].status == TrialStatus::running);  // its end was torn: still running, resumed as interrupted
  CHECK(db.next_id() == 2);
}

TEST_CASE("results database: a point cut off several times runs again once, and not after a rerun finished it") {
  auto trial = [](std::int64_t id, TrialStatus s, std::int64_t rerun_of) {
    TrialRecord t;
    t.id = id;
    t.status = s;
    t.rerun_of = rerun_of;
    return t;
  };
  using S = TrialStatus;
  // Point A (trial 1) interrupted, its rerun 2 interrupted, a second rerun of 1 (3) interrupted: once, the latest.
  std::vector<TrialRecord> ts = {trial(0, S::done, -1), trial(1, S::interrupted, -1), trial(2, S::interrupted, 1),
                                 trial(3, S::interrupted, 1)};
  CHECK(pending_reruns(ts) == std::vector<std::int64_t>{3});
  // A rerun of a rerun (chained ids) belongs to the same point.
  ts.push_back(trial(4, S::interrupted, 3));
  CHECK(pending_reruns(ts) == std::vector<std::int64_t>{4});
  // Once any trial of the point has finished (done, pruned, failed) or runs, nothing is repeated.
  for (S s : {S::done, S::pruned, S::failed, S::running}) {
    auto u = ts;
    u.push_back(trial(5, s, 1));
    CHECK(pending_reruns(u).empty());
  }
  // Two cut-off points, oldest first; a finished rerun of one leaves the other.
  ts.push_back(trial(5, S::interrupted, -1));
  CHECK(pending_reruns(ts) == std::vector<std::int64_t>{4, 5});
  ts.push_back(trial(6, S::done, 4));
  CHECK(pending_reruns(ts) == std::vector<std::int64_t>{5});
  // A rerun_of that does not point to an earlier trial is its own point.
  CHECK(pending_reruns({trial(0, S::interrupted, 7)}) == std::vector<std::int64_t>{0});
}
