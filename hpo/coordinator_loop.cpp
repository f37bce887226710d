// The search's coordinator, rank 0 (coordinator.hpp): it hands trials to idle blocks, records their
// results, prunes poor trials from their curves, and at the end reports the search and its best trial.
#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/core/paths.hpp"
#include "mpigan/core/rng.hpp"
#include "mpigan/core/stop_signal.hpp"
#include "mpigan/hpo/coordinator_internal.hpp"
#include "mpigan/hpo/results.hpp"
#include "mpigan/hpo/study.hpp"

#include <mpi.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

namespace mpigan::hpo::detail {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// ---------------------------------------------------------------- the coordinator (rank 0)

class Coordinator {
 public:
  Coordinator(const OptimizeOptions& o, const Comm& world, const Layout& l, StudyConfig s, std::string dir)
      : m_hash(config_hash(o, l, s)),
        m_options(o),
        m_world(world),
        m_layout(l),
        m_study(std::move(s)),
        m_db(dir),
        m_optimizer(make_optimizer(m_study)),
        m_pruner(make_pruner(m_study.early_stopping)) {}

  OptimizeOutcome run() {
    m_t0 = now_s();
    close_interrupted();
    spdlog::info(
        "search: {} trials of {} over {} dimension(s), {}, {} block(s) of {} rank(s){}", m_study.trials,
        m_optimizer->name(), m_study.space.size(), m_study.objective.describe(), m_layout.blocks, m_layout.block_size,
        m_layout.folds > 1 ? fmt::format(", {} folds of {} rank(s)", m_layout.folds, m_layout.per_fold()) : "");
    if (!m_study.points.empty())
      spdlog::info("search: the first {} point(s) as given (search.points), then {}'s", m_study.points.size(),
                   m_optimizer->name());
    if (m_pruner->name() != "none") spdlog::info("search: early stopping by {}", m_pruner->describe());
    int active = m_layout.blocks;
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
    m_reruns = pending_reruns(m_db.trials());
  }

  std::int64_t counted() const {
    std::int64_t n = 0;
    for (const TrialRecord& t : m_db.trials()) n += t.status != TrialStatus::interrupted;
    return n;
  }

  /// Hands the next trial to the block whose leader is @p leader; false (and "stop") when the
  /// search is complete or stopping.
  bool assign(int leader) {
    const int block = m_layout.block_of(leader);
    if (stop_signal() != 0 || counted() >= m_study.trials) {
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
          done.push_back({r.x, m_study.objective.minimize ? *r.value : -*r.value, false});
        else if (finished || r.status == TrialStatus::failed)
          done.push_back({r.x, 0.0, true});  // no value to learn from: worse than every finished trial
      }
      // The point's random stream is its index among the search's new points (reruns of interrupted
      // trials excluded), so a search stopped and resumed draws the points of one never stopped,
      // and searches with the same seed share their first points whatever was interrupted.
      std::uint64_t fresh = 0;
      for (const TrialRecord& r : m_db.trials()) fresh += r.rerun_of < 0;
      Rng rng(m_study.seed, 0x5EA2C4000000ull + fresh);
      t.x = m_optimizer->suggest(done, pending, rng);
      // The trial runs with the value as written in its override (6 significant digits): the
      // database keeps that value, so the optimiser learns what was really run.
      for (std::size_t i = 0; i < t.x.size(); ++i)
        if (m_study.space[i].numeric()) t.x[i] = std::stod(m_study.space.value_text(t.x, i));
    }
    t.overrides = m_study.space.overrides(t.x);
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
      const FoldResult fr = fold_from_json(f);
      if (fr.status == "failed") failed = true;
      if (fr.status == "interrupted") interrupted = true;
      if (fr.value) values.push_back(*fr.value);
      if (!fr.message.empty()) messages.push_back(fmt::format("fold {}: {}", fr.fold, fr.message));
      t.folds.push_back(fr);
    }
    if (!failed && !interrupted && values.size() != t.folds.size()) {
      failed = true;
      messages.push_back(fmt::format("no finite value of {} was written", m_study.objective.metric));
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
    spdlog::info("trial {} {}: {}{}{} ({:.0f} s){}", t.id, trial_status_name(t.status), m_study.objective.metric,
                 t.value ? fmt::format(" {:.5g}", *t.value) : std::string(" -"),
                 t.folds.size() > 1 && t.value ? fmt::format(" ± {:.3g} over {} folds", t.spread, t.folds.size()) : "",
                 t.ended - t.started, t.message.empty() ? "" : " — " + t.message);
  }

  /// The minimised curve of fold @p fold of trial @p t (empty when its run has written none yet).
  Curve curve(const TrialRecord& t, int fold) {
    const std::string dir = m_layout.folds > 1 ? fmt::format("{}/fold-{}", t.run_dir, fold) : t.run_dir;
    const bool finished = t.status != TrialStatus::running;
    const std::string key = fmt::format("{}#{}", t.id, fold);
    if (finished) {
      auto it = m_curves.find(key);
      if (it != m_curves.end()) return it->second;
    }
    Curve c;
    if (fs::exists(dir + "/metrics.csv")) {
      try {
        c = minimised(read_curve(dir + "/metrics.csv", m_study.objective), m_study.objective);
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
      for (int f = 0; f < m_layout.folds; ++f) {
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
        for (int g = 0; g < m_layout.folds; ++g)
          MPIGAN_MPI_CHECK(MPI_Send(&id, 1, MPI_INT64_T, m_layout.fold_leader(t.block, g), kTagPrune, m_world.get()));
        break;
      }
    }
  }

  OptimizeOutcome finish() {
    OptimizeOutcome out;
    out.search_dir = m_db.dir();
    const TrialRecord* best = nullptr;
    int n_done = 0, n_failed = 0, n_pruned = 0;
    const auto n_interrupted = pending_reruns(m_db.trials()).size();  // points cut off, not run again yet
    for (const TrialRecord& t : m_db.trials()) {
      n_done += t.status == TrialStatus::done;
      n_failed += t.status == TrialStatus::failed;
      n_pruned += t.status == TrialStatus::pruned;
      if (t.status != TrialStatus::done || !t.value) continue;
      const double v = m_study.objective.minimize ? *t.value : -*t.value;
      if (!best || v < (m_study.objective.minimize ? *best->value : -*best->value)) best = &t;
    }
    out.report = overhead();
    out.report += fmt::format(
        "\nSearch {}: {} trial(s) done, {} pruned, {} failed{}.\n", m_db.dir(), n_done, n_pruned, n_failed,
        n_interrupted ? fmt::format(", {} interrupted (run again with --resume)", n_interrupted) : std::string());
    if (best) {
      out.best_trial = best->id;
      write_best(*best);
      out.report += fmt::format("Best: trial {}, {} {:.6g}{} with {}\nIts experiment: {}/best.yaml\n", best->id,
                                m_study.objective.metric, *best->value,
                                best->folds.size() > 1 ? fmt::format(" ± {:.3g}", best->spread) : std::string(),
                                fmt::join(best->overrides, " "), m_db.dir());
    } else {
      out.report +=
          fmt::format("No trial finished with a value of {}: no best experiment written.\n", m_study.objective.metric);
      out.status = stop_signal() != 0 ? 0 : 1;
    }
    return out;
  }

  /// The coordinator's overhead in this session, for the report: the fraction of the blocks' time
  /// spent in trials (the slowest fold of each), and the coordinator's own CPU time.
  std::string overhead() const {
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
    if (wall <= 0 || m_layout.blocks == 0) return {};
    return fmt::format(
        "\nBlocks spent {:.1f} % of their time training ({:.0f} s of trials over {} block(s) x {:.0f} s); the "
        "coordinator used {:.1f} s of CPU.\n",
        100.0 * busy / (wall * m_layout.blocks), busy, m_layout.blocks, wall, cpu);
  }

  void write_best(const TrialRecord& best) {
    std::vector<std::string> all = m_options.set;
    all.insert(all.end(), best.overrides.begin(), best.overrides.end());
    YAML::Node doc = YAML::Clone(ConfigDocument::load(m_options.experiment, all).yaml());
    doc.remove("search");
    YAML::Emitter e;
    e << doc;
    write_file_atomically(
        m_db.dir() + "/best.yaml",
        fmt::format("# The best trial ({}) of the search in {}: {} = {:.6g}\n# {}\n{}\n", best.id, m_db.dir(),
                    m_study.objective.metric, *best.value, fmt::join(best.overrides, " "), e.c_str()),
        "search record");
  }

  std::string m_hash;  ///< the search's configuration hash (search.json)
  const OptimizeOptions& m_options;
  const Comm& m_world;
  Layout m_layout;
  StudyConfig m_study;
  ResultsDb m_db;
  std::unique_ptr<Optimizer> m_optimizer;
  std::unique_ptr<Pruner> m_pruner;
  std::vector<std::int64_t> m_reruns;
  std::set<std::int64_t> m_pruned;
  std::map<std::int64_t, std::string> m_prune_reason;
  std::map<std::string, Curve> m_curves;
  double m_t0 = 0;  ///< when this session of the search started
};

}  // namespace

OptimizeOutcome run_coordinator(const OptimizeOptions& o, const Comm& world, const Layout& l, StudyConfig s,
                                std::string dir) {
  Coordinator c(o, world, l, std::move(s), std::move(dir));
  return c.run();
}

}  // namespace mpigan::hpo::detail
