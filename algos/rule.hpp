// Update rules as plugins (docs/algorithms.md). A rule decides, for each network (G and D
// separately, each a flat parameter vector):
//   - what a worker computes between exchanges (WorkerMode): gradients at fixed weights, or local
//     training with its own optimizer;
//   - what it sends (Payload): the gradient, the change of its weights, or the weights;
//   - the order of one exchange (Exchange): push then pull (the master replies after applying),
//     or pull then push (GEM: the worker first fetches the current weights);
//   - the worker-side transform before sending and merge after the reply (WorkerRule);
//   - the master-side acceptance and application, with rounds for synchronous rules (MasterRule).
// Rules see host float spans and do their vector math with the host kernels (mpigan/kernels/), so
// their formulas are pure functions of (weights, update, staleness, state) and are unit-tested
// without MPI (tests/unit/master/test_rules.cpp).
// Each rule's state (optimizer slots, momenta, backups) is saved and restored with checkpoints.
//
// Adding a rule: one .cpp in algos/ defining an Algorithm subclass and a registration line in
// algos/registry.cpp (docs/algorithms.md walks through an example).
#pragma once

#include "mpigan/core/backend.hpp"
#include "mpigan/core/config.hpp"
#include "mpigan/nn/optimizer.hpp"
#include "mpigan/train/checkpoint.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace mpigan::algos {

enum class WorkerMode { gradients, local };
enum class Payload { gradient, delta, weights };
enum class Exchange { push_pull, pull_push };
enum class Verdict { applied, held, rejected };

const char* to_string(WorkerMode m);
const char* to_string(Payload p);

/// What the master knows about an arriving update.
struct UpdateMeta {
  int worker = 0;            ///< worker (group) id, 0..workers-1
  std::int64_t pulled = 0;   ///< master version the worker's weights came from
  std::int64_t version = 0;  ///< master version when the update is served
  std::int64_t samples = 0;  ///< samples the update was computed on
  /// The update's memory stays valid and unchanged until this worker gets its reply (it lies in
  /// the worker's shared-memory slot): a rule holding it for a round may keep a view, not a copy.
  bool stable = false;
  std::int64_t staleness() const { return version - pulled; }
};

/// Per-update figures a rule reports for the per-update log (e.g. GEM's median scale).
struct RuleStats {
  double scale = 1.0;  ///< the effective scale applied (GEM: median pi; DC-ASGD: 1)
};

/// Worker side, one per network per worker. Spans are host buffers of the network's flat size.
class WorkerRule {
 public:
  virtual ~WorkerRule() = default;
  /// Transform @p update in place before sending. @p master_now is the master's current weights
  /// for pull-then-push rules (empty otherwise); @p computed_at the weights the update was computed
  /// on (the weights the worker was last given; empty where unknown).
  virtual RuleStats before_send(std::span<float> update, std::span<const float> master_now,
                                std::span<const float> computed_at) {
    (void)update;
    (void)master_now;
    (void)computed_at;
    return {};
  }
  /// The worker's weights after the exchange: @p local holds its weights (after local training,
  /// if any) and receives the result; @p reply is what the master sent; @p sent what was sent.
  virtual void after_reply(std::span<float> local, std::span<const float> reply, std::span<const float> sent);
  virtual void save(train::CheckpointWriter&, const std::string&) const {}
  virtual void load(const train::CheckpointReader&, const std::string&) {}
};

/// Master side, one per network, owning the canonical weights' update logic. The weights live in
/// @p weights (a host ParameterSet owned by the master) and are changed in place.
class MasterRule {
 public:
  explicit MasterRule(ParameterSet& weights) : m_weights(weights) {}
  virtual ~MasterRule() = default;
  /// Serve one (finite) update. For applied/rejected verdicts @p reply is filled with what the
  /// worker gets back (default: the weights after applying). Held updates wait for close_round().
  /// Pull-then-push exchanges get no reply to the update (the worker pulled just before): there
  /// @p reply is empty.
  virtual Verdict submit(const UpdateMeta& meta, std::span<const float> update, std::span<float> reply,
                         RuleStats& stats) = 0;
  /// Synchronous rules: whether the held updates complete a round (of @p expected workers).
  virtual bool round_ready(int expected) const {
    (void)expected;
    return false;
  }
  /// Apply the round (in worker-id order, so results are bitwise reproducible). @p first_reply is
  /// the reply buffer of held worker @p first: a rule may fill it while it applies the round (in
  /// the same pass over memory) and return true; the master then calls reply_after_round() only
  /// for the other held workers.
  virtual bool close_round(int first, std::span<float> first_reply) {
    (void)first;
    (void)first_reply;
    return false;
  }
  /// What a worker gets back after a round (default: the weights).
  virtual void reply_after_round(int worker, std::span<float> reply) const;
  /// The weights a worker is given (its initial weights, a pull, or a reply): by default the
  /// current weights. Rules that remember what each worker has (DC-ASGD) record it here.
  virtual void pull(int worker, std::span<float> out);
  virtual void save(train::CheckpointWriter&, const std::string&) const {}
  virtual void load(const train::CheckpointReader&, const std::string&) {}

 protected:
  std::span<float> weights() { return {m_weights.data(), m_weights.size()}; }
  std::span<const float> weights() const { return {m_weights.data(), m_weights.size()}; }
  ParameterSet& m_weights;
};

/// Context for building a rule's sides.
struct RuleContext {
  Backend& backend;               ///< host backend of the rule's optimizer (OptimizerApply)
  const ParameterSet& layout;     ///< the network's parameter layout
  nn::OptimizerConfig optimizer;  ///< the experiment's optimizer (master optimizer in gradient mode)
  int workers = 1;                ///< workers served by this master
  std::string network;            ///< "generator" or "discriminator" (for messages)
  /// The learning-rate schedule's factor now (optimizer.schedule), owned and kept current by the
  /// side that builds the rule (the master from its budget spent, a worker from its last reply);
  /// null: 1. Every learning rate a rule applies is multiplied by it.
  const double* lr_factor = nullptr;
  double schedule() const { return lr_factor != nullptr ? *lr_factor : 1.0; }
};

/// An update rule: its fixed properties and factories for its two sides.
class Algorithm {
 public:
  virtual ~Algorithm() = default;
  virtual std::string name() const = 0;
  virtual WorkerMode worker_mode() const = 0;
  virtual Payload payload() const = 0;
  virtual Exchange exchange() const { return Exchange::push_pull; }
  /// Synchronous rounds (all workers each round)?
  virtual bool synchronous() const { return false; }
  virtual std::unique_ptr<WorkerRule> make_worker(const RuleContext& ctx) const = 0;
  virtual std::unique_ptr<MasterRule> make_master(ParameterSet& weights, const RuleContext& ctx) const = 0;
  /// One line of its parameters, for logs.
  virtual std::string describe() const = 0;
};

/// out = scale * (parts[0] + parts[1] + ...), summed left to right in the given order (so the same
/// parts in the same order give the same bits), in one pass for up to two parts and one more per
/// further part (a scale of 1 changes no bits).
void sum_scaled(std::span<const std::span<const float>> parts, float scale, std::span<float> out);

/// Names of the registered rules.
std::vector<std::string> algorithm_names();
/// Build a rule from the experiment's `algorithm` section (problems recorded in the document;
/// unknown keys rejected). Returns nullptr only when the name is unknown (also recorded).
std::unique_ptr<Algorithm> make_algorithm(ConfigNode& section);

}  // namespace mpigan::algos
