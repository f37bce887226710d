// The search's messages and its blocks (coordinator.hpp): strings sent, received and broadcast while
// sleeping between polls, and a block's trials (ranks 1..), one fold per sub-job.
#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/dist/dist_config.hpp"
#include "mpigan/hpo/coordinator_internal.hpp"
#include "mpigan/train/experiment.hpp"
#include "mpigan/train/trainer.hpp"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <thread>

namespace mpigan::hpo::detail {

using nlohmann::json;

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void send_string(const Comm& c, const std::string& s, int dest, int tag) {
  MPIGAN_MPI_CHECK(MPI_Send(s.data(), static_cast<int>(s.size()), MPI_CHAR, dest, tag, c.get()));
}

std::string recv_string(const Comm& c, int source, int tag, int* from) {
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

std::string bcast_string(const Comm& c, std::string s, int root) {
  // The other ranks may wait for the root for minutes (a trial's training): they sleep up to kPoll.
  const Idle idle{.max_sleep_s = std::chrono::duration<double>(kPoll).count()};
  auto n = static_cast<std::int64_t>(s.size());
  c.broadcast_bytes(&n, sizeof n, root, idle);
  s.resize(static_cast<std::size_t>(n));
  c.broadcast_bytes(s.data(), s.size(), root, idle);
  return s;
}

// ---------------------------------------------------------------- a block (ranks 1..)

namespace {

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
  const double t0 = now_s(), cpu0 = process_cpu_seconds();
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
  // The fold's CPU time over its ranks (every thread of each): what the fold cost, whatever else
  // shared the cores.
  double cpu = process_cpu_seconds() - cpu0;
  if (fold_comm.size() > 1)
    MPIGAN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &cpu, 1, MPI_DOUBLE, MPI_SUM, fold_comm.get()));
  r["cpu_seconds"] = cpu;
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

}  // namespace

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

}  // namespace mpigan::hpo::detail
