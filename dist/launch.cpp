// The launch of a distributed job's roles (launch.hpp).
#include "mpigan/dist/launch.hpp"
#include "mpigan/core/stop_signal.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/core/rng.hpp"
#include "mpigan/dist/run_files.hpp"
#include "mpigan/dist/watchdog.hpp"
#include "mpigan/train/run_dir.hpp"
#include "mpigan/train/sources.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace mpigan::dist {

namespace {

/// Rank 0: the run directory (resolved config, the previous attempt's diagnosis) and the data.
void prepare_run(const DistExperiment& d, const Topology& t, const std::string& dir, bool resume) {
  const auto& e = d.experiment;
  train::RunDirectory run(dir, resume);
  // A previous attempt that failed left its diagnosis; say it once and keep it as FAILED.previous.
  const std::filesystem::path failed = std::filesystem::path(dir) / "FAILED";
  if (resume && std::filesystem::exists(failed)) {
    // On one log line: the watchdog's report may name several ranks, one per line.
    std::ifstream in(failed);
    std::string why;
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) why += (why.empty() ? "" : "; ") + line;
    spdlog::warn("the previous attempt of this run failed: {}", why);
    std::filesystem::rename(failed, std::filesystem::path(dir) / "FAILED.previous");
  }
  for (const auto& f : std::filesystem::directory_iterator(dir))  // the ranks' last words (run_job)
    if (f.path().filename().string().starts_with("FAILED.rank-")) std::filesystem::remove(f.path());
  YAML::Node resolved = YAML::Clone(e.resolved);
  resolved["output"]["dir"] = dir;
  if (resume)
    run.check_resumed_config(resolved);
  else
    run.refuse_existing_run();
  if (!d.dist.virtual_compute)
    train::DataPlan::open(e, true);  // simulates when asked, validates every file once (before config.yaml)
  else
    spdlog::info("virtual workers ({}): no data is read, nothing is validated or checkpointed",
                 d.dist.virtual_compute->spec());
  run.write_config(resolved);
  spdlog::info("{} ranks: {} master(s), {} worker group(s) of {}; rule: {}; exchange every {} step(s)", t.size,
               t.masters, t.groups, t.group_size, d.dist.algorithm->describe(), d.dist.sync_every);
}

/// The rank table: launchers name a dead process by PID (MPICH's hydra) or task number (srun);
/// this maps either to the rank's role. Every rank gets its own label; rank 0 all of them.
std::vector<std::string> rank_table(const Topology& t) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  const std::string me = fmt::format("{} (pid {} on {})", t.label(), ::getpid(), host);
  auto table = t.links.gather_strings(me, 0);
  if (t.rank != 0) return std::vector<std::string>(static_cast<std::size_t>(t.size), me);
  for (const auto& line : table) spdlog::info("{}", line);
  return table;
}

}  // namespace

std::uint64_t worker_step_seed(const train::ExperimentConfig& e, int rank) {
  return mix64(e.seed ^ mix64(0x3C0FFEEull + static_cast<std::uint64_t>(rank)));
}

train::Session role_session(const train::ExperimentConfig& e, const Topology& t) {
  if (t.role == Role::worker) return train::Session::create(e, worker_step_seed(e, t.rank), t.device_id);
  train::ExperimentConfig m = e;
  if (t.role == Role::sub_master) m.backend = "cpu";  // a sub-master only adds vectors: no GPU needed
  return train::Session::create(m, e.seed, t.device_id);
}

JobSummary run_job(const DistExperiment& d, const Comm& comm, const train::RunOptions& options, const Roles& roles) {
  const auto& e = d.experiment;
  Topology t = Topology::build(comm, d.dist.topology);
  set_process_label(t.label());
  init_logging(e.log_level);
  const bool resume = !options.resume_dir.empty();
  const std::string dir = resume ? options.resume_dir : (options.out_dir.empty() ? e.output_dir : options.out_dir);

  // Rank 0 prepares the directory and the data and tells everyone whether it could. A refusal there
  // (bad data, a run already in the directory) ends every rank with status 1 and no abort, so the
  // message reaches the terminal whole.
  std::string refusal;
  if (t.rank == 0) {
    try {
      prepare_run(d, t, dir, resume);
    } catch (const std::exception& err) {
      refusal = dynamic_cast<const Error*>(&err) != nullptr
                    ? err.what()
                    : fmt::format("[{}] unexpected exception: {}", t.label(), err.what());
    }
  }
  int refused = refusal.empty() ? 0 : 1;
  t.links.broadcast_bytes(&refused, sizeof refused, 0);
  if (refused != 0) throw JobError(refusal);
  Watchdog watchdog(t.links, rank_table(t), dir + "/FAILED");
  const std::int64_t resume_id = resume ? latest_checkpoint_id(dir) : -1;
  // Virtual workers run no model: they learn the payload's layout from the top master.
  const bool virtual_worker = d.dist.virtual_compute && t.role == Role::worker;
  train::Session session = virtual_worker ? train::Session{} : role_session(e, t);
  PayloadLayout layout = virtual_worker ? PayloadLayout{} : PayloadLayout::of(*session.model);
  if (d.dist.virtual_compute) t.links.broadcast_bytes(&layout, sizeof layout, 0);
  const PayloadChannels channels = PayloadChannels::create(t, layout.total(), d.dist.topology.shared_memory);
  if (t.role != Role::worker && !t.children.empty())
    spdlog::info("{} of {} children exchange payloads through shared memory", channels.shared_children(),
                 t.children.size());

  t.links.barrier();
  Trace trace(d.dist.trace, t.rank, t.label(), MPI_Wtime());
  RoleContext ctx{d, t, dir, resume_id, trace, channels, std::move(session), layout, {}, options.prune};
  JobSummary s;
  s.run_dir = dir;
  s.workers = t.groups;
  defer_stop_signals();  // every rank is set up: the top master checkpoints and stops on a signal from here
  try {
    if (t.role == Role::worker) {
      roles.worker(ctx);
      watchdog.goodbye();
      t.links.barrier();  // matches the masters' closing barrier
    } else {
      // A sub-master's goodbye must come before the closing barrier inside the master role.
      if (t.role == Role::sub_master) ctx.before_barrier = [&] { watchdog.goodbye(); };
      s.master = roles.master(ctx);
      if (t.role == Role::top_master && !s.master.failure.empty())
        std::ofstream(std::filesystem::path(dir) / "FAILED") << s.master.failure << '\n';
    }
  } catch (const std::exception& err) {
    // The rank's last words, before the application aborts the job (MPI_Abort): FAILED says what
    // the error was, not only that the rank died.
    const std::string words = fmt::format("{}\n", err.what());  // what() carries the rank's label
    std::ofstream(std::filesystem::path(dir) / fmt::format("FAILED.rank-{}", t.rank)) << words;
    // FAILED too, unless another rank's diagnosis is there already (the monitor rewrites it when
    // it reports a death, quoting these words).
    const std::filesystem::path failed = std::filesystem::path(dir) / "FAILED";
    if (!std::filesystem::exists(failed)) std::ofstream(failed) << words;
    throw;
  }
  if (d.dist.trace) trace.write(t.links, dir + "/trace.json");
  return s;
}

}  // namespace mpigan::dist
