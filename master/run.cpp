#include "mpigan/master/run.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/models/gan_model.hpp"
#include "mpigan/train/run_dir.hpp"
#include "mpigan/train/sources.hpp"
#include "mpigan/worker/watchdog.hpp"
#include "mpigan/worker/worker.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

namespace mpigan::master {

namespace {
/// Floats of one payload (both networks' parameters and BN state) of the experiment's model.
std::size_t payload_floats(const train::ExperimentConfig& e) {
  auto be = make_backend("cpu");
  const auto m = models::make_gan(e.model, *be, e.seed);
  return m->generator.weights().size() + m->discriminator.weights().size() + m->generator.state().size() +
         m->discriminator.state().size();
}
}  // namespace

std::int64_t latest_checkpoint_id(const std::string& run_dir) {
  train::RunDirectory run(run_dir, true);
  const std::string name = std::filesystem::path(*run.latest_checkpoint()).filename().string();
  // step-00000123.h5
  MPIGAN_CHECK(name.starts_with("step-") && name.ends_with(".h5"), "run directory '{}': unexpected checkpoint name '{}'",
               run_dir, name);
  return std::stoll(name.substr(5, name.size() - 8));
}

DistributedSummary run_distributed(const worker::DistExperiment& d, const Comm& comm, const train::RunOptions& options) {
  const auto& e = d.experiment;
  worker::Topology t = worker::Topology::build(comm, d.dist.topology);
  set_process_label(t.label());
  init_logging(e.log_level);
  const bool resume = !options.resume_dir.empty();
  const std::string dir = resume ? options.resume_dir : (options.out_dir.empty() ? e.output_dir : options.out_dir);

  // Rank 0 prepares the directory and the data; everyone else waits for it. An error there must
  // still reach the others: the flag is broadcast, and the thrower's exception aborts the job.
  std::int32_t ok = 1;
  if (t.rank == 0) {
    train::RunDirectory run(dir, resume);
    // A previous attempt that failed left its diagnosis; say it once and keep it as FAILED.previous.
    const std::filesystem::path failed = std::filesystem::path(dir) / "FAILED";
    if (resume && std::filesystem::exists(failed)) {
      std::ifstream in(failed);
      const std::string why((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      spdlog::warn("the previous attempt of this run failed: {}", why.substr(0, why.find_last_not_of('\n') + 1));
      std::filesystem::rename(failed, std::filesystem::path(dir) / "FAILED.previous");
    }
    YAML::Node resolved = YAML::Clone(e.resolved);
    resolved["output"]["dir"] = dir;
    run.write_config(resolved);
    train::DataPlan::open(e, true);  // simulates when asked, validates every file once
    spdlog::info("{} ranks: {} master(s), {} worker group(s) of {}; rule: {}; exchange every {} step(s)", t.size,
                 t.masters, t.groups, t.group_size, d.dist.algorithm->describe(), d.dist.sync_every);
  }
  t.links.broadcast_bytes(&ok, sizeof ok, 0);
  // The rank table: launchers name a dead process by PID (MPICH's hydra) or task number (srun);
  // this maps either to the rank's role.
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  const std::string me = fmt::format("{} (pid {} on {})", t.label(), ::getpid(), host);
  const auto table = t.links.gather_strings(me, 0);
  std::vector<std::string> labels(static_cast<std::size_t>(t.size), me);
  if (t.rank == 0) {
    labels = table;
    for (const auto& line : table) spdlog::info("{}", line);
  }
  worker::Watchdog watchdog(t.links, labels, dir + "/FAILED");
  const std::int64_t resume_id = resume ? latest_checkpoint_id(dir) : -1;
  const worker::PayloadChannels channels =
      worker::PayloadChannels::create(t, payload_floats(e), d.dist.topology.shared_memory);
  if (t.role != worker::Role::worker && !t.children.empty())
    spdlog::info("{}: {} of {} children exchange payloads through shared memory", t.label(), channels.shared_children(),
                 t.children.size());

  t.links.barrier();
  worker::Trace trace(d.dist.trace, t.rank, t.label(), MPI_Wtime());
  DistributedSummary s;
  s.run_dir = dir;
  s.workers = t.groups;
  if (t.role == worker::Role::worker) {
    const auto r = worker::run_worker(d, t, dir, resume_id, trace, channels);
    spdlog::debug("{}: {} steps, {} exchanges, {:.1f} s computing, {:.1f} s waiting", t.label(), r.steps, r.exchanges,
                  r.compute_s, r.wait_s);
    watchdog.goodbye();
    t.links.barrier();  // matches the masters' closing barrier
  } else {
    if (t.role == worker::Role::sub_master) {
      // A sub-master's goodbye must come before the closing barrier inside run_master.
      s.master = run_master(d, t, dir, resume_id, trace, channels, [&] { watchdog.goodbye(); });
    } else {
      s.master = run_master(d, t, dir, resume_id, trace, channels);
      if (!s.master.failure.empty()) std::ofstream(std::filesystem::path(dir) / "FAILED") << s.master.failure << '\n';
    }
  }
  if (d.dist.trace) trace.write(t.links, dir + "/trace.json");
  return s;
}

}  // namespace mpigan::master
