// Distributed training with MPICH, on the small learnable problem of the tiny-8 sandbox (synthetic
// toy showers): for every update rule and topology, training makes measurable progress (the
// generator's ECAL-sum error on held-out conditions falls), every worker contributes, the master
// serves fairly and does not spin, non-finite updates are rejected, and synchronous runs are
// bitwise reproducible, also across a stop and resume. Run by ctest under mpiexec with the rank
// count each case names (cases for other counts skip); each ctest entry has a time limit.
#define DOCTEST_CONFIG_IMPLEMENT
#include "test_utils.hpp"

#include "mpigan/algos/rule.hpp"
#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/core/mpi/comm.hpp"
#include "mpigan/data/synthetic.hpp"
#include "mpigan/dist/dist_config.hpp"
#include "mpigan/dist/launch.hpp"
#include "mpigan/dist/watchdog.hpp"
#include "mpigan/master/server.hpp"
#include "mpigan/models/gan_model.hpp"
#include "mpigan/models/gan_step.hpp"
#include "mpigan/sandbox/sandbox.hpp"
#include "mpigan/train/checkpoint.hpp"
#include "mpigan/worker/worker.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <yaml-cpp/yaml.h>

using namespace mpigan;
namespace fs = std::filesystem;

namespace {

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

/// Skips (visibly) unless run with @p n ranks.
bool ranks(int n) {
  if (world_size() == n) return true;
  if (world_rank() == 0) MESSAGE("SKIPPED: needs " << n << " ranks, running with " << world_size());
  return false;
}

/// A temporary directory of this job (ctest may run the 3-, 4- and 5-rank jobs at once): named by
/// rank 0's process id, created once.
const fs::path& job_dir() {
  static const fs::path dir = [] {
    int pid = static_cast<int>(::getpid());
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    fs::path d = fs::temp_directory_path() / ("mpigan-mpi-" + std::to_string(world_size()) + "-" + std::to_string(pid));
    if (world_rank() == 0) fs::create_directories(d);
    MPI_Barrier(MPI_COMM_WORLD);
    return d;
  }();
  return dir;
}

std::string run_dir(const std::string& name) {
  // Rank 0 chooses and clears the directory; everyone uses the same one.
  std::string dir = (job_dir() / name).string();
  if (world_rank() == 0) fs::remove_all(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  return dir;
}

const char* kBase = R"(
name: mpi-test
seed: 11
threads: 1
model: {name: tiny-8}
data:
  synthetic: {events: 1536, validation_events: 128}
training: {batch: 16, epochs: 2}
validation: {batches: 2}
checkpoint: {every: 0}
logging: {level: warn, every: 1000}
)";

dist::DistExperiment experiment(const std::vector<std::string>& set) {
  const std::string path = (job_dir() / "exp.yaml").string();
  if (world_rank() == 0) {
    // Written aside and renamed: a rank still reading the previous call's file keeps its copy.
    std::ofstream(path + ".tmp") << kBase;
    fs::rename(path + ".tmp", path);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return dist::load_distributed(path, set, world_size());
}

dist::JobSummary run(const std::string& dir, const std::vector<std::string>& set, bool resume = false) {
  const auto d = experiment(set);
  const Comm world = Comm::world();
  return dist::run_job(d, world, {resume ? "" : dir, resume ? dir : ""}, {master::run_master, worker::run_worker});
}

/// Checks that two checkpoints hold the same canonical G and D weights and BatchNorm state, bit
/// for bit.
void check_same_weights(const std::string& a, const std::string& b) {
  for (const char* name : {"model/generator/weights/values", "model/discriminator/weights/values", "model/state"}) {
    const auto x = train::CheckpointReader(a).floats(name);
    const auto y = train::CheckpointReader(b).floats(name);
    INFO(name << ": " << a << " against " << b);
    REQUIRE(x.size() == y.size());
    CHECK(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
  }
}

struct UpdateRow {
  int worker = 0;
  std::int64_t staleness = 0;
  std::string verdict;
  std::string d_loss;  ///< as written: equal text, equal bits
};

std::vector<UpdateRow> read_updates(const std::string& dir) {
  std::ifstream in(dir + "/updates.csv");
  std::string line;
  std::getline(in, line);
  std::vector<UpdateRow> rows;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string x;
    while (std::getline(ss, x, ',')) f.push_back(x);
    rows.push_back({std::stoi(f[2]), std::stoll(f[5]), f[15], f.size() > 16 ? f[16] : std::string()});
  }
  return rows;
}

/// Mean relative error of the generator's ECAL sum against the toy's 2 E/100, on held-out
/// conditions, for generator weights @p g (empty: the initial weights).
double generator_ecal_error(const std::vector<float>& g) {
  auto be = make_backend("cpu");
  auto m = models::make_gan({.name = "tiny-8"}, *be, 11);
  if (!g.empty()) std::copy(g.begin(), g.end(), m->generator.weights().data());
  models::StepConfig sc;
  sc.ecal_linear = 2.0f;
  models::GanStep step(*m, *be, sc, 3);
  Tensor e = Tensor::empty({64, 1});
  for (int i = 0; i < 64; ++i) e.data()[i] = 0.5f + 2.5f * static_cast<float>(i) / 63.0f;
  const Tensor img = step.generate(e, Tensor(), 5);
  double err = 0;
  for (int i = 0; i < 64; ++i) {
    double s = 0;
    for (int j = 0; j < 512; ++j) s += img.data()[i * 512 + j];
    err += std::abs(s - 2.0 * e.data()[i]) / (2.0 * e.data()[i]);
  }
  return err / 64;
}

std::vector<float> final_generator(const std::string& dir, const std::string& ckpt) {
  (void)dir;
  return train::CheckpointReader(ckpt).floats("model/generator/weights/values");
}

/// The assertions every healthy run must pass (rank 0).
void check_healthy_run(const std::string& what, const std::string& dir, const dist::JobSummary& s, int workers,
                       double max_error_ratio = 0.5) {
  INFO(what);
  REQUIRE(!s.master.last_checkpoint.empty());
  CHECK(fs::exists(dir + "/checkpoints/latest"));
  const auto rows = read_updates(dir);
  std::map<int, int> per_worker;
  for (const auto& r : rows)
    if (r.verdict.starts_with("applied")) ++per_worker[r.worker];
  CHECK(static_cast<int>(per_worker.size()) == workers);  // every worker contributed
  int lo = 1 << 30, hi = 0;
  for (const auto& [w, n] : per_worker) lo = std::min(lo, n), hi = std::max(hi, n);
  MESSAGE(what << ": updates per worker " << lo << ".." << hi << ", total " << rows.size());
  CHECK(lo >= 0.8 * hi);  // fair service: nobody starved
  const double e0 = generator_ecal_error({});
  const double e1 = generator_ecal_error(final_generator(dir, s.master.last_checkpoint));
  MESSAGE(what << ": generator ECAL-sum error " << e0 << " -> " << e1 << "; master CPU " << s.master.cpu_s << " s of "
               << s.master.wall_s << " s");
  CHECK(e1 < max_error_ratio * e0);
  // The master waits without spinning: well under one core even while serving.
  CHECK(s.master.cpu_s < 0.5 * s.master.wall_s);
}

}  // namespace

TEST_CASE("each update rule, 1 master + 3 workers: progress, every worker, fair service") {
  if (!ranks(4)) return;
  // Every registered rule (a new rule is covered as soon as it is in algos/registry.cpp).
  for (const std::string& rule : algos::algorithm_names()) {
    const std::string dir = run_dir("rule-" + rule);
    std::vector<std::string> set{"algorithm.name=" + rule};
    const auto s = run(dir, set);
    if (world_rank() != 0) continue;
    check_healthy_run(rule, dir, s, 3);
    if (std::string(rule) == "sync") {
      for (const auto& r : read_updates(dir)) CHECK(r.staleness == 0);
    }
    if (std::string(rule) == "downpour") {
      double st = 0;
      const auto rows = read_updates(dir);
      for (const auto& r : rows) st += static_cast<double>(r.staleness);
      MESSAGE("downpour mean staleness " << st / static_cast<double>(rows.size()));
      CHECK(st / static_cast<double>(rows.size()) > 0.5);  // asynchronous: updates arrive on older weights
    }
  }
}

TEST_CASE("training.max_samples ends sync and downpour at the same samples, whatever the versions") {
  if (!ranks(4)) return;
  // 3 workers x batch 16: a sync round applies 48 samples, a downpour update 16. 470 samples are
  // spent at the first version holding at least 470: sync's 10th round (480), downpour's 30th update.
  for (const auto& [rule, versions] : {std::pair{"sync", 10}, std::pair{"downpour", 30}}) {
    const std::string dir = run_dir(std::string("max-samples-") + rule);
    const auto s = run(dir, {std::string("algorithm.name=") + rule, "training.max_samples=470"});
    if (world_rank() != 0) continue;
    INFO(rule);
    CHECK(s.master.version == versions);
    CHECK(s.master.samples == 480);
  }
}

/// The largest lead, in applied updates, of any worker over another while all of them were
/// training (from the moment each had an update applied).
int max_lead_in(const std::string& dir, int workers) {
  std::map<int, int> n;
  int worst = 0;
  for (const auto& r : read_updates(dir)) {
    if (!r.verdict.starts_with("applied")) continue;
    ++n[r.worker];
    if (static_cast<int>(n.size()) < workers) continue;
    int lo = 1 << 30, hi = 0;
    for (const auto& [w, k] : n) lo = std::min(lo, k), hi = std::max(hi, k);
    worst = std::max(worst, hi - lo);
  }
  return worst;
}

TEST_CASE("topology.max_lead keeps every worker within max_lead + 1 updates of a straggler") {
  if (!ranks(4)) return;
  // Worker 0 pauses 60 ms before every exchange; the other two run at full speed.
  const test::ScopedEnv fault("MPIGAN_FAULT", "slow@0:60");
  const std::vector<std::string> common{"training.max_updates=90", "checkpoint.every=30"};
  auto with = [&](std::vector<std::string> v) {
    v.insert(v.end(), common.begin(), common.end());
    return v;
  };
  const std::string free_run = run_dir("lead-free"), bounded = run_dir("lead-bounded"), gem = run_dir("lead-gem");
  run(free_run, with({"algorithm.name=downpour"}));
  const auto s = run(bounded, with({"algorithm.name=downpour", "topology.max_lead=2"}));
  // GEM's pull-then-push exchange: the pull is what waits.
  const auto g = run(gem, with({"algorithm.name=gem", "topology.max_lead=2"}));
  if (world_rank() != 0) return;
  const int free_lead = max_lead_in(free_run, 3), lead = max_lead_in(bounded, 3), gem_lead = max_lead_in(gem, 3);
  MESSAGE("lead over the straggler: unbounded " << free_lead << ", max_lead 2: downpour " << lead << ", gem "
                                                << gem_lead);
  CHECK(free_lead > 6);  // without the bound the fast workers run far ahead (the test can fail)
  CHECK(lead <= 3);
  CHECK(gem_lead <= 3);
  // Every checkpoint completed (the deferred workers wrote their parts), and the runs finished.
  for (const auto* r : {&s, &g}) {
    CHECK(r->master.version == 90);
    CHECK(r->master.last_checkpoint.find("step-00000090") != std::string::npos);
  }
  CHECK(fs::exists(bounded + "/checkpoints/step-00000060.worker-0.h5"));
}

TEST_CASE("virtual workers (topology.virtual_compute): every rule's master serves the real protocol, no data") {
  if (!ranks(4)) return;
  for (const std::string& rule : algos::algorithm_names()) {
    const std::string dir = run_dir("virtual-" + rule);
    const auto s = run(dir, {"algorithm.name=" + rule, "topology.virtual_compute=constant:0.004",
                             "training.max_updates=30", "training.sync_every=2"});
    if (world_rank() != 0) continue;
    INFO(rule);
    CHECK(s.master.version == 30);
    CHECK(s.master.rejected == 0);                         // finite payloads of the real layout
    CHECK_FALSE(fs::exists(dir + "/checkpoints/latest"));  // nothing trained, nothing kept
    // Every worker was served; each update says what it "computed": 2 steps of 4 ms.
    std::map<int, int> per_worker;
    std::ifstream in(dir + "/updates.csv");
    std::string line;
    std::getline(in, line);
    REQUIRE(line.find(",compute_s,") != std::string::npos);
    int rows = 0;
    while (std::getline(in, line)) {
      std::vector<std::string> f;
      std::stringstream ss(line);
      for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
      ++per_worker[std::stoi(f[2])];
      CHECK(std::stod(f[14]) == doctest::Approx(0.008));
      CHECK(std::stoll(f[6]) == 32);  // samples: batch 16 x sync_every 2
      ++rows;
    }
    CHECK(per_worker.size() == 3);
    CHECK(rows >= 30);
  }
}

TEST_CASE("two masters (a sub-master tree) and worker groups of 2") {
  if (!ranks(5)) return;
  {
    const std::string dir = run_dir("tree");
    // rank 0 top master, ranks 1-2 sub-masters, ranks 3-4 one worker each
    const auto s = run(dir, {"topology.masters=3", "algorithm.name=downpour"});
    if (world_rank() == 0) {
      check_healthy_run("tree of 2 sub-masters", dir, s, 2);
      // Each sub-master's exchange reports the mean losses of its workers' updates since the last.
      for (const auto& r : read_updates(dir))
        if (r.verdict == "applied") CHECK(std::stod(r.d_loss) > 0.0);
    }
  }
  {
    // GEM with its default rmsprop proposals (bounded by ~lr per weight). Its plain-SGD proposals
    // ran away on this tree on one arrival order (ECAL-sum error 5e13 in a fresh-clone CI run),
    // one of the reasons they are no longer the default.
    const std::string dir = run_dir("gem-tree");
    const auto s = run(dir, {"topology.masters=3", "algorithm.name=gem"});
    if (world_rank() == 0) check_healthy_run("gem under sub-masters", dir, s, 2);
  }
  {
    // The same tree with every payload as an MPI message (as between nodes).
    const std::string dir = run_dir("gem-tree-mpi");
    const auto s = run(dir, {"topology.masters=3", "algorithm.name=gem", "topology.shared_memory=false"});
    if (world_rank() == 0) check_healthy_run("gem under sub-masters, payloads over MPI", dir, s, 2);
  }
  {
    const std::string dir = run_dir("groups");
    // rank 0 master, ranks 1-2 group 0, ranks 3-4 group 1: each splits a batch of 16 into 2 x 8
    const auto s = run(dir, {"topology.group_size=2", "algorithm.name=sync"});
    if (world_rank() == 0) check_healthy_run("groups of 2, sync", dir, s, 2);
  }
  {
    const std::string dir = run_dir("groups-local");
    const auto s = run(dir, {"topology.group_size=2", "algorithm.name=easgd"});
    if (world_rank() == 0) check_healthy_run("groups of 2, easgd (local training)", dir, s, 2);
  }
}

TEST_CASE("a sub-master tree stopped and resumed continues each sub-master's own state") {
  if (!ranks(5)) return;
  // rank 0 top master, ranks 1-2 sub-masters (sync over their one worker each, with RMSprop
  // state of their own), ranks 3-4 workers. Synchronous: bit for bit the uninterrupted run.
  const std::vector<std::string> base{"topology.masters=3",         "algorithm.name=sync",     "optimizer.name=rmsprop",
                                      "topology.submaster_every=2", "training.max_updates=12", "checkpoint.every=4"};
  const std::string a = run_dir("tree-sync-a"), b = run_dir("tree-sync-b");
  const auto sa = run(a, base);
  std::vector<std::string> first = base;
  first.push_back("training.max_updates=4");
  run(b, first);
  const auto sb = run(b, base, true);
  if (world_rank() == 0) {
    CHECK(sa.master.version == 12);
    CHECK(sb.master.version == 12);
    check_same_weights(sa.master.last_checkpoint, sb.master.last_checkpoint);
    // The samples behind the canonical weights: each sub-master's pushes after the resume count
    // what it applied since, no more (a budget in training.max_samples stops where it would have).
    CHECK(sa.master.samples > 0);
    CHECK(sb.master.samples == sa.master.samples);
  }
  // Asynchronous: when the top master stops, a sub-master's last change is ignored; its part
  // says so, and the resumed sub-master pushes that change instead of dropping it.
  const std::string c = run_dir("tree-async");
  std::vector<std::string> async{"topology.masters=3", "algorithm.name=downpour", "topology.submaster_every=3",
                                 "training.max_updates=6", "checkpoint.every=0"};
  // The top's samples are those its sub-masters count as pushed; a part keeps both counts, and a
  // push the top stopped without applying is the sub-master's again (its samples go up with it).
  auto check_samples = [&](const dist::JobSummary& s, std::int64_t step) {
    std::int64_t own = s.master.samples, all[5] = {};
    MPI_Gather(&own, 1, MPI_INT64_T, all, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (world_rank() != 0) return;
    std::int64_t counted = 0;
    for (int sub : {1, 2}) {
      train::CheckpointReader r(fmt::format("{}/checkpoints/step-{:08d}.submaster-{}.h5", c, step, sub));
      CHECK(r.get_int("progress/samples") == all[sub]);
      CHECK(r.get_int("progress/samples_at_push") <= all[sub]);
      counted += r.get_int("progress/samples_at_push");
    }
    CHECK(all[0] > 0);
    CHECK(counted == all[0]);
  };
  check_samples(run(c, async), 6);
  if (world_rank() == 0) {
    int unapplied = 0;
    for (int sub : {1, 2}) {
      const auto part = fmt::format("{}/checkpoints/step-{:08d}.submaster-{}.h5", c, 6, sub);
      REQUIRE(fs::exists(part));
      train::CheckpointReader r(part);
      const auto w = r.floats("model/generator/weights/values");
      const auto pulled = r.floats("pulled/generator");
      const bool own = r.get_int("progress/unapplied") != 0;
      unapplied += own;
      // A change the top never applied is still the difference of the part's weights and pull.
      if (own) CHECK(std::memcmp(w.data(), pulled.data(), w.size() * sizeof(float)) != 0);
    }
    // The top stopped at its 6th update: the other sub-master's update in flight was ignored.
    CHECK(unapplied >= 1);
  }
  async.back() = "checkpoint.every=0";
  async[3] = "training.max_updates=12";
  const auto sc = run(c, async, true);
  check_samples(sc, 12);
  if (world_rank() == 0) {
    CHECK(sc.master.version == 12);
    const auto rows = read_updates(c);
    CHECK(std::count_if(rows.begin(), rows.end(), [](const UpdateRow& r) { return r.verdict == "applied"; }) >= 12);
  }
}

TEST_CASE("the sandbox reproduces a real synchronous sub-master tree bit for bit") {
  if (!ranks(5)) return;
  // rank 0 top master, ranks 1-2 sub-masters with RMSprop state of their own, ranks 3-4 workers;
  // the sandbox's 2 virtual workers under 2 virtual sub-masters, the same exchanges every 2 rounds.
  // The learning rate falls along the cosine: the top's factor reaches the sub-masters with its
  // replies, in the real job and in the sandbox.
  const std::vector<std::string> set{"topology.masters=3",          "algorithm.name=sync",
                                     "optimizer.name=rmsprop",      "topology.submaster_every=2",
                                     "training.max_updates=10",     "optimizer.schedule=cosine",
                                     "optimizer.final_fraction=0.1"};
  const auto real = run(run_dir("tree-sync-real"), set);
  const auto d = experiment(set);  // collective
  if (world_rank() != 0) return;
  sandbox::SandboxOptions o;
  o.workers = 2;
  o.out_dir = (job_dir() / "tree-sync-sandbox").string();
  const auto v = sandbox::run_sandbox(d, o);
  CHECK(v.masters == 3);
  CHECK(v.master.version == 10);
  CHECK(real.master.version == 10);
  check_same_weights(real.master.last_checkpoint, v.master.last_checkpoint);
  // Each sub-master served 20 rounds of its one worker; the top 10 rounds of both sub-masters.
  REQUIRE(v.staleness_histogram.size() == 1);
  CHECK(v.staleness_histogram[0] == 40);
  REQUIRE(v.top_staleness_histogram.size() == 1);
  CHECK(v.top_staleness_histogram[0] == 20);
}

TEST_CASE("worker_wait: auto spins only when the node's workers and their threads fit its CPUs") {
  CHECK(dist::worker_spins("spin", 8, 4, 2));
  CHECK_FALSE(dist::worker_spins("sleep", 1, 1, 64));
  CHECK(dist::worker_spins("auto", 2, 1, 2));
  CHECK(dist::worker_spins("auto", 3, 4, 12));
  CHECK_FALSE(dist::worker_spins("auto", 4, 1, 2));
  CHECK_FALSE(dist::worker_spins("auto", 2, 2, 3));
  CHECK_FALSE(dist::worker_spins("auto", 0, 1, 2));
  // This job runs on one node: every rank sees the same worker count and at least its own CPUs.
  dist::TopologyConfig cfg;
  const Comm world = Comm::world();
  const auto t = dist::Topology::build(world, cfg);
  CHECK(t.local_workers == world.size() - 1);
  cpu_set_t mine;
  REQUIRE(sched_getaffinity(0, sizeof mine, &mine) == 0);
  CHECK(t.local_cpus >= CPU_COUNT(&mine));
  CHECK(t.local_cpus <= static_cast<int>(std::thread::hardware_concurrency()));
  CHECK(world.allreduce_max(static_cast<double>(t.local_cpus)) == static_cast<double>(t.local_cpus));
}

TEST_CASE("sync is bitwise reproducible, with payloads in shared memory or MPI messages, also stopped and resumed") {
  if (!ranks(3)) return;
  const std::vector<std::string> base{"algorithm.name=sync", "training.max_updates=30", "checkpoint.every=10"};
  const std::string a = run_dir("sync-a"), b = run_dir("sync-b"), c = run_dir("sync-c");
  const auto sa = run(a, base);  // payloads through shared memory (all ranks share this node)
  std::vector<std::string> over_mpi = base;
  over_mpi.push_back("topology.shared_memory=false");
  over_mpi.push_back("topology.worker_wait=spin");  // how a worker waits must not change a bit
  const auto sb = run(b, over_mpi);
  // c: stop at 10, then resume to 30.
  std::vector<std::string> first = base;
  first.push_back("training.max_updates=10");
  first.push_back("topology.worker_wait=sleep");
  run(c, first);
  const auto sc = run(c, base, true);
  if (world_rank() != 0) return;
  check_same_weights(sa.master.last_checkpoint, sb.master.last_checkpoint);
  check_same_weights(sa.master.last_checkpoint, sc.master.last_checkpoint);
  CHECK(sa.master.version == 30);
  CHECK(sc.master.version == 30);
}

TEST_CASE("the sandbox reproduces a real synchronous job bit for bit, and a real downpour job's staleness") {
  if (!ranks(4)) return;
  const std::vector<std::string> sync{"algorithm.name=sync", "training.max_updates=20", "optimizer.schedule=cosine"};
  const std::string real = run_dir("sandbox-real");
  const auto s = run(real, sync);
  const std::string async_real = run_dir("sandbox-real-async");
  const std::vector<std::string> downpour{"algorithm.name=downpour", "training.max_updates=60"};
  run(async_real, downpour);
  const auto d_sync = experiment(sync), d_downpour = experiment(downpour);  // collective
  if (world_rank() != 0) return;
  sandbox::SandboxOptions o;
  o.workers = 3;
  o.out_dir = (job_dir() / "sandbox-virtual").string();
  const auto v = sandbox::run_sandbox(d_sync, o);
  check_same_weights(s.master.last_checkpoint, v.master.last_checkpoint);
  // Downpour with 3 workers, each with one update in flight: whatever their speeds, between a
  // worker's pull and its push the others make (N-1) r_others / r_self updates, so the mean
  // staleness over all updates is N-1 = 2 (less the first round's 0 and 1). The sandbox's
  // (constant compute) are exactly 2 after the first round; the real job's are spread by the OS
  // scheduling 4 processes on 2 cores (e.g. 0:5 1:15 2:22 3+:18 under ASan), but its mean holds.
  o.out_dir = (job_dir() / "sandbox-virtual-async").string();
  const auto va = sandbox::run_sandbox(d_downpour, o);
  std::map<std::int64_t, int> real_hist;
  double real_sum = 0;
  int applied = 0;  // updates arriving after the 60th are logged as ignored
  for (const auto& r : read_updates(async_real)) {
    if (!r.verdict.starts_with("applied")) continue;
    ++real_hist[r.staleness];
    real_sum += static_cast<double>(r.staleness);
    ++applied;
  }
  const double real_mean = real_sum / std::max(1, applied);
  MESSAGE("staleness, real job: 0:" << real_hist[0] << " 1:" << real_hist[1] << " 2:" << real_hist[2]
                                    << " 3+:" << 60 - real_hist[0] - real_hist[1] - real_hist[2] << ", mean "
                                    << real_mean << "; sandbox mean " << va.mean_staleness);
  REQUIRE(va.staleness_histogram.size() == 3);
  CHECK(va.staleness_histogram[2] == 58);
  CHECK(va.mean_staleness == doctest::Approx(117.0 / 60));
  REQUIRE(applied == 60);
  CHECK(real_mean == doctest::Approx(va.mean_staleness).epsilon(0.25));
}

TEST_CASE("a non-finite update is rejected and logged, never applied") {
  if (!ranks(3)) return;
  const std::string dir = run_dir("nan");
  const test::ScopedEnv fault("MPIGAN_FAULT", "nan_update@1:5");
  const auto s = run(dir, {"algorithm.name=downpour", "training.max_updates=40"});
  if (world_rank() != 0) return;
  CHECK(s.master.rejected == 1);
  int rejected = 0;
  for (const auto& r : read_updates(dir)) rejected += r.verdict == "rejected_nonfinite";
  CHECK(rejected == 1);
  for (float x : train::CheckpointReader(s.master.last_checkpoint).floats("model/generator/weights/values"))
    REQUIRE(std::isfinite(x));
}

TEST_CASE("a run whose every update is non-finite stops as diverged, with its last finite weights checkpointed") {
  if (!ranks(3)) return;
  const std::string dir = run_dir("diverged");
  // From their 4th exchange on, both workers send only non-finite updates: 3 + 3 applied, then
  // max_nonfinite = 5 rejections in a row end the run (a straggler's finite update arriving after
  // another worker's first NaN resets the count, so there may be more rejections than 5).
  const test::ScopedEnv fault("MPIGAN_FAULT", "nan_update@all:4+");
  const auto s = run(dir, {"algorithm.name=downpour", "training.max_updates=40", "training.max_nonfinite=5"});
  if (world_rank() != 0) return;
  CHECK(s.master.version == 6);
  CHECK(s.master.rejected >= 5);
  CHECK(s.master.failure.find("training diverged: 5 non-finite updates in a row") != std::string::npos);
  CHECK(s.master.failure.find("at version 6") != std::string::npos);
  std::ifstream failed(dir + "/FAILED");
  std::string line;
  std::getline(failed, line);
  CHECK(line == s.master.failure);
  REQUIRE(s.master.last_checkpoint.find("step-00000006") != std::string::npos);
  for (float x : train::CheckpointReader(s.master.last_checkpoint).floats("model/generator/weights/values"))
    REQUIRE(std::isfinite(x));
  int rejected = 0;
  for (const auto& r : read_updates(dir)) rejected += r.verdict == "rejected_nonfinite";
  CHECK(rejected == s.master.rejected);
}

TEST_CASE("--trace writes one Chrome-trace timeline with every rank's spans, in order and in time") {
  if (!ranks(3)) return;
  const std::string dir = run_dir("trace");
  const auto s = run(dir, {"algorithm.name=downpour", "training.max_updates=12", "logging.trace=true"});
  if (world_rank() != 0) return;
  // JSON is YAML: yaml-cpp parses the file (a malformed one throws here).
  const YAML::Node doc = YAML::LoadFile(dir + "/trace.json");
  const YAML::Node events = doc["traceEvents"];
  REQUIRE(events.IsSequence());
  std::map<int, std::string> process;               // pid -> name
  std::map<int, std::map<std::string, int>> spans;  // pid -> span name -> count
  double last_end = 0;
  for (const auto& e : events) {
    const int pid = e["pid"].as<int>();
    const auto ph = e["ph"].as<std::string>();
    if (ph == "M") process[pid] = e["args"]["name"].as<std::string>();
    if (ph != "X") continue;
    const double ts = e["ts"].as<double>(), dur = e["dur"].as<double>();
    CHECK(ts >= 0);
    CHECK(dur >= 0);
    last_end = std::max(last_end, ts + dur);
    ++spans[pid][e["name"].as<std::string>()];
  }
  CHECK(process[0] == "rank 0 master");
  CHECK(process[1] == "rank 1 worker 0");
  CHECK(process[2] == "rank 2 worker 1");
  CHECK(spans[0]["apply"] == s.master.applied);  // one per applied update
  CHECK(spans[0]["receive"] >= s.master.applied);
  for (int w : {1, 2}) {
    CHECK(spans[w]["compute"] >= 1);
    CHECK(spans[w]["compute"] == spans[w]["push"]);  // every step's gradient is pushed
  }
  CHECK(spans[1]["compute"] + spans[2]["compute"] >= s.master.applied);
  CHECK(last_end / 1e6 <= s.master.wall_s + 5.0);  // microseconds, within the run
}

TEST_CASE("early stopping by threshold ends the run at a validation") {
  if (!ranks(3)) return;
  const std::string dir = run_dir("early");
  // A threshold every validation meets: the first validation stops the run.
  const auto s = run(dir, {"algorithm.name=downpour", "validation.every=10",
                           "validation.early_stopping.metric=val_d_loss", "validation.early_stopping.threshold=1e9"});
  if (world_rank() != 0) return;
  CHECK(s.master.stopped_early);
  CHECK(s.master.version == 10);
}

TEST_CASE("physics validation on the master's thread: metrics rows, best.h5, the summary, early stopping on it") {
  if (!ranks(3)) return;
  const std::string dir = run_dir("physics");
  const auto s = run(dir, {"algorithm.name=downpour", "training.max_updates=40", "validation.physics.every=10",
                           "validation.physics.events=64", "validation.physics.batch=32"});
  if (world_rank() == 0) {
    // Scores run beside the serving loop: some may be skipped, never queued; the final weights
    // are always scored, and the best one kept.
    REQUIRE(s.master.physics.last.has_value());
    CHECK(s.master.physics.last->step == 40);
    CHECK(s.master.physics.last->events == 64);
    CHECK(std::isfinite(s.master.physics.last->fom));
    REQUIRE(s.master.physics.best.has_value());
    CHECK(*s.master.physics.best <= s.master.physics.last->fom);
    CHECK(fs::exists(dir + "/checkpoints/best.h5"));
    std::ifstream in(dir + "/metrics.csv");
    std::string line;
    int rows = 0;
    while (std::getline(in, line)) rows += line.starts_with("physics,");
    CHECK(rows >= 1);
    CHECK(rows + s.master.physics.skipped >= 4);  // at 10, 20, 30, 40
    CHECK(rows <= 4);
  }
  // Early stopping on the figure of merit: any finite score reaches 1e30.
  const std::string dir2 = run_dir("physics-early");
  const auto s2 = run(dir2, {"algorithm.name=downpour", "training.max_updates=400", "validation.physics.every=5",
                             "validation.physics.events=32", "validation.early_stopping.metric=fpd_hlf",
                             "validation.early_stopping.threshold=1e30"});
  if (world_rank() != 0) return;
  CHECK(s2.master.stopped_early);
  CHECK(s2.master.version < 400);
}

int main(int argc, char** argv) {
  // Rank 0 of each distributed run starts this executable again as its watchdog monitor.
  if (const auto rc = mpigan::dist::watchdog_monitor_main(argc, argv)) return *rc;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  init_logging("warn");
  doctest::Context ctx(argc, argv);
  // Rank 0 reports; the others still run every case (they are part of every run) and write their
  // report to a file of the job directory, named when anything failed.
  const std::string own_report = (job_dir() / ("rank-" + std::to_string(world_rank()) + ".txt")).string();
  if (world_rank() != 0) ctx.setOption("out", own_report.c_str());
  int rc = ctx.run();
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (world_rank() == 0) {
    if (worst != 0)
      std::printf("a case failed on some rank: the other ranks' reports are in %s/rank-*.txt\n", job_dir().c_str());
    else
      fs::remove_all(job_dir());
  }
  MPI_Finalize();
  return worst;
}

TEST_CASE("the sandbox replaying a real downpour job's cycles reproduces it update by update (N = 2, 3, 4)") {
  // The real job's arrival times (updates.csv time_s) are replayed as each
  // virtual worker's whole cycle, with no modelled network or master time: the arrivals keep the
  // real order, and then the sandbox's bookkeeping must give the same staleness for every update
  // and, computing each gradient for real on the weights that worker pulled, the same losses and
  // the same final weights, bit for bit. (Compute times alone, `replay:`, leave out the waits on
  // the master and the OS; docs/sandbox.md shows what that changes.)
  if (world_size() < 3) return;
  const std::vector<std::string> downpour{"algorithm.name=downpour", "training.max_updates=60"};
  const std::string real = run_dir("cycle-real");
  const auto s = run(real, downpour);
  const auto d = experiment(downpour);  // collective
  if (world_rank() != 0) return;
  sandbox::SandboxOptions o;
  o.workers = world_size() - 1;
  o.compute = sandbox::ComputeModel::parse("cycle:" + real + "/updates.csv");
  o.network.latency_s = 0;
  o.network.bandwidth_bytes_per_s = 1e18;
  o.master_s = 0;
  o.out_dir = (job_dir() / "cycle-virtual").string();
  const auto v = sandbox::run_sandbox(d, o);
  std::vector<UpdateRow> a, b;
  for (const auto& r : read_updates(real))
    if (r.verdict.starts_with("applied")) a.push_back(r);
  for (const auto& r : read_updates(o.out_dir))
    if (r.verdict.starts_with("applied")) b.push_back(r);
  INFO("workers " << o.workers);
  REQUIRE(a.size() == 60);
  REQUIRE(b.size() == 60);
  int same_staleness = 0, same_loss = 0;
  std::map<std::int64_t, int> hist;
  for (std::size_t i = 0; i < a.size(); ++i) {
    same_staleness += a[i].staleness == b[i].staleness;
    same_loss += a[i].d_loss == b[i].d_loss;
    ++hist[a[i].staleness];
  }
  std::string h;
  for (const auto& [k, n] : hist) h += fmt::format(" {}:{}", k, n);
  MESSAGE(o.workers << " workers: staleness" << h << "; the sandbox matches " << same_staleness
                    << " of 60 staleness values and " << same_loss << " of 60 losses");
  CHECK(same_staleness == 60);
  CHECK(same_loss == 60);
  check_same_weights(s.master.last_checkpoint, v.master.last_checkpoint);
}
