// What one worker computes and sends, without any transport: the rule's worker sides of both
// networks, the gradient accumulators (gradient mode), the payload built from a session's model
// (accumulated gradients, weights or their change since the pull, and the BatchNorm state), and
// the merge of the master's reply. The MPI exchange (exchange.hpp) wraps one around its group
// averaging; the research sandbox (sandbox/) keeps one per virtual worker over a shared session.
#pragma once

#include "mpigan/algos/rule.hpp"
#include "mpigan/dist/protocol.hpp"
#include "mpigan/models/gan_step.hpp"
#include "mpigan/train/session.hpp"

#include <array>
#include <memory>
#include <span>
#include <vector>

namespace mpigan::worker {

/// The losses of a worker's last step into an update's header (D real, D fake, G, then the heads'
/// losses as room allows).
void put_losses(dist::Header& h, const models::StepLosses& l);

class UpdateBuilder {
 public:
  /// The rule's worker sides for @p session's networks (with the experiment's optimizers) and the
  /// buffers of @p layout. The session is used by every call below; it may be shared by several
  /// builders (one at a time), each keeping its own weights through load() / build().
  /// @p siblings: the workers (groups) the master serves, this one included (algos::RuleContext::
  /// workers of the worker side: EASGD's alpha, GEM's automatic learning rate).
  UpdateBuilder(const algos::Algorithm& algorithm, train::Session& session, const train::ExperimentConfig& e,
                const dist::PayloadLayout& layout, int siblings);
  ~UpdateBuilder();

  algos::WorkerMode mode() const { return m_mode; }
  algos::Payload payload_kind() const { return m_payload_kind; }
  algos::WorkerRule& rule(models::Net n) { return *m_rules[dist::index(n)]; }
  const dist::PayloadLayout& layout() const { return m_layout; }

  /// Before a compute phase: zero the gradient accumulators (gradient mode).
  void begin_phase();
  /// Gradient mode: add the network's fresh gradients to its accumulator.
  void accumulate(models::Net n);
  ParameterSet& accumulator(models::Net n) { return m_acc[dist::index(n)]; }

  /// The payload from the session's model: per network the accumulated gradients (gradient
  /// payloads) or the weights (minus the pulled weights for delta payloads), then the BN state;
  /// also records the model's weights for merge() and the state's decay since load() (for the
  /// header, dist::Header::state_decay). Returns the payload buffer (host).
  std::span<float> build();
  /// Per network, the decay of the BN state since it was loaded from a reply (as of build()).
  const std::array<double, 2>& state_decay() const { return m_state_decay; }
  /// The rule's transform before sending; @p master_now: the master's current weights (both
  /// networks) for pull-then-push rules, empty otherwise.
  std::array<algos::RuleStats, 2> before_send(std::span<const float> master_now);
  /// The worker's weights after the master's @p reply (both networks' weights and the state), by
  /// the rule's merge; the result is in reply_buffer() (weights; the reply's state stays).
  void merge(std::span<const float> reply);
  /// Load reply_buffer() into the session's model (weights and state), remember the weights as
  /// the pulled ones, and start the state's decay afresh.
  void load();

  /// The learning-rate schedule's factor of the last reply (dist::Header::lr_factor): the rule's
  /// rates follow it (GEM's proposals), and so do the @p local optimizers (local mode; null ones
  /// are skipped), set to the experiment's rates times it.
  void follow_schedule(double factor, const std::array<nn::Optimizer*, 2>& local);
  double lr_factor() const { return *m_lr_factor; }

  std::span<float> payload() { return m_payload; }
  std::span<float> reply_buffer() { return m_reply; }
  /// The weights a pull-then-push rule computes its first update against (the initial weights).
  void set_local_from_reply();

  /// Between exchanges (its update built, not yet sent): the payload, the local and pulled
  /// weights, the state's decay and the rules' worker state under @p prefix, for an exact
  /// continuation (the sandbox's resume). The reply buffer is not kept: the next reply overwrites
  /// it before anything reads it.
  void save_state(train::CheckpointWriter& w, const std::string& prefix) const;
  void load_state(const train::CheckpointReader& r, const std::string& prefix);

 private:
  train::Session& m_session;
  dist::PayloadLayout m_layout;
  algos::WorkerMode m_mode;
  algos::Payload m_payload_kind;
  std::unique_ptr<Backend> m_host;
  std::unique_ptr<double> m_lr_factor = std::make_unique<double>(1.0);  ///< RuleContext::lr_factor
  std::array<double, 2> m_lr{};                                         ///< the experiment's rates
  std::array<std::unique_ptr<algos::WorkerRule>, 2> m_rules;
  std::array<ParameterSet, 2> m_acc;  ///< gradient mode: accumulated gradients per network
  std::vector<float> m_payload, m_reply, m_local, m_pulled;
  std::array<double, 2> m_state_decay{1.0, 1.0};
};

}  // namespace mpigan::worker
