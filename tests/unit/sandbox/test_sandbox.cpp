// The research sandbox (sandbox/): its clock models against their definitions, its event order
// against hand-computed staleness and throughput, determinism for a seed, every rule on tiny-8,
// bounded staleness (topology.max_lead), trees of sub-masters.
// That a synchronous sandbox run equals a real MPI job bit for bit, flat or under sub-masters, is
// checked in tests/mpi.
#include "mpigan/core/error.hpp"
#include "mpigan/core/stop_signal.hpp"
#include "mpigan/sandbox/sandbox.hpp"
#include "mpigan/train/checkpoint.hpp"

#include "test_utils.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

using namespace mpigan;
using namespace mpigan::sandbox;

namespace {

const char* kExperiment = R"(
name: sandbox-test
seed: 5
threads: 1
model: {name: tiny-8}
data:
  synthetic: {events: 1024, validation_events: 64}
training: {batch: 8, epochs: 1}
validation: {enabled: false}
logging: {level: warn, every: 1000}
)";

dist::DistExperiment experiment(const std::string& dir, int workers, const std::vector<std::string>& set) {
  const std::string path = dir + "/exp.yaml";
  std::ofstream(path) << kExperiment;
  return dist::load_distributed_workers(path, set, workers);
}

SandboxResult run(const std::string& name, int workers, const std::vector<std::string>& set, SandboxOptions o = {}) {
  const std::string dir = test::temp_dir(name);
  const auto d = experiment(dir, workers, set);
  o.workers = workers;
  o.out_dir = dir + "/run";
  return run_sandbox(d, o);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The comma-separated fields of a CSV line (no quoting in the run files).
std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  for (std::string f; std::getline(in, f, ',');) out.push_back(f);
  return out;
}

std::vector<float> final_weights(const SandboxResult& r) {
  REQUIRE(!r.master.last_checkpoint.empty());
  return train::CheckpointReader(r.master.last_checkpoint).floats("model/generator/weights/values");
}

}  // namespace

TEST_CASE("topology.virtual_compute: parsed, and its problems named with what to do") {
  const std::string dir = test::temp_dir("virtual-config");
  const auto d = experiment(
      dir, 3, {"topology.virtual_compute=lognormal:0.2,0.3", "training.max_updates=10", "validation.enabled=true"});
  REQUIRE(d.dist.virtual_compute.has_value());
  CHECK(d.dist.virtual_compute->kind() == ComputeModel::Kind::lognormal);
  CHECK_FALSE(d.experiment.validate);  // nothing is trained: nothing to validate
  CHECK_THROWS_WITH_AS(experiment(dir, 3, {"topology.virtual_compute=gauss:1", "training.max_updates=10"}),
                       doctest::Contains("virtual_compute"), ConfigError);
  CHECK_THROWS_WITH_AS(experiment(dir, 3, {"topology.virtual_compute=constant:0.1"}),
                       doctest::Contains("only training.max_updates or training.max_samples ends the run"),
                       ConfigError);
  CHECK(experiment(dir, 3, {"topology.virtual_compute=constant:0.1", "training.max_samples=100"})
            .dist.virtual_compute.has_value());
  CHECK_THROWS_WITH_AS(
      experiment(dir, 4, {"topology.virtual_compute=constant:0.1", "training.max_updates=10", "topology.group_size=2"}),
      doctest::Contains("virtual workers (virtual_compute) are single ranks"), ConfigError);
}

TEST_CASE("compute models: constant, shifted exponential and lognormal draws have their definitions' moments") {
  CHECK(ComputeModel::parse("constant:0.25").draw(1, 3, 7, 2) == doctest::Approx(0.5));
  for (const auto& [spec, mean] :
       {std::pair{"exp:0.2,0.05", 0.25}, std::pair{"lognormal:0.2,0.3", 0.2 * std::exp(0.045)}}) {
    const auto m = ComputeModel::parse(spec);
    CHECK(m.mean() == doctest::Approx(mean));
    double sum = 0, lo = 1e9;
    const int n = 20000;
    for (int i = 0; i < n; ++i) {
      const double x = m.draw(42, i % 4, i / 4, 1);
      sum += x;
      lo = std::min(lo, x);
    }
    INFO(spec);
    CHECK(sum / n == doctest::Approx(mean).epsilon(0.02));
    if (std::string(spec).starts_with("exp")) CHECK(lo >= 0.2);  // the shift is a floor
  }
  // A pure function of (seed, worker, index).
  const auto m = ComputeModel::parse("lognormal:0.2,0.3");
  CHECK(m.draw(1, 2, 3, 1) == m.draw(1, 2, 3, 1));
  CHECK(m.draw(1, 2, 3, 1) != m.draw(2, 2, 3, 1));
  CHECK(m.draw(1, 2, 3, 1) != m.draw(1, 3, 3, 1));
}

TEST_CASE("compute models: bad specs name the spec and what was expected") {
  CHECK_THROWS_WITH_AS(ComputeModel::parse("gauss:1"), doctest::Contains("expected constant:T"), ConfigError);
  CHECK_THROWS_WITH_AS(ComputeModel::parse("exp:0.1"), doctest::Contains("expected 2 numbers"), ConfigError);
  CHECK_THROWS_WITH_AS(ComputeModel::parse("constant:-1"), doctest::Contains("'-1' is not a number >= 0"), ConfigError);
  CHECK_THROWS_WITH_AS(ComputeModel::parse("replay:/nonexistent/updates.csv"), doctest::Contains("cannot open"),
                       DataError);
}

TEST_CASE("compute models: replay takes each real worker's compute_s in order, cycled") {
  const std::string dir = test::temp_dir("sandbox-replay");
  std::ofstream(dir + "/updates.csv") << "time_s,worker,compute_s\n0.1,0,0.5\n0.2,1,0.7\n0.3,0,0.6\n";
  const auto m = ComputeModel::parse("replay:" + dir + "/updates.csv");
  CHECK(m.draw(0, 0, 0, 1) == 0.5);
  CHECK(m.draw(0, 0, 1, 1) == 0.6);
  CHECK(m.draw(0, 0, 2, 1) == 0.5);
  CHECK(m.draw(0, 1, 5, 1) == 0.7);
  CHECK(m.draw(0, 2, 1, 1) == 0.6);  // virtual worker 2 replays real worker 0
  CHECK(m.mean() == doctest::Approx(0.6));
  std::ofstream(dir + "/bad.csv") << "time_s,worker,compute_s\n0.1,0,abc\n";
  CHECK_THROWS_WITH_AS(ComputeModel::parse("replay:" + dir + "/bad.csv"), doctest::Contains("bad.csv:2"), DataError);
}

TEST_CASE("compute models: cycle takes the time between each real worker's arrivals") {
  const std::string dir = test::temp_dir("sandbox-cycle");
  std::ofstream(dir + "/updates.csv") << "time_s,worker,compute_s\n0.25,0,0.2\n0.5,1,0.4\n1.0,0,0.2\n1.75,0,0.2\n";
  const auto m = ComputeModel::parse("cycle:" + dir + "/updates.csv");
  CHECK(m.kind() == ComputeModel::Kind::cycle);
  CHECK(m.draw(0, 0, 0, 1) == 0.25);  // the first arrival, from the start
  CHECK(m.draw(0, 0, 1, 1) == 0.75);  // 1.0 - 0.25
  CHECK(m.draw(0, 0, 2, 1) == 0.75);  // 1.75 - 1.0
  CHECK(m.draw(0, 1, 0, 1) == 0.5);
  CHECK(m.mean() == doctest::Approx((0.25 + 0.75 + 0.75 + 0.5) / 4));
  CHECK_THROWS_WITH_AS(ComputeModel::parse("cycle:"), doctest::Contains("expected cycle:PATH/updates.csv"),
                       ConfigError);
}

TEST_CASE("downpour, constant compute: every steady-state update is N-1 versions stale, throughput N/compute") {
  SandboxOptions o;
  o.compute = ComputeModel::parse("constant:0.25");
  o.master_s = 1e-4;
  const auto r = run("sandbox-downpour", 4, {"algorithm.name=downpour", "training.max_updates=80"}, o);
  CHECK(r.master.version == 80);
  REQUIRE(r.staleness_histogram.size() == 4);
  // The first round of updates sees 0, 1, 2, 3 newer versions; all later ones exactly 3.
  CHECK(r.staleness_histogram[0] == 1);
  CHECK(r.staleness_histogram[1] == 1);
  CHECK(r.staleness_histogram[2] == 1);
  CHECK(r.staleness_histogram[3] == 77);
  for (auto u : r.updates) CHECK(u == 20);
  // 4 workers x 8 samples every 0.25 s (plus transfers and the master's 0.1 ms per update).
  CHECK(r.samples_per_s == doctest::Approx(4 * 8 / 0.25).epsilon(0.01));
  CHECK(r.samples_per_s < 4 * 8 / 0.25);
}

TEST_CASE("a master slower than its workers bounds the throughput at batch / service time") {
  SandboxOptions o;
  o.compute = ComputeModel::parse("constant:0.01");
  o.master_s = 0.01;  // each of 8 workers computes in the time the master serves one update
  const auto r = run("sandbox-master-bound", 8, {"algorithm.name=downpour", "training.max_updates=200"}, o);
  CHECK(r.samples_per_s == doctest::Approx(8 / 0.01).epsilon(0.02));
  CHECK(r.mean_staleness > 6);  // the updates queue at the master
}

TEST_CASE("sync: rounds of all workers, no staleness; stragglers set the pace") {
  SandboxOptions o;
  o.compute = ComputeModel::parse("exp:0.2,0.1");
  const auto r = run("sandbox-sync", 3, {"algorithm.name=sync", "training.max_updates=20"}, o);
  CHECK(r.master.version == 20);
  REQUIRE(r.staleness_histogram.size() == 1);
  CHECK(r.staleness_histogram[0] == 60);
  // Each round waits for the slowest of 3: the expected maximum of 3 exponentials of mean 0.1 is
  // 0.1 * (1 + 1/2 + 1/3); 20 rounds of 24 samples.
  const double expected = 20 * 24 / (20 * (0.2 + 0.1 * (1 + 0.5 + 1.0 / 3)));
  CHECK(r.samples_per_s == doctest::Approx(expected).epsilon(0.25));
  CHECK(r.samples_per_s < 3 * 8 / 0.3);  // slower than asynchronous workers would be
}

TEST_CASE("training.max_samples: sync and downpour stop at the same samples, at N times fewer versions") {
  // 3 workers x batch 8: a round applies 24 samples, an update 8; 100 samples are spent at the first
  // version holding at least 100: sync's 5th round (120), downpour's 13th update (104).
  const auto sync = run("sandbox-samples-sync", 3, {"algorithm.name=sync", "training.max_samples=100"});
  CHECK(sync.master.version == 5);
  CHECK(sync.master.samples == 120);
  const auto down = run("sandbox-samples-downpour", 3, {"algorithm.name=downpour", "training.max_samples=100"});
  CHECK(down.master.version == 13);
  CHECK(down.master.samples == 104);
  // With both budgets the first one spent ends the run.
  const auto both =
      run("sandbox-samples-both", 3, {"algorithm.name=downpour", "training.max_samples=100", "training.max_updates=7"});
  CHECK(both.master.version == 7);
}

TEST_CASE("optimizer.schedule: the masters' and the workers' rates follow the cosine over the sample budget") {
  // downpour, 3 workers x batch 8, 200 samples: the n-th update is served at n x 8 samples, with
  // the factor of the cosine there (updates.csv's lr_factor).
  const std::string dir = test::temp_dir("sandbox-schedule");
  const auto d = experiment(dir, 3,
                            {"algorithm.name=downpour", "optimizer.schedule=cosine", "optimizer.final_fraction=0.1",
                             "training.max_samples=200"});
  SandboxOptions o;
  o.workers = 3;
  o.out_dir = dir + "/run";
  run_sandbox(d, o);
  std::ifstream in(o.out_dir + "/updates.csv");
  std::string line;
  std::getline(in, line);
  const auto head = fields(line);
  const auto col = static_cast<std::size_t>(std::find(head.begin(), head.end(), "lr_factor") - head.begin());
  REQUIRE(col < head.size());
  int n = 0;
  double last = 2.0;
  for (; std::getline(in, line); ++n) {
    const double f = std::stod(fields(line)[col]);
    CHECK(f == doctest::Approx(d.experiment.lr_schedule.at(8.0 * n / 200.0)).epsilon(1e-5));
    CHECK(f <= last);
    last = f;
  }
  CHECK(n == 25);
  CHECK(last < 0.11);  // 192 of 200 samples spent: 0.1 + 0.45 (1 + cos(0.96 pi)) = 0.1035
  // Local optimizers (easgd) take the factor with each reply: a cosine down to 1 is the constant
  // schedule, bit for bit; down to 0 it is not.
  const auto easgd = [](const std::string& name, const std::string& final_fraction) {
    return final_weights(run(name, 2,
                             {"algorithm.name=easgd", "optimizer.schedule=cosine",
                              "optimizer.final_fraction=" + final_fraction, "training.max_samples=160"}));
  };
  const auto constant =
      final_weights(run("sandbox-schedule-const", 2, {"algorithm.name=easgd", "training.max_samples=160"}));
  const auto flat = easgd("sandbox-schedule-flat", "1"), falling = easgd("sandbox-schedule-falling", "0");
  CHECK(std::memcmp(constant.data(), flat.data(), constant.size() * sizeof(float)) == 0);
  CHECK(std::memcmp(constant.data(), falling.data(), constant.size() * sizeof(float)) != 0);
  // A distributed run knows its budget only from max_samples or max_updates.
  CHECK_THROWS_WITH_AS(experiment(dir, 3, {"optimizer.schedule=cosine"}),
                       doctest::Contains("optimizer.schedule: 'cosine' runs over the run's budget"), ConfigError);
}

TEST_CASE("a sandbox run is the same, bit for bit, for the same seeds; another clock seed changes the order") {
  SandboxOptions o;
  o.compute = ComputeModel::parse("lognormal:0.2,0.5");
  o.seed = 3;
  const std::vector<std::string> set{"algorithm.name=downpour", "training.max_updates=40"};
  const auto a = run("sandbox-det-a", 4, set, o);
  const auto b = run("sandbox-det-b", 4, set, o);
  const auto wa = final_weights(a), wb = final_weights(b);
  REQUIRE(wa.size() == wb.size());
  CHECK(std::memcmp(wa.data(), wb.data(), wa.size() * sizeof(float)) == 0);
  CHECK(slurp(a.run_dir + "/updates.csv") == slurp(b.run_dir + "/updates.csv"));
  o.seed = 4;
  const auto c = run("sandbox-det-c", 4, set, o);
  CHECK(slurp(a.run_dir + "/updates.csv") != slurp(c.run_dir + "/updates.csv"));
}

namespace {

/// Both networks' weights and the BatchNorm state of a run's last checkpoint, bit for bit equal.
void check_same_model(const SandboxResult& a, const SandboxResult& b) {
  REQUIRE(!a.master.last_checkpoint.empty());
  REQUIRE(!b.master.last_checkpoint.empty());
  const train::CheckpointReader ra(a.master.last_checkpoint), rb(b.master.last_checkpoint);
  for (const char* name : {"model/generator/weights/values", "model/discriminator/weights/values", "model/state"}) {
    CAPTURE(name);
    const auto x = ra.floats(name), y = rb.floats(name);
    REQUIRE(x.size() == y.size());
    CHECK(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
  }
}

/// The same run, uninterrupted and stopped at @p stop_at updates then resumed, compared.
void check_resume_exact(const std::string& name, std::vector<std::string> set, std::int64_t stop_at,
                        std::int64_t end_at) {
  SandboxOptions o;
  o.compute = ComputeModel::parse("exp:0.1,0.1");
  const std::string dir = test::temp_dir(name);
  auto with_budget = [&](std::int64_t updates) {
    auto s = set;
    s.push_back(fmt::format("training.max_updates={}", updates));
    return experiment(dir, 3, s);
  };
  o.workers = 3;
  o.out_dir = dir + "/whole";
  const auto d_end = with_budget(end_at);
  const SandboxResult whole = run_sandbox(d_end, o);
  o.out_dir = dir + "/parts";
  const auto d_stop = with_budget(stop_at);
  const SandboxResult first = run_sandbox(d_stop, o);
  CHECK(first.master.version == stop_at);
  REQUIRE(first.state_file == state_path(o.out_dir));
  CHECK(first.state_version == stop_at);
  o.resume = true;
  const SandboxResult rest = run_sandbox(d_end, o);
  CHECK(rest.master.version == end_at);
  CHECK(rest.master.samples == whole.master.samples);
  CHECK(rest.simulated_s == whole.simulated_s);
  CHECK(rest.updates == whole.updates);
  CHECK(rest.staleness_histogram == whole.staleness_histogram);
  check_same_model(whole, rest);
  CHECK(slurp(whole.run_dir + "/updates.csv") == slurp(rest.run_dir + "/updates.csv"));
}

}  // namespace

TEST_CASE("a run stopped at its budget continues exactly from its state: every rule, bounded staleness, trees") {
  for (const char* rule : {"downpour", "easgd", "gem", "dc_asgd"}) {
    CAPTURE(rule);
    check_resume_exact(std::string("sandbox-resume-") + rule, {std::string("algorithm.name=") + rule}, 10, 24);
  }
  // sync: rounds of 3 updates, one version each
  check_resume_exact("sandbox-resume-sync", {"algorithm.name=sync"}, 3, 8);
  // deferred replies (topology.max_lead) pending at the stop are released first on resume
  check_resume_exact("sandbox-resume-lead", {"algorithm.name=downpour", "topology.max_lead=1"}, 10, 24);
  // trees: two sub-masters, their services, parent links and the top's, asynchronous and in rounds
  check_resume_exact("sandbox-resume-tree", {"algorithm.name=gem", "topology.masters=3", "topology.submaster_every=2"},
                     10, 24);
  check_resume_exact("sandbox-resume-tree-sync", {"algorithm.name=sync", "topology.masters=3"}, 3, 8);
}

TEST_CASE("a signal stops a flat run after the event in hand; --resume continues it exactly") {
  const std::string dir = test::temp_dir("sandbox-resume-signal");
  const auto d = experiment(dir, 3, {"algorithm.name=downpour", "training.max_updates=16"});
  SandboxOptions o;
  o.workers = 3;
  o.out_dir = dir + "/whole";
  const SandboxResult whole = run_sandbox(d, o);
  defer_stop_signals();
  std::raise(SIGUSR1);  // recorded: the run stops at its first version
  o.out_dir = dir + "/parts";
  const SandboxResult first = run_sandbox(d, o);
  reset_stop_signal();
  CHECK(first.master.stopped_by_signal == SIGUSR1);
  CHECK(first.master.version == 1);
  REQUIRE(!first.state_file.empty());
  o.resume = true;
  const SandboxResult rest = run_sandbox(d, o);
  CHECK(rest.master.stopped_by_signal == 0);
  CHECK(rest.master.version == 16);
  check_same_model(whole, rest);
  CHECK(slurp(whole.run_dir + "/updates.csv") == slurp(rest.run_dir + "/updates.csv"));
}

TEST_CASE("checkpoint.every: the state saved on the way resumes a run that ended otherwise (its data) exactly") {
  // A run killed outright (SIGKILL, a lost node) continues from its last periodic state. Here the
  // run ends with its data, which saves no state: the last periodic one is left to resume from.
  const std::string dir = test::temp_dir("sandbox-resume-every");
  // The learning rate falls along a cosine over 1 200 samples (the data ends at 960): the factor
  // each worker's reply carried and the masters' are part of the state.
  const auto d = experiment(
      dir, 3,
      {"algorithm.name=easgd", "checkpoint.every=16", "optimizer.schedule=cosine", "training.max_samples=1200"});
  SandboxOptions o;
  o.workers = 3;
  o.compute = ComputeModel::parse("exp:0.1,0.1");
  o.out_dir = dir + "/run";
  const SandboxResult whole = run_sandbox(d, o);
  REQUIRE(whole.master.version > 32);
  CHECK(whole.state_file == state_path(o.out_dir));
  const train::CheckpointReader state(whole.state_file);
  const std::int64_t saved_at = state.get_int("progress/version");
  CHECK(saved_at == whole.master.version / 16 * 16);
  CHECK(whole.state_version == saved_at);
  const auto log = slurp(whole.run_dir + "/updates.csv");
  const auto weights = train::CheckpointReader(whole.master.last_checkpoint).floats("model/generator/weights/values");
  o.resume = true;
  const SandboxResult rest = run_sandbox(d, o);
  CHECK(rest.master.version == whole.master.version);
  CHECK(rest.updates == whole.updates);
  CHECK(slurp(rest.run_dir + "/updates.csv") == log);
  const auto again = train::CheckpointReader(rest.master.last_checkpoint).floats("model/generator/weights/values");
  REQUIRE(again.size() == weights.size());
  CHECK(std::memcmp(again.data(), weights.data(), weights.size() * sizeof(float)) == 0);
}

TEST_CASE("--resume into another directory branches a run: the branch continues exactly, the original stays") {
  const std::string dir = test::temp_dir("sandbox-resume-branch");
  SandboxOptions o;
  o.workers = 3;
  o.compute = ComputeModel::parse("exp:0.1,0.1");
  o.out_dir = dir + "/whole";
  const auto d24 = experiment(dir, 3, {"algorithm.name=gem", "training.max_updates=24"});
  const SandboxResult whole = run_sandbox(d24, o);
  o.out_dir = dir + "/trunk";
  const auto d10 = experiment(dir, 3, {"algorithm.name=gem", "training.max_updates=10"});
  const SandboxResult trunk = run_sandbox(d10, o);
  const std::string trunk_log = slurp(trunk.run_dir + "/updates.csv");
  o.resume = true;
  o.resume_from = trunk.run_dir;
  o.out_dir = dir + "/branch";
  const SandboxResult branch = run_sandbox(d24, o);
  CHECK(branch.master.version == 24);
  check_same_model(whole, branch);
  CHECK(slurp(branch.run_dir + "/updates.csv") == slurp(whole.run_dir + "/updates.csv"));
  CHECK(slurp(trunk.run_dir + "/updates.csv") == trunk_log);
  CHECK(train::CheckpointReader(state_path(trunk.run_dir)).get_int("progress/version") == 10);
}

TEST_CASE("sandbox --resume: a missing state, another N, rule or tree, a spent budget are errors that say so") {
  const std::string dir = test::temp_dir("sandbox-resume-errors");
  SandboxOptions o;
  o.workers = 3;
  o.out_dir = dir + "/run";
  const auto d = experiment(dir, 3, {"algorithm.name=downpour", "training.max_updates=6"});
  o.resume = true;
  CHECK_THROWS_WITH_AS(run_sandbox(d, o), doctest::Contains("sandbox-state.h5"), ConfigError);
  o.resume = false;
  REQUIRE(!run_sandbox(d, o).state_file.empty());
  o.resume = true;
  CHECK_THROWS_WITH_AS(run_sandbox(d, o), doctest::Contains("raise training.max_samples"), ConfigError);
  const std::string config = slurp(o.out_dir + "/config.yaml");
  const auto more = experiment(dir, 4, {"algorithm.name=downpour", "training.max_updates=12"});
  o.workers = 4;
  CHECK_THROWS_WITH_AS(run_sandbox(more, o), doctest::Contains("--workers 3"), ConfigError);
  CHECK(slurp(o.out_dir + "/config.yaml") == config);  // a refused resume changes nothing
  o.workers = 3;
  const auto other_rule = experiment(dir, 3, {"algorithm.name=easgd", "training.max_updates=12"});
  CHECK_THROWS_WITH_AS(run_sandbox(other_rule, o), doctest::Contains("algorithm.name downpour"), ConfigError);
  const auto tree = experiment(dir, 3, {"algorithm.name=downpour", "training.max_updates=12", "topology.masters=3"});
  CHECK_THROWS_WITH_AS(run_sandbox(tree, o), doctest::Contains("topology.masters 1"), ConfigError);
  // What the run trains may not change either, as for `mpigan train --resume`: named with both values.
  const auto other_seed = experiment(dir, 3, {"algorithm.name=downpour", "training.max_updates=12", "seed=9"});
  const std::string seed = "seed differs from the run's (" + o.out_dir + "/config.yaml: 5, now: 9)";
  CHECK_THROWS_WITH_AS(run_sandbox(other_seed, o), doctest::Contains(seed.c_str()), ConfigError);
  CHECK(slurp(o.out_dir + "/config.yaml") == config);
}

TEST_CASE("every rule trains tiny-8 in the sandbox with 4 virtual workers: finite, every worker served") {
  for (const char* rule : {"sync", "downpour", "easgd", "gem", "dc_asgd"}) {
    INFO(rule);
    SandboxOptions o;
    o.compute = ComputeModel::parse("exp:0.1,0.05");
    const auto r = run(std::string("sandbox-rule-") + rule, 4,
                       {std::string("algorithm.name=") + rule, "training.max_updates=24"}, o);
    CHECK(r.master.failure.empty());
    CHECK(r.master.version == 24);
    for (auto u : r.updates) CHECK(u >= 4);
    for (float x : final_weights(r)) REQUIRE(std::isfinite(x));
    const std::string log = slurp(r.run_dir + "/updates.csv");
    CHECK(log.find("applied") != std::string::npos);
  }
}

TEST_CASE("the data's epochs end a sandbox run, as they end a real one") {
  // 1024 training events (the 64 validation events are apart) / 8 per batch = 128 batches over
  // 4 shards: 32 updates each.
  const auto r = run("sandbox-epochs", 4, {"algorithm.name=downpour"});
  CHECK(r.master.version == 128);
  for (auto u : r.updates) CHECK(u == 32);
}

namespace {
/// The largest lead, in applied updates, of any virtual worker over another once all had one.
int max_lead_in(const SandboxResult& r, int workers) {
  std::ifstream in(r.run_dir + "/updates.csv");
  std::string line;
  std::getline(in, line);
  std::map<int, int> n;
  int worst = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    if (!f.at(15).starts_with("applied")) continue;
    ++n[std::stoi(f.at(2))];
    if (static_cast<int>(n.size()) < workers) continue;
    int lo = 1 << 30, hi = 0;
    for (const auto& [w, k] : n) lo = std::min(lo, k), hi = std::max(hi, k);
    worst = std::max(worst, hi - lo);
  }
  return worst;
}
}  // namespace

TEST_CASE("topology.max_lead in the sandbox: no worker runs more than max_lead + 1 updates ahead") {
  SandboxOptions o;
  o.compute = ComputeModel::parse("lognormal:0.2,1.0");  // a wide spread of step times
  for (const char* rule : {"downpour", "gem"}) {
    INFO(rule);
    const std::string r0 = std::string("sandbox-lead-free-") + rule, r1 = std::string("sandbox-lead-1-") + rule;
    const auto free_run = run(r0, 4, {std::string("algorithm.name=") + rule, "training.max_updates=100"}, o);
    const auto bounded =
        run(r1, 4, {std::string("algorithm.name=") + rule, "training.max_updates=100", "topology.max_lead=1"}, o);
    const int free_lead = max_lead_in(free_run, 4), lead = max_lead_in(bounded, 4);
    MESSAGE(std::string(rule) << ": lead unbounded " << free_lead << ", max_lead 1: " << lead);
    CHECK(free_lead > 3);  // the test can fail: unbounded, the fast draws run ahead
    CHECK(lead <= 2);
    CHECK(bounded.master.version == 100);
    CHECK(bounded.master.failure.empty());
    // Waiting costs throughput: the bounded run takes longer in simulated time.
    CHECK(bounded.simulated_s > free_run.simulated_s);
  }
}

TEST_CASE("sub-masters: each serves its share of the workers; staleness counts its own versions") {
  // 8 workers under 2 sub-masters (topology.masters 3): worker k goes to sub-master 1 + k mod 2,
  // so each serves 4. Constant compute, downpour: at its sub-master a worker's update is 3 versions
  // stale (its 3 siblings' updates came between its pull and its push; the first round 0, 1, 2);
  // at the top each sub-master's change is 1 version stale (the other's came in between).
  SandboxOptions o;
  o.compute = ComputeModel::parse("constant:0.25");
  o.master_s = 1e-4;
  const auto r =
      run("sandbox-tree", 8, {"algorithm.name=downpour", "topology.masters=3", "training.max_updates=80"}, o);
  CHECK(r.masters == 3);
  CHECK(r.master.version == 80);  // the top's versions: one per sub-master exchange
  CHECK(r.master.samples == 80 * 8);
  REQUIRE(r.staleness_histogram.size() == 4);
  CHECK(r.staleness_histogram[0] == 2);  // each sub-master's first update
  CHECK(r.staleness_histogram[1] == 2);
  CHECK(r.staleness_histogram[2] == 2);
  CHECK(r.staleness_histogram[3] == 74);
  REQUIRE(r.top_staleness_histogram.size() == 2);
  CHECK(r.top_staleness_histogram[0] == 1);
  CHECK(r.top_staleness_histogram[1] == 79);
  CHECK(r.top_mean_staleness == doctest::Approx(79.0 / 80));
  // In the top's versions a worker's update is 9 stale where one master would count N - 1 = 7:
  // its reply holds its sub-master's weights of before the exchange that followed its previous
  // update (the other sub-master's exchange came in between: +1), and that exchange itself (+1);
  // then the 7 other workers' exchanges. The first updates see 0 .. 8.
  REQUIRE(r.canonical_staleness_histogram.size() == 10);
  for (std::size_t s = 0; s < 9; ++s) CHECK(r.canonical_staleness_histogram[s] == 1);
  CHECK(r.canonical_staleness_histogram[9] == 71);
  for (auto u : r.updates) CHECK(u == 10);
  const std::string summary = slurp(r.run_dir + "/sandbox.json");
  CHECK(summary.find("\"masters\": 3") != std::string::npos);
  // The top's updates.csv: one row per sub-master exchange, with the mean losses of its workers'.
  std::ifstream updates(r.run_dir + "/updates.csv");
  std::string line;
  std::getline(updates, line);
  const auto columns = fields(line);
  const auto d_col = std::find(columns.begin(), columns.end(), "d_loss") - columns.begin();
  int rows = 0;
  while (std::getline(updates, line)) {
    const double d_loss = std::stod(fields(line).at(static_cast<std::size_t>(d_col)));
    CHECK(d_loss > 0.0);
    CHECK(std::isfinite(d_loss));
    ++rows;
  }
  CHECK(rows == 80);
  CHECK(summary.find("\"top_staleness_histogram\"") != std::string::npos);

  // Exchanging every 4 sub-master versions: the top sees a quarter of the versions, each of 4
  // updates (32 samples), and the run ends at the top's 20th.
  const auto every4 = run(
      "sandbox-tree-every4", 8,
      {"algorithm.name=downpour", "topology.masters=3", "topology.submaster_every=4", "training.max_updates=20"}, o);
  CHECK(every4.master.version == 20);
  CHECK(every4.master.samples == 20 * 4 * 8);

  // Synchronous: rounds of each sub-master's 4 workers, averaged over both sub-masters at the top;
  // no staleness anywhere, 64 samples per top version.
  const auto sync =
      run("sandbox-tree-sync", 8, {"algorithm.name=sync", "topology.masters=3", "training.max_updates=6"}, o);
  CHECK(sync.master.version == 6);
  CHECK(sync.master.samples == 6 * 64);
  REQUIRE(sync.staleness_histogram.size() == 1);
  CHECK(sync.staleness_histogram[0] == 48);
  REQUIRE(sync.top_staleness_histogram.size() == 1);
  CHECK(sync.top_staleness_histogram[0] == 12);
}

TEST_CASE("sub-masters: every rule trains tiny-8 under a tree; too few workers is an error that says so") {
  for (const char* rule : {"sync", "downpour", "easgd", "gem", "dc_asgd"}) {
    CAPTURE(rule);
    const auto r = run(std::string("sandbox-tree-") + rule, 6,
                       {std::string("algorithm.name=") + rule, "topology.masters=4", "training.max_updates=20"});
    CHECK(r.master.failure.empty());
    CHECK(r.master.version == 20);
    for (float x : final_weights(r)) REQUIRE(std::isfinite(x));
    for (auto u : r.updates) CHECK(u > 0);
  }
  const std::string dir = test::temp_dir("sandbox-tree-few");
  CHECK_THROWS_WITH_AS(experiment(dir, 4, {"topology.masters=3", "topology.submaster_scale=2"}),
                       doctest::Contains("topology.submaster_scale"), ConfigError);
  try {
    experiment(dir, 2, {"topology.masters=4"});
    FAIL("2 workers for 3 sub-masters were accepted");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).find("exp.yaml: topology: 2 worker groups for 3 sub-masters") != std::string::npos);
  }
}
