// The search's coordinator and its blocks (coordinator.hpp).
#include "mpigan/hpo/coordinator.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/core/rng.hpp"
#include "mpigan/core/stop_signal.hpp"
#include "mpigan/dist/dist_config.hpp"
#include "mpigan/hpo/results.hpp"
#include "mpigan/hpo/study.hpp"
#include "mpigan/train/experiment.hpp"
#include "mpigan/train/trainer.hpp"

#include <mpi.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

namespace mpigan::hpo {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr int kTagReady = 7101, kTagAssign = 7102, kTagResult = 7103, kTagPrune = 7104;
/// How often a waiting rank looks for its message: trials last minutes, a 20 ms answer is instant,
/// and a sleeping rank leaves its core to the trials (MPICH's blocking calls spin).
constexpr auto kPoll = std::chrono::milliseconds(20);
/// How often the running trials' curves are read for pruning: a validation row is seen within a
/// quarter of a second (the trial stops at its next validation).
constexpr auto kPrunePoll = std::chrono::milliseconds(250);

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void send_string(const Comm& c, const std::string& s, int dest, int tag) {
  MPIGAN_MPI_CHECK(MPI_Send(s.data(), static_cast<int>(s.size()), MPI_CHAR, dest, tag, c.get()));
}

/// Receives a string message from @p source with @p tag, sleeping between polls.
std::string recv_string(const Comm& c, int source, int tag, int* from = nullptr) {
  MPI_Status st;
  int flag = 0;
  while (true) {
    MPIGAN_MPI_CHECK(MPI_Iprobe(source, tag, c.get(), &flag, &st));
    if (flag) break;
    std::this_thread::sleep_for(kPoll);
  }
  int n = 0;
  MPIGAN_MPI_CHECK(MPI_Get_count(&st, MPI_CHAR, &n));
  std::string s(static_cast<std::size_t>(n), '\0');
  MPIGAN_MPI_CHECK(MPI_Recv(s.data(), n, MPI_CHAR, st.MPI_SOURCE, st.MPI_TAG, c.get(), MPI_STATUS_IGNORE));
  if (from) *from = st.MPI_SOURCE;
  return s;
}

/// Waits for a nonblocking collective without spinning.
void wait_sleeping(MPI_Request& r) {
  int done = 0;
  while (true) {
    MPIGAN_MPI_CHECK(MPI_Test(&r, &done, MPI_STATUS_IGNORE));
    if (done) return;
    std::this_thread::sleep_for(kPoll);
  }
}

/// Broadcasts a string from @p root of @p c (length, then bytes), sleeping while it waits.
std::string bcast_string(const Comm& c, std::string s, int root) {
  long long n = static_cast<long long>(s.size());
  MPI_Request r;
  MPIGAN_MPI_CHECK(MPI_Ibcast(&n, 1, MPI_LONG_LONG, root, c.get(), &r));
  wait_sleeping(r);
  s.resize(static_cast<std::size_t>(n));
  MPIGAN_MPI_CHECK(MPI_Ibcast(s.data(), static_cast<int>(n), MPI_CHAR, root, c.get(), &r));
  wait_sleeping(r);
  return s;
}

/// Block layout of the world: ranks 1..R-1 in blocks of B, each split into K folds of B/K ranks.
struct Layout {
  int ranks = 0, block_size = 1, folds = 1, blocks = 0, leftover = 0;
  int per_fold() const { return block_size / folds; }
  int block_of(int rank) const {
    return rank == 0 ? -1 : (rank - 1) / block_size < blocks ? (rank - 1) / block_size : -1;
  }
  int leader(int block) const { return 1 + block * block_size; }
  int fold_leader(int block, int fold) const { return leader(block) + fold * per_fold(); }
};

/// The base experiment loaded with @p overrides for a sub-job of @p ranks ranks; "" when valid,
/// else every problem.
std::string check_experiment(const OptimizeOptions& o, const std::vector<std::string>& overrides, int ranks) {
  std::vector<std::string> all = o.set;
  all.insert(all.end(), overrides.begin(), overrides.end());
  try {
    if (ranks > 1)
      dist::load_distributed(o.experiment, all, ranks);
    else
      train::ExperimentConfig::load(o.experiment, all, {"topology", "algorithm"});
  } catch (const ConfigError& e) {
    return e.what();
  }
  return {};
}

std::string config_hash(const OptimizeOptions& o, const Layout& l, const StudyConfig& s) {
  std::ifstream in(o.experiment);
  std::stringstream text;
  text << in.rdbuf();
  std::string key = text.str();
  for (const auto& x : o.set) key += "\n--set " + x;
  key += fmt::format("\nblock {} folds {} algorithm {} seed {}", l.block_size, l.folds, s.algorithm, s.seed);
  return fmt::format("{:016x}", hash_string(key));
}

/// The search directory, checked: a new search must not overwrite one, a resumed one must be the
/// same search (its hash). Throws ConfigError.
std::string check_search_dir(const OptimizeOptions& o, const Layout& l, const StudyConfig& s) {
  const auto e = train::ExperimentConfig::load(o.experiment, o.set, {"topology", "algorithm"});
  const std::string dir = o.out.empty() ? e.output_dir + "-search" : o.out;
  const std::string header = dir + "/search.json";
  if (o.resume) {
    std::ifstream in(header);
    if (!in) MPIGAN_THROW(ConfigError, "--resume {}: there is no search.json there (not a search directory)", dir);
    const std::string then = json::parse(in).at("hash").get<std::string>(), now = config_hash(o, l, s);
    if (then != now)
      MPIGAN_THROW(ConfigError,
                   "--resume {}: the experiment, its --set overrides, the block size, folds, algorithm or seed "
                   "changed since the search started (hash {} then, {} now); resume with the same ones or start a "
                   "new search directory",
                   dir, then, now);
  } else if (fs::exists(dir + "/trials.jsonl")) {
    MPIGAN_THROW(ConfigError,
                 "{} already holds a search (trials.jsonl): continue it with --resume, or choose another --out", dir);
  }
  return dir;
}

void write_header(const OptimizeOptions& o, const Layout& l, const StudyConfig& s, const std::string& dir) {
  fs::create_directories(dir);
  json dims = json::array();
  for (const Dimension& d : s.space.dims())
    dims.push_back(
        {{"key", d.key}, {"type", dim_kind_name(d.kind)}, {"low", d.low}, {"high", d.high}, {"choices", d.choices}});
  write_file_atomically(dir + "/search.json", json{{"experiment", o.experiment},
                                                   {"set", o.set},
                                                   {"hash", config_hash(o, l, s)},
                                                   {"algorithm", s.algorithm},
                                                   {"seed", s.seed},
                                                   {"trials", s.trials},
                                                   {"block_size", l.block_size},
                                                   {"folds", l.folds},
                                                   {"ranks", l.ranks},
                                                   {"objective", s.objective.metric},
                                                   {"mode", s.objective.minimize ? "min" : "max"},
                                                   {"early_stopping", pruner_kind_name(s.early_stopping.kind)},
                                                   {"dimensions", dims}}
                                                  .dump(2));
}

// ---------------------------------------------------------------- the coordinator (rank 0)

class Coordinator {
 public:
  Coordinator(const OptimizeOptions& o, const Comm& world, const Layout& l, StudyConfig s, std::string dir)
      : m_hash(config_hash(o, l, s)),
        m_o(o),
        m_world(world),
        m_l(l),
        m_s(std::move(s)),
        m_db(dir),
        m_optimizer(make_optimizer(m_s)),
        m_pruner(make_pruner(m_s.early_stopping)) {}

  OptimizeOutcome run() {
    m_t0 = now_s();
    close_interrupted();
    spdlog::info("search: {} trials of {} over {} dimension(s), {}, {} block(s) of {} rank(s){}", m_s.trials,
                 m_optimizer->name(), m_s.space.size(), m_s.objective.describe(), m_l.blocks, m_l.block_size,
                 m_l.folds > 1 ? fmt::format(", {} folds of {} rank(s)", m_l.folds, m_l.per_fold()) : "");
    int active = m_l.blocks;
    auto last_prune = std::chrono::steady_clock::now();
    while (active > 0) {
      MPI_Status st;
      int flag = 0;
      MPIGAN_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, m_world.get(), &flag, &st));
      if (!flag) {
        if (m_pruner->name() != "none" && std::chrono::steady_clock::now() - last_prune > kPrunePoll) {
          prune_running();
          last_prune = std::chrono::steady_clock::now();
        }
        std::this_thread::sleep_for(kPoll);
        continue;
      }
      int from = 0;
      const std::string msg = recv_string(m_world, st.MPI_SOURCE, st.MPI_TAG, &from);
      if (st.MPI_TAG == kTagReady) {
        if (!assign(from)) --active;
      } else if (st.MPI_TAG == kTagResult) {
        record(json::parse(msg));
      } else {
        MPIGAN_FATAL("search coordinator: unexpected message tag {} from rank {}", st.MPI_TAG, from);
      }
    }
    return finish();
  }

 private:
  /// Trials left running by a search that ended abruptly are closed as interrupted; their points
  /// run again first.
  void close_interrupted() {
    for (const TrialRecord& t : m_db.trials()) {
      if (t.status != TrialStatus::running) continue;
      TrialRecord c = t;
      c.status = TrialStatus::interrupted;
      c.ended = now_s();
      c.message =
          "interrupted: the search job ended while this trial ran (killed, or a rank crashed); its point runs again";
      m_db.end(c);
      spdlog::warn("trial {}: {}", t.id, c.message);
    }
    for (const TrialRecord& t : m_db.trials())
      if (t.status == TrialStatus::interrupted && !rerun_done(t.id)) m_reruns.push_back(t.id);
  }

  bool rerun_done(std::int64_t id) const {
    for (const TrialRecord& t : m_db.trials())
      if (t.rerun_of == id) return t.status != TrialStatus::interrupted;
    return false;
  }

  std::int64_t counted() const {
    std::int64_t n = 0;
    for (const TrialRecord& t : m_db.trials()) n += t.status != TrialStatus::interrupted;
    return n;
  }

  /// Hands the next trial to the block whose leader is @p leader; false (and "stop") when the
  /// search is complete or stopping.
  bool assign(int leader) {
    const int block = m_l.block_of(leader);
    if (stop_signal() != 0 || counted() >= m_s.trials) {
      send_string(m_world, json{{"stop", true}}.dump(), leader, kTagAssign);
      return false;
    }
    TrialRecord t;
    t.id = m_db.next_id();
    if (!m_reruns.empty()) {
      const TrialRecord& old = m_db.trials()[static_cast<std::size_t>(m_reruns.front())];
      t.x = old.x;
      t.rerun_of = old.id;
      m_reruns.erase(m_reruns.begin());
    } else {
      std::vector<Observation> done;
      std::vector<Point> pending;
      for (const TrialRecord& r : m_db.trials()) {
        if (r.status == TrialStatus::running) pending.push_back(r.x);
        const bool finished = r.status == TrialStatus::done || r.status == TrialStatus::pruned;
        if (finished && r.value)
          done.push_back({r.x, m_s.objective.minimize ? *r.value : -*r.value, false});
        else if (finished || r.status == TrialStatus::failed)
          done.push_back({r.x, 0.0, true});  // no value to learn from: worse than every finished trial
      }
      Rng rng(m_s.seed, 0x5EA2C4000000ull + static_cast<std::uint64_t>(t.id));
      t.x = m_optimizer->suggest(done, pending, rng);
      // The trial runs with the value as written in its override (6 significant digits): the
      // database keeps that value, so the optimiser learns what was really run.
      for (std::size_t i = 0; i < t.x.size(); ++i)
        if (m_s.space[i].numeric()) t.x[i] = std::stod(m_s.space.value_text(t.x, i));
    }
    t.overrides = m_s.space.overrides(t.x);
    t.config_hash = fmt::format("{:016x}", hash_string(fmt::format("{}\n{}", m_hash, fmt::join(t.overrides, "\n"))));
    t.block = block;
    t.run_dir = fmt::format("{}/trial-{:04d}", m_db.dir(), t.id);
    t.started = now_s();
    m_db.start(t);
    spdlog::info("trial {} -> block {}: {}", t.id, block, fmt::join(t.overrides, " "));
    send_string(m_world, json{{"trial", t.id}, {"overrides", t.overrides}, {"run_dir", t.run_dir}}.dump(), leader,
                kTagAssign);
    return true;
  }

  void record(const json& r) {
    TrialRecord t = m_db.trials()[r.at("trial").get<std::size_t>()];
    t.ended = now_s();
    std::vector<double> values;
    bool failed = false, interrupted = false, pruned = m_pruned.count(t.id) > 0;
    std::vector<std::string> messages;
    for (const json& f : r.at("folds")) {
      FoldResult fr{f.at("fold").get<int>(),
                    f.at("run_dir").get<std::string>(),
                    f.at("status").get<std::string>(),
                    std::nullopt,
                    f.at("message").get<std::string>(),
                    f.at("seconds").get<double>()};
      if (!f.at("value").is_null()) fr.value = f.at("value").get<double>();
      if (fr.status == "failed") failed = true;
      if (fr.status == "interrupted") interrupted = true;
      if (fr.value) values.push_back(*fr.value);
      if (!fr.message.empty()) messages.push_back(fmt::format("fold {}: {}", fr.fold, fr.message));
      t.folds.push_back(fr);
    }
    if (!failed && !interrupted && values.size() != t.folds.size()) {
      failed = true;
      messages.push_back(fmt::format("no finite value of {} was written", m_s.objective.metric));
    }
    t.status = interrupted ? TrialStatus::interrupted
               : failed    ? TrialStatus::failed
               : pruned    ? TrialStatus::pruned
                           : TrialStatus::done;
    if (!values.empty() && !failed) {
      double mean = 0, var = 0;
      for (double v : values) mean += v / static_cast<double>(values.size());
      for (double v : values) var += (v - mean) * (v - mean);
      t.value = mean;
      t.spread = values.size() > 1 ? std::sqrt(var / static_cast<double>(values.size() - 1)) : 0.0;
    }
    t.message = fmt::format("{}", fmt::join(messages, "; "));
    if (t.status == TrialStatus::pruned && !m_prune_reason[t.id].empty())
      t.message = "pruned: " + m_prune_reason[t.id] + (t.message.empty() ? "" : "; " + t.message);
    m_db.end(t);
    if (t.status == TrialStatus::interrupted) m_reruns.push_back(t.id);
    spdlog::info("trial {} {}: {}{}{} ({:.0f} s){}", t.id, trial_status_name(t.status), m_s.objective.metric,
                 t.value ? fmt::format(" {:.5g}", *t.value) : std::string(" -"),
                 t.folds.size() > 1 && t.value ? fmt::format(" ± {:.3g} over {} folds", t.spread, t.folds.size()) : "",
                 t.ended - t.started, t.message.empty() ? "" : " — " + t.message);
  }

  /// The minimised curve of fold @p fold of trial @p t (empty when its run has written none yet).
  Curve curve(const TrialRecord& t, int fold) {
    const std::string dir = m_l.folds > 1 ? fmt::format("{}/fold-{}", t.run_dir, fold) : t.run_dir;
    const bool finished = t.status != TrialStatus::running;
    const std::string key = fmt::format("{}#{}", t.id, fold);
    if (finished) {
      auto it = m_curves.find(key);
      if (it != m_curves.end()) return it->second;
    }
    Curve c;
    if (fs::exists(dir + "/metrics.csv")) {
      try {
        c = minimised(read_curve(dir + "/metrics.csv", m_s.objective), m_s.objective);
      } catch (const Error&) {
        c.clear();  // a run that fails is reported by its block
      }
    }
    if (finished) m_curves[key] = c;
    return c;
  }

  void prune_running() {
    for (const TrialRecord& t : m_db.trials()) {
      if (t.status != TrialStatus::running || m_pruned.count(t.id)) continue;
      for (int f = 0; f < m_l.folds; ++f) {
        const Curve mine = curve(t, f);
        if (mine.empty()) continue;
        std::vector<Curve> others;
        for (const TrialRecord& o : m_db.trials())
          if (o.id != t.id && o.status != TrialStatus::interrupted && o.status != TrialStatus::failed)
            others.push_back(curve(o, f));
        const PruneDecision d = m_pruner->decide(mine, others);
        if (!d.stop) continue;
        m_pruned.insert(t.id);
        m_prune_reason[t.id] = d.reason;
        spdlog::info("trial {}: pruned at {} samples ({})", t.id, mine.back().step, d.reason);
        const std::int64_t id = t.id;
        for (int g = 0; g < m_l.folds; ++g)
          MPIGAN_MPI_CHECK(MPI_Send(&id, 1, MPI_INT64_T, m_l.fold_leader(t.block, g), kTagPrune, m_world.get()));
        break;
      }
    }
  }

  OptimizeOutcome finish() {
    OptimizeOutcome out;
    out.search_dir = m_db.dir();
    const TrialRecord* best = nullptr;
    int n_done = 0, n_failed = 0, n_pruned = 0, n_interrupted = 0;
    for (const TrialRecord& t : m_db.trials()) {
      n_done += t.status == TrialStatus::done;
      n_failed += t.status == TrialStatus::failed;
      n_pruned += t.status == TrialStatus::pruned;
      n_interrupted += t.status == TrialStatus::interrupted && !rerun_done(t.id);
      if (t.status != TrialStatus::done || !t.value) continue;
      const double v = m_s.objective.minimize ? *t.value : -*t.value;
      if (!best || v < (m_s.objective.minimize ? *best->value : -*best->value)) best = &t;
    }
    print_overhead();
    std::printf("\nSearch %s: %d trial(s) done, %d pruned, %d failed%s.\n", m_db.dir().c_str(), n_done, n_pruned,
                n_failed,
                n_interrupted ? fmt::format(", {} interrupted (run again with --resume)", n_interrupted).c_str() : "");
    if (best) {
      out.best_trial = best->id;
      write_best(*best);
      std::printf("Best: trial %lld, %s %.6g%s with %s\nIts experiment: %s/best.yaml\n",
                  static_cast<long long>(best->id), m_s.objective.metric.c_str(), *best->value,
                  best->folds.size() > 1 ? fmt::format(" ± {:.3g}", best->spread).c_str() : "",
                  fmt::format("{}", fmt::join(best->overrides, " ")).c_str(), m_db.dir().c_str());
    } else {
      std::printf("No trial finished with a value of %s: no best experiment written.\n", m_s.objective.metric.c_str());
      out.status = stop_signal() != 0 ? 0 : 1;
    }
    std::fflush(stdout);
    return out;
  }

  /// The coordinator's overhead in this session: the fraction of the blocks' time spent in
  /// trials (the slowest fold of each), and the coordinator's own CPU time.
  void print_overhead() const {
    const double wall = now_s() - m_t0;
    double busy = 0;
    for (const TrialRecord& t : m_db.trials()) {
      if (t.started < m_t0 || t.status == TrialStatus::running) continue;
      double slowest = 0;
      for (const FoldResult& f : t.folds) slowest = std::max(slowest, f.seconds);
      busy += slowest;
    }
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    const double cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                       1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    if (wall <= 0 || m_l.blocks == 0) return;
    std::printf(
        "\nBlocks spent %.1f %% of their time training (%.0f s of trials over %d block(s) x %.0f s); the "
        "coordinator used %.1f s of CPU.\n",
        100.0 * busy / (wall * m_l.blocks), busy, m_l.blocks, wall, cpu);
  }

  void write_best(const TrialRecord& best) {
    std::vector<std::string> all = m_o.set;
    all.insert(all.end(), best.overrides.begin(), best.overrides.end());
    YAML::Node doc = YAML::Clone(ConfigDocument::load(m_o.experiment, all).yaml());
    doc.remove("search");
    YAML::Emitter e;
    e << doc;
    write_file_atomically(
        m_db.dir() + "/best.yaml",
        fmt::format("# The best trial ({}) of the search in {}: {} = {:.6g}\n# {}\n{}\n", best.id, m_db.dir(),
                    m_s.objective.metric, *best.value, fmt::join(best.overrides, " "), e.c_str()));
  }

  std::string m_hash;  ///< the search's configuration hash (search.json)
  const OptimizeOptions& m_o;
  const Comm& m_world;
  Layout m_l;
  StudyConfig m_s;
  ResultsDb m_db;
  std::unique_ptr<Optimizer> m_optimizer;
  std::unique_ptr<Pruner> m_pruner;
  std::vector<std::int64_t> m_reruns;
  std::set<std::int64_t> m_pruned;
  std::map<std::int64_t, std::string> m_prune_reason;
  std::map<std::string, Curve> m_curves;
  double m_t0 = 0;  ///< when this session of the search started
};

// ---------------------------------------------------------------- a block (ranks 1..)

/// One fold's training of one trial on the sub-job's communicator; the sub-job's rank 0 returns
/// the fold's result.
json run_fold(const OptimizeOptions& o, const Layout& l, const Comm& fold_comm, const Comm& world, int fold,
              std::int64_t trial, const std::vector<std::string>& overrides, const std::string& trial_dir,
              const dist::Roles& roles) {
  const std::string dir = l.folds > 1 ? fmt::format("{}/fold-{}", trial_dir, fold) : trial_dir;
  std::vector<std::string> all = o.set;
  all.insert(all.end(), overrides.begin(), overrides.end());
  if (l.folds > 1) {
    all.push_back(fmt::format("data.cross_validation.folds={}", l.folds));
    all.push_back(fmt::format("data.cross_validation.fold={}", fold));
  }
  if (o.quiet_trials) all.push_back("logging.level=warn");
  json r{{"fold", fold}, {"run_dir", dir}, {"status", "done"}, {"value", nullptr}, {"message", ""}, {"seconds", 0.0}};
  const double t0 = now_s();
  // Pruning: the coordinator's message for this trial ends the run after its validation.
  train::RunOptions ro{dir, "", {}};
  if (fold_comm.rank() == 0)
    ro.prune = [&world, trial] {
      int flag = 0;
      bool mine = false;
      while (true) {
        MPIGAN_MPI_CHECK(MPI_Iprobe(0, kTagPrune, world.get(), &flag, MPI_STATUS_IGNORE));
        if (!flag) return mine;
        std::int64_t id = -1;
        MPIGAN_MPI_CHECK(MPI_Recv(&id, 1, MPI_INT64_T, 0, kTagPrune, world.get(), MPI_STATUS_IGNORE));
        mine = mine || id == trial;  // an older trial's message arrived late: dropped
      }
    };
  std::string failure;
  bool by_signal = false;
  try {
    if (fold_comm.size() > 1) {
      const dist::DistExperiment d = dist::load_distributed(o.experiment, all, fold_comm.size());
      const dist::JobSummary s = dist::run_job(d, fold_comm, ro, roles);
      failure = s.master.failure;
      by_signal = s.master.stopped_by_signal != 0;
    } else {
      const auto e = train::ExperimentConfig::load(o.experiment, all, {"topology", "algorithm"});
      init_logging(e.log_level);
      const train::TrainSummary s = train::run_single_process(e, ro);
      by_signal = s.stopped_by_signal != 0;
    }
  } catch (const ConfigError& e) {
    failure = fmt::format("invalid configuration: {}", e.what());  // every rank of the sub-job agrees
  } catch (const Error& e) {
    if (fold_comm.size() > 1) throw;  // the other ranks may wait on this one: the job ends (resume)
    failure = e.what();
  }
  r["seconds"] = now_s() - t0;
  if (fold_comm.rank() != 0) return r;
  if (by_signal) {
    r["status"] = "interrupted";
    r["message"] = "stopped by a signal";
  } else if (!failure.empty()) {
    r["status"] = "failed";
    r["message"] = failure;
  }
  return r;
}

void run_block(const OptimizeOptions& o, const Layout& l, const Objective& objective, const Comm& world,
               const Comm& block_comm, const dist::Roles& roles) {
  const int fold = block_comm.rank() / l.per_fold();
  const Comm fold_comm = block_comm.split(fold, block_comm.rank());
  while (true) {
    std::string msg;
    if (block_comm.rank() == 0) {
      send_string(world, "ready", 0, kTagReady);
      msg = recv_string(world, 0, kTagAssign);
    }
    const json a = json::parse(bcast_string(block_comm, msg, 0));
    if (a.contains("stop")) break;
    const auto trial = a.at("trial").get<std::int64_t>();
    json r = run_fold(o, l, fold_comm, world, fold, trial, a.at("overrides").get<std::vector<std::string>>(),
                      a.at("run_dir").get<std::string>(), roles);
    if (fold_comm.rank() == 0 && r["status"] != "failed" && r["status"] != "interrupted") {
      try {
        std::vector<double> values;
        for (const CurvePoint& p : read_curve(r["run_dir"].get<std::string>() + "/metrics.csv", objective))
          values.push_back(p.value);
        const auto v = objective.of(values);
        if (v) r["value"] = objective.minimize ? *v : -*v;
      } catch (const Error& e) {
        r["status"] = "failed";
        r["message"] = e.what();
      }
    }
    // The block's leader collects its folds' results (fold leaders send theirs; it sleeps while
    // the slower folds train) and reports the trial.
    const std::string mine = fold_comm.rank() == 0 ? r.dump() : std::string();
    if (block_comm.rank() == 0) {
      json folds = json::array({r});
      for (int f = 1; f < l.folds; ++f)
        folds.push_back(json::parse(recv_string(block_comm, f * l.per_fold(), kTagResult)));
      send_string(world, json{{"trial", trial}, {"folds", folds}}.dump(), 0, kTagResult);
    } else if (fold_comm.rank() == 0) {
      send_string(block_comm, mine, 0, kTagResult);
    }
  }
}

}  // namespace

OptimizeOutcome run_optimize(const OptimizeOptions& o, const Comm& world, const dist::Roles& roles) {
  Layout l;
  l.ranks = world.size();
  l.block_size = o.block_size;
  const int rank = world.rank();

  // Rank 0 validates the search and the experiment (every problem at once); the others wait.
  std::string problems, search_dir;
  StudyConfig study;
  if (rank == 0) {
    try {
      ConfigDocument doc = ConfigDocument::load(o.experiment, o.set);
      int folds_for_check = o.folds.value_or(1);
      if (!o.folds && doc.yaml()["search"] && doc.yaml()["search"]["folds"]) {
        try {
          folds_for_check = std::max(1, doc.yaml()["search"]["folds"].as<int>());
        } catch (const YAML::Exception&) {
          // parse_study reports it
        }
      }
      study = parse_study(doc, [&](const std::vector<std::string>& ov) {
        return check_experiment(o, ov, std::max(1, l.block_size / std::max(1, folds_for_check)));
      });
      if (o.folds) study.folds = *o.folds;
      if (o.trials) study.trials = *o.trials;
      if (!o.algorithm.empty()) study.algorithm = o.algorithm;
      l.folds = study.folds;
      if (l.block_size < 1)
        doc.problem(fmt::format("--block-size {} must be at least 1", l.block_size));
      else if (l.block_size % l.folds != 0)
        doc.problem(
            fmt::format("--block-size {} must be a multiple of the folds ({}): each fold trains on block-size / "
                        "folds ranks",
                        l.block_size, l.folds));
      if (l.ranks < 1 + l.block_size)
        doc.problem(fmt::format("{} rank(s): a search needs 1 coordinator + at least one block of {} (mpiexec -n {})",
                                l.ranks, l.block_size, 1 + l.block_size));
      const std::string base = l.block_size % l.folds == 0 ? check_experiment(o, {}, l.block_size / l.folds) : "";
      if (!base.empty()) doc.problem("the experiment itself: " + base);
      if (study.early_stopping.kind != PrunerKind::none) {
        const auto e = train::ExperimentConfig::load(o.experiment, o.set, {"topology", "algorithm"});
        if (e.validate_every == 0 && study.objective.source().first == "validation")
          doc.problem("search.early_stopping needs validation.every > 0: a trial is judged at its validations");
      }
      doc.finish();
      search_dir = check_search_dir(o, l, study);
    } catch (const ConfigError& e) {
      problems = e.what();
    }
  }
  problems = bcast_string(world, problems, 0);
  if (!problems.empty()) {
    if (rank == 0) std::fprintf(stderr, "mpigan: error: %s\n", problems.c_str());
    return {1, "", -1};
  }
  const json shape = json::parse(bcast_string(world,
                                              rank == 0 ? json{{"folds", l.folds},
                                                               {"objective", study.objective.metric},
                                                               {"minimize", study.objective.minimize},
                                                               {"at", static_cast<int>(study.objective.at)},
                                                               {"last", study.objective.last}}
                                                              .dump()
                                                        : std::string(),
                                              0));
  l.folds = shape.at("folds").get<int>();
  Objective objective;
  objective.metric = shape.at("objective").get<std::string>();
  objective.minimize = shape.at("minimize").get<bool>();
  objective.at = static_cast<Objective::At>(shape.at("at").get<int>());
  objective.last = shape.at("last").get<int>();
  l.blocks = (l.ranks - 1) / l.block_size;
  l.leftover = (l.ranks - 1) % l.block_size;

  OptimizeOutcome out;
  if (rank == 0) {
    const auto e = train::ExperimentConfig::load(o.experiment, o.set, {"topology", "algorithm"});
    init_logging(e.log_level);
    if (!o.resume) write_header(o, l, study, search_dir);
    // The data once, before any block starts: data.simulate must not run in several blocks at once.
    if (!e.synthetic.enabled) train::prepare_datasets(e);
    if (l.leftover > 0)
      spdlog::warn(
          "{} left over ({} ranks after the coordinator do not fill blocks of {}): idle; mpiexec -n {} "
          "uses every rank",
          l.leftover == 1 ? fmt::format("rank {} is", l.ranks - 1)
                          : fmt::format("ranks {}..{} are", l.ranks - l.leftover, l.ranks - 1),
          l.ranks - 1, l.block_size, 1 + l.blocks * l.block_size);
  }
  bcast_string(world, std::string(), 0);  // the blocks start once the data is there
  const int block = l.block_of(rank);
  const Comm block_comm = world.split(block >= 0 ? block : l.blocks, rank);  // collective over the world
  if (rank == 0) {
    Coordinator c(o, world, l, std::move(study), search_dir);
    out = c.run();
  } else if (block >= 0) {
    run_block(o, l, objective, world, block_comm, roles);
  }
  return out;
}

}  // namespace mpigan::hpo
