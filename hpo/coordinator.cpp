// The search's start (coordinator.hpp): run_optimize's checks of the search and the experiment on
// rank 0, the search directory and its search.json, the block layout, then the roles (the
// coordinator: coordinator_loop.cpp; the blocks: coordinator_block.cpp).
#include "mpigan/hpo/coordinator.hpp"
#include "mpigan/core/stop_signal.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/core/paths.hpp"
#include "mpigan/core/rng.hpp"
#include "mpigan/dist/dist_config.hpp"
#include "mpigan/dist/watchdog.hpp"
#include "mpigan/hpo/coordinator_internal.hpp"
#include "mpigan/hpo/results.hpp"
#include "mpigan/hpo/study.hpp"
#include "mpigan/train/experiment.hpp"
#include "mpigan/train/trainer.hpp"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace mpigan::hpo {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

}  // namespace

namespace detail {

std::string config_hash(const OptimizeOptions& o, const Layout& l, const StudyConfig& s) {
  std::ifstream in(o.experiment);
  std::stringstream text;
  text << in.rdbuf();
  std::string key = text.str();
  for (const auto& x : o.set) key += "\n--set " + x;
  key += fmt::format("\nblock {} folds {} algorithm {} seed {}", l.block_size, l.folds, s.algorithm, s.seed);
  return fmt::format("{:016x}", hash_string(key));
}

namespace {

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

/// ASHA's rung steps of @p s (empty for another rule): recorded in search.json, since they follow
/// from the experiment and from mpigan's rule, which may change between a search's start and its
/// resume.
std::vector<std::int64_t> asha_rungs(const StudyConfig& s) {
  if (s.early_stopping.kind != PrunerKind::asha) return {};
  return AshaPruner(s.early_stopping).rungs();
}

/// A resumed search prunes at the rungs it started with: refused when this mpigan's differ.
void check_rungs(const std::string& dir, const json& header, const StudyConfig& s) {
  const std::vector<std::int64_t> now = asha_rungs(s);
  if (now.empty()) return;
  if (!header.contains("rungs")) {
    spdlog::warn(
        "--resume {}: search.json does not record ASHA's rungs (an older mpigan started it); this mpigan's "
        "are at {} samples",
        dir, fmt::join(now, ", "));
    return;
  }
  const auto then = header.at("rungs").get<std::vector<std::int64_t>>();
  if (then != now)
    MPIGAN_THROW(ConfigError,
                 "--resume {}: ASHA's rungs were at [{}] samples when the search started and are at [{}] with this "
                 "mpigan (rungs stop at the budget / eta); resume with the mpigan that started it, or start a new "
                 "search directory",
                 dir, fmt::join(then, ", "), fmt::join(now, ", "));
}

/// The search directory, checked: a new search must not overwrite one, a resumed one must be the
/// same search (its hash). @p e: the base experiment. Throws ConfigError.
std::string check_search_dir(const OptimizeOptions& o, const Layout& l, const StudyConfig& s,
                             const train::ExperimentConfig& e) {
  const std::string dir = o.out.empty() ? e.output_dir + "-search" : o.out;
  const std::string header = dir + "/search.json";
  if (o.resume) {
    std::ifstream in(header);
    if (!in) MPIGAN_THROW(ConfigError, "--resume {}: there is no search.json there (not a search directory)", dir);
    const json started = json::parse(in);
    const std::string then = started.at("hash").get<std::string>(), now = config_hash(o, l, s);
    if (then != now)
      MPIGAN_THROW(ConfigError,
                   "--resume {}: the experiment, its --set overrides, the block size, folds, algorithm or seed "
                   "changed since the search started (hash {} then, {} now); resume with the same ones or start a "
                   "new search directory",
                   dir, then, now);
    check_rungs(dir, started, s);
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
  write_file_atomically(dir + "/search.json",
                        json{{"experiment", o.experiment},
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
                             {"rungs", asha_rungs(s)},
                             {"dimensions", dims}}
                            .dump(2),
                        "search record");
}

}  // namespace
}  // namespace detail

namespace detail {
namespace {

/// Rank 0's base experiment (the --set overrides, no trial's), loaded once when first needed.
class BaseExperiment {
 public:
  explicit BaseExperiment(const OptimizeOptions& o) : m_options(o) {}
  const train::ExperimentConfig& get() {
    if (!m_experiment)
      m_experiment = train::ExperimentConfig::load(m_options.experiment, m_options.set, {"topology", "algorithm"});
    return *m_experiment;
  }

 private:
  const OptimizeOptions& m_options;
  std::optional<train::ExperimentConfig> m_experiment;
};

/// ASHA's budget when `early_stopping.max_samples` is not given: the trials' training.max_samples,
/// unless a dimension varies it (then none, and rungs without end). A budget that leaves no rung
/// (below min_samples * eta) is a problem.
void asha_budget(StudyConfig& study, const train::ExperimentConfig& e, ConfigDocument& doc) {
  PrunerOptions& p = study.early_stopping;
  const auto& dims = study.space.dims();
  const bool varied = std::ranges::any_of(dims, [](const Dimension& d) { return d.key == "training.max_samples"; });
  if (p.max_resource != 0 || varied || e.max_samples == 0) return;  // given, varied, or no budget
  if (!asha_budget_has_rung(e.max_samples, p.min_resource, p.eta))
    doc.problem(
        fmt::format("search.early_stopping: asha's budget, training.max_samples {}, leaves no rung: it must "
                    "be at least min_samples * eta = {} * {}; lower min_samples or eta",
                    e.max_samples, p.min_resource, p.eta));
  else
    p.max_resource = e.max_samples;
}

/// Rank 0's checks of the search, the layout and the experiment, every problem at once: the study
/// (with the command line's folds, trials and algorithm) into @p study, the folds into @p l; the
/// search directory returned. Throws ConfigError.
std::string check_search(const OptimizeOptions& o, Layout& l, StudyConfig& study, BaseExperiment& experiment) {
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
  // A sub-job of one rank checks the base experiment by loading it as a trial does (kept for later).
  std::string base;
  if (l.block_size % l.folds == 0 && l.block_size / l.folds > 1) {
    base = check_experiment(o, {}, l.block_size / l.folds);
  } else if (l.block_size % l.folds == 0) {
    try {
      experiment.get();
    } catch (const ConfigError& e) {
      base = e.what();
    }
  }
  if (!base.empty()) doc.problem("the experiment itself: " + base);
  // A physics objective is scored by validation.physics: without it every trial would train, then fail.
  if (base.empty() && study.objective.source().first == "physics") {
    try {
      if (!experiment.get().physics.enabled)
        doc.problem(
            fmt::format("search.objective.metric {} is scored by validation.physics, which the experiment "
                        "does not enable: add validation: {{physics: {{every: N, events: M}}}} (docs/hpo.md)",
                        study.objective.metric));
    } catch (const ConfigError&) {
      // the experiment's own problems are reported when it is loaded below
    }
  }
  if (study.early_stopping.kind != PrunerKind::none) {
    const train::ExperimentConfig& e = experiment.get();
    if (e.validate_every == 0 && study.objective.source().first == "validation")
      doc.problem("search.early_stopping needs validation.every > 0: a trial is judged at its validations");
    if (study.early_stopping.kind == PrunerKind::asha) asha_budget(study, e, doc);
  }
  doc.finish();
  return check_search_dir(o, l, study, experiment.get());
}

/// Rank 0's folds (into @p l) and objective, sent to every rank: the blocks judge their trials by it.
Objective share_objective(const Comm& world, Layout& l, const StudyConfig& study) {
  const json shape = json::parse(bcast_string(world,
                                              world.rank() == 0 ? json{{"folds", l.folds},
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
  return objective;
}

}  // namespace
}  // namespace detail

OptimizeOutcome run_optimize(const OptimizeOptions& o, const Comm& world, const dist::Roles& roles) {
  detail::Layout l;
  l.ranks = world.size();
  l.block_size = o.block_size;
  const int rank = world.rank();

  // Rank 0 validates the search and the experiment (every problem at once); the others wait.
  std::string problems, search_dir;
  StudyConfig study;
  detail::BaseExperiment experiment(o);
  if (rank == 0) {
    try {
      search_dir = detail::check_search(o, l, study, experiment);
    } catch (const ConfigError& e) {
      problems = e.what();
    }
  }
  problems = detail::bcast_string(world, problems, 0);
  if (!problems.empty()) return {1, "", -1, rank == 0 ? problems : std::string()};
  const Objective objective = detail::share_objective(world, l, study);
  l.blocks = (l.ranks - 1) / l.block_size;
  l.leftover = (l.ranks - 1) % l.block_size;

  OptimizeOutcome out;
  if (rank == 0) {
    const train::ExperimentConfig& e = experiment.get();  // loaded by the checks above
    init_logging(e.log_level);
    if (!o.resume) detail::write_header(o, l, study, search_dir);
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
  detail::bcast_string(world, std::string(), 0);  // the blocks start once the data is there
  defer_stop_signals();                           // the search's loops act on a signal from here
  const int block = l.block_of(rank);
  const Comm block_comm = world.split(block >= 0 ? block : l.blocks, rank);  // collective over the world
  // The search's own watchdog over every rank: a rank that dies (a single-process trial has no
  // job watchdog of its own) is named, in SEARCH/FAILED too, and the search ends.
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  const std::string role = rank == 0 ? "coordinator" : block >= 0 ? fmt::format("block {}", block) : "idle";
  const std::string me = fmt::format("rank {} {} (pid {} on {})", rank, role, ::getpid(), host);
  std::vector<std::string> labels = world.gather_strings(me, 0);
  if (rank != 0) labels.assign(static_cast<std::size_t>(l.ranks), me);
  dist::Watchdog watchdog(world, labels, rank == 0 ? search_dir + "/FAILED" : std::string());
  if (rank == 0) {
    out = detail::run_coordinator(o, world, l, std::move(study), search_dir);
  } else if (block >= 0) {
    detail::run_block(o, l, objective, world, block_comm, roles);
  }
  watchdog.goodbye();
  world.barrier();  // every goodbye is said before rank 0's monitor ends
  return out;
}

}  // namespace mpigan::hpo
