// `mpigan sandbox EXPERIMENT.yaml --workers N`: one master (or a tree of topology.masters) and N
// virtual workers in one process, with the real update service, rules and models and a simulated
// clock (sandbox/sandbox.hpp, docs/sandbox.md).
#include "commands.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/stop_signal.hpp"
#include "mpigan/sandbox/sandbox.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace mpigan::apps {
namespace {

struct SandboxArgs {
  std::string experiment, out, resume, compute = "constant:0.25";
  std::vector<std::string> set;
  int workers = 4;
  double bandwidth_gb_s = 10, latency_us = 2, master_ms = 0.4;
  std::uint64_t seed = 0;
};

int run_sandbox_command(const SandboxArgs& a) {
  // The masters and the workers: the topology a real job of masters + workers ranks would have.
  const dist::DistExperiment d = dist::load_distributed_workers(a.experiment, a.set, a.workers);
  sandbox::SandboxOptions o;
  o.workers = a.workers;
  o.compute = sandbox::ComputeModel::parse(a.compute);
  MPIGAN_CHECK(a.bandwidth_gb_s > 0 && a.latency_us >= 0 && a.master_ms >= 0,
               "sandbox: --bandwidth must be > 0 GB/s and --latency, --master-ms >= 0 (got {}, {}, {})",
               a.bandwidth_gb_s, a.latency_us, a.master_ms);
  o.network.bandwidth_bytes_per_s = a.bandwidth_gb_s * 1e9;
  o.network.latency_s = a.latency_us * 1e-6;
  o.master_s = a.master_ms * 1e-3;
  o.seed = a.seed;
  o.out_dir = a.out;
  if (!a.resume.empty()) {
    o.out_dir = a.out.empty() ? a.resume : a.out;  // --out elsewhere: a branch of the run
    o.resume_from = a.resume;
    o.resume = true;
  }
  const auto r = sandbox::run_sandbox(d, o);
  const auto& m = r.master;
  const auto [lo, hi] = std::minmax_element(r.updates.begin(), r.updates.end());
  std::printf(
      "\nSandbox: %lld updates from %d virtual workers%s: %lld samples in %.1f simulated s (%.2f samples/s); "
      "%.1f s of real time.\n",
      static_cast<long long>(m.version), a.workers,
      r.masters > 1 ? fmt::format(" under {} sub-masters", r.masters - 1).c_str() : "",
      static_cast<long long>(m.samples), r.simulated_s, r.samples_per_s, m.wall_s);
  std::printf(
      "Staleness: mean %.2f, max %lld%s. Updates per worker: %lld to %lld (max/min %.2f). %lld rejected.\n",
      r.mean_staleness, static_cast<long long>(r.max_staleness),
      r.masters > 1
          ? fmt::format(
                " at the sub-masters (their changes at the top: mean {:.2f}; in the top's versions: mean {:.2f})",
                r.top_mean_staleness, r.canonical_mean_staleness)
                .c_str()
          : "",
      static_cast<long long>(*lo), static_cast<long long>(*hi),
      *lo > 0 ? static_cast<double>(*hi) / static_cast<double>(*lo) : 0.0, static_cast<long long>(m.rejected));
  if (d.experiment.validate) std::printf("Last validation: D %.4f, G %.4f.\n", m.last_val_d, m.last_val_g);
  std::printf("Results in %s/: config.yaml, metrics.csv, updates.csv, sandbox.json, checkpoints/ (latest: %s).\n",
              r.run_dir.c_str(), m.last_checkpoint.empty() ? "none" : m.last_checkpoint.c_str());
  std::fputs(m.physics.summary().c_str(), stdout);
  if (!r.state_file.empty()) {
    const std::string how = fmt::format("  mpigan sandbox {} --workers {} [the same options] --resume {}\n",
                                        a.experiment, a.workers, r.run_dir);
    if (r.state_version == m.version)
      std::printf(
          "Stopped at version %lld with its state saved; to continue exactly where it stopped (raise "
          "training.max_samples or max_updates if its budget was spent):\n%s",
          static_cast<long long>(m.version), how.c_str());
    else
      std::printf(
          "Its state at version %lld (checkpoint.every) continues it exactly from there (raise "
          "training.epochs to go past the data's end):\n%s",
          static_cast<long long>(r.state_version), how.c_str());
  }
  if (!m.failure.empty()) {
    std::fprintf(stderr, "mpigan: error: %s\n", m.failure.c_str());
    return 1;
  }
  if (m.stopped_by_signal != 0) return kStoppedBySignalStatus;
  return 0;
}

}  // namespace

void add_sandbox_command(CLI::App& app) {
  auto a = std::make_shared<SandboxArgs>();
  auto* cmd = app.add_subcommand(
      "sandbox", "One master and N virtual workers in one process: the real rules and models, a simulated clock");
  cmd->add_option("experiment", a->experiment, "experiment YAML file (its algorithm: section picks the rule)")
      ->required();
  cmd->add_option("--workers,-n", a->workers, "virtual workers")->check(integer_check(1, 4096));
  cmd->add_option("--compute", a->compute,
                  "compute time per GAN step: constant:T | exp:SHIFT,MEAN | lognormal:MEDIAN,SIGMA | "
                  "replay:RUN_DIR/updates.csv | cycle:RUN_DIR/updates.csv (the real run's whole cycles)")
      ->capture_default_str();
  cmd->add_option("--bandwidth", a->bandwidth_gb_s, "GB/s between a worker and the master")->capture_default_str();
  cmd->add_option("--latency", a->latency_us, "microseconds per message")->capture_default_str();
  cmd->add_option("--master-ms", a->master_ms, "the master's service time per update, ms (`mpigan bench master`)")
      ->capture_default_str();
  cmd->add_option("--clock-seed", a->seed, "seed of the compute-time draws")->capture_default_str();
  cmd->add_option("--set", a->set, "override a key, e.g. --set training.max_updates=100");
  cmd->add_option("--out", a->out, "run directory (default: the experiment's output.dir)");
  cmd->add_option("--resume", a->resume,
                  "continue the run in this directory exactly where it stopped (its sandbox-state.h5: a run "
                  "stopped by a signal or at its budget); with --out elsewhere, a branch of it continues there");
  cmd->callback([a] { set_exit_status(run_sandbox_command(*a)); });
}

}  // namespace mpigan::apps
