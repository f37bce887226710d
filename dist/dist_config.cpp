// The distributed part of an experiment (dist_config.hpp).
#include "mpigan/dist/dist_config.hpp"

#include "mpigan/core/error.hpp"

#include <functional>

namespace mpigan::dist {

namespace {

/// @p ranks_for: the job's ranks, given its topology.
DistExperiment load(const std::string& path, const std::vector<std::string>& overrides,
                    const std::function<int(const TopologyConfig&)>& ranks_for) {
  ConfigDocument doc = ConfigDocument::load(path, overrides);
  DistExperiment d;
  d.experiment = train::ExperimentConfig::parse(doc, {"topology", "algorithm"});
  ConfigNode root = doc.root();
  ConfigNode topo = root.section("topology");
  d.dist.topology = TopologyConfig::parse(topo);
  const int ranks = ranks_for(d.dist.topology);
  ConfigNode alg = root.section("algorithm");
  d.dist.algorithm = algos::make_algorithm(alg);
  ConfigNode training = root.section("training");
  d.dist.sync_every = training.get_int("sync_every", 1, 1, 1 << 20);
  d.dist.max_nonfinite = training.get_int("max_nonfinite", 0, 0);
  ConfigNode logging = root.section("logging");
  d.dist.trace = logging.get_bool("trace", false);

  std::vector<std::string> problems;
  Topology::validate(d.dist.topology, ranks, d.experiment.batch, problems);
  if (d.dist.topology.max_lead > 0 && d.dist.algorithm && d.dist.algorithm->synchronous())
    topo.problem("max_lead", fmt::format("{} bounds how far an asynchronous rule's workers run ahead; the "
                                         "synchronous rule '{}' keeps them in lockstep already: remove it",
                                         d.dist.topology.max_lead, d.dist.algorithm->name()));
  if (!d.dist.topology.virtual_compute.empty()) {
    try {
      d.dist.virtual_compute = ComputeModel::parse(d.dist.topology.virtual_compute);
    } catch (const Error& err) {
      topo.problem("virtual_compute", err.what());
    }
    if (d.dist.topology.group_size > 1)
      topo.problem("group_size", fmt::format("{}: virtual workers (virtual_compute) are single ranks; remove "
                                             "group_size or virtual_compute",
                                             d.dist.topology.group_size));
    if (d.experiment.max_updates == 0 && d.experiment.max_samples == 0)
      doc.problem(
          "training.max_updates: virtual workers (topology.virtual_compute) read no data, so only "
          "training.max_updates or training.max_samples ends the run: set one");
    // Nothing is trained: no data is read, and there is nothing to validate or checkpoint.
    d.experiment.validate = false;
    d.experiment.physics.enabled = false;
    d.experiment.early_stopping.enabled = false;
    d.experiment.resolved["validation"]["enabled"] = false;
    d.experiment.resolved["validation"]["physics"]["enabled"] = false;
  }
  if (ranks > 1 && d.experiment.lr_schedule.kind != "constant" && d.experiment.max_updates == 0 &&
      d.experiment.max_samples == 0)
    doc.problem(
        fmt::format("optimizer.schedule: '{}' runs over the run's budget, and a distributed run knows it only "
                    "from training.max_samples or training.max_updates: set one",
                    d.experiment.lr_schedule.kind));
  for (const auto& p : problems) doc.problem(p);
  if (ranks > 1 && d.experiment.max_updates == 0 && d.experiment.max_samples == 0 && d.experiment.epochs == 0)
    doc.problem("training: no stopping rule");
  doc.finish();
  // The resolved view also records what the distributed layers read.
  d.experiment.resolved["training"]["sync_every"] = d.dist.sync_every;
  d.experiment.resolved["training"]["max_nonfinite"] = d.dist.max_nonfinite;
  d.experiment.resolved["topology"]["master_threads"] = d.dist.topology.master_threads;
  d.experiment.resolved["topology"]["shared_memory"] = d.dist.topology.shared_memory;
  d.experiment.resolved["topology"]["worker_wait"] = d.dist.topology.worker_wait;
  d.experiment.resolved["topology"]["masters"] = d.dist.topology.masters;
  d.experiment.resolved["topology"]["group_size"] = d.dist.topology.group_size;
  d.experiment.resolved["topology"]["submaster_every"] = d.dist.topology.submaster_every;
  d.experiment.resolved["topology"]["submaster_scale"] = d.dist.topology.submaster_scale;
  d.experiment.resolved["topology"]["max_lead"] = d.dist.topology.max_lead;
  if (d.dist.virtual_compute) d.experiment.resolved["topology"]["virtual_compute"] = d.dist.topology.virtual_compute;
  if (d.dist.algorithm) d.experiment.resolved["algorithm"]["rule"] = d.dist.algorithm->describe();
  return d;
}

}  // namespace

DistExperiment load_distributed(const std::string& path, const std::vector<std::string>& overrides, int ranks) {
  return load(path, overrides, [ranks](const TopologyConfig&) { return ranks; });
}

DistExperiment load_distributed_workers(const std::string& path, const std::vector<std::string>& overrides,
                                        int workers) {
  return load(path, overrides, [workers](const TopologyConfig& t) { return t.masters + workers * t.group_size; });
}

}  // namespace mpigan::dist
