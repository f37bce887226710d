// The distributed part of an experiment: topology, update rule, synchronisation period and
// tracing, parsed from the same document as the rest (train/experiment.hpp), so an
// experiment is validated as a whole, before any MPI traffic, with every problem reported.
//
//   topology:    masters, group_size, ranks_per_node, submaster_every
//   algorithm:   name (sync | downpour | easgd | gem | dc_asgd) and the rule's parameters
//   training:    sync_every (steps between exchanges), max_nonfinite (divergence stop)
//   logging:     trace (write a Chrome-trace timeline)
#pragma once

#include "mpigan/algos/rule.hpp"
#include "mpigan/dist/timing.hpp"
#include "mpigan/dist/topology.hpp"
#include "mpigan/train/experiment.hpp"

#include <memory>
#include <optional>

namespace mpigan::dist {

struct DistConfig {
  TopologyConfig topology;
  std::unique_ptr<algos::Algorithm> algorithm;
  std::int64_t sync_every = 1;
  /// Consecutive non-finite updates (none applied in between) after which the run stops as
  /// diverged; 0: 10, or twice the master's children when that is more.
  std::int64_t max_nonfinite = 0;
  bool trace = false;
  /// topology.virtual_compute, parsed: worker ranks are virtual (no data, no model).
  std::optional<ComputeModel> virtual_compute;
  /// Whether the top master writes checkpoints (false for `mpigan bench master`, whose stand-in
  /// workers hold no state to save).
  bool checkpoints = true;
};

struct DistExperiment {
  train::ExperimentConfig experiment;
  DistConfig dist;
};

/// Load and validate everything (throws ConfigError listing every problem, including the
/// topology's fit to @p ranks).
DistExperiment load_distributed(const std::string& path, const std::vector<std::string>& overrides, int ranks);
/// The same for a job of @p workers worker groups and whatever masters its topology asks for (the
/// research sandbox's virtual job).
DistExperiment load_distributed_workers(const std::string& path, const std::vector<std::string>& overrides,
                                        int workers);

}  // namespace mpigan::dist
