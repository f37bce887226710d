// The master's update service: the canonical weights of both networks and their BatchNorm state,
// the update rule of each network, and every decision about an arriving update — applied, held
// for a synchronous round, rejected (non-finite, or by the rule), or the end of training by
// divergence. No MPI: the request loop (server.hpp) feeds it what arrived and sends what it
// decided; the serial tests (tests/unit/master) and the research sandbox drive it from one process.
//
// Per update:      submit(update, reply) -> Decision
//   applied        a new version; @p reply (if given) holds both networks' new weights, written by
//                  the rules in their update pass; fill_state() adds the canonical BN state
//   held           kept for the round; when it completes the round, the round is applied at once
//                  (Decision::round lists the children to answer, in arrival order)
//   rejected_*     nothing changed; the child gets the weights again (pull())
//   diverged       max_nonfinite non-finite updates in a row: training has diverged
// A child whose data ended (child_done) no longer counts towards a round, which may then close.
//
// BatchNorm state: the canonical running statistics are the moving average over every batch any
// worker trained on, as one process would have kept it over the same batches. A child reports
// the state s_w it reached from the state s_p it was last sent, with the decay a left of s_p in
// it (dist::Header::state_decay: s_w = a s_p + what its own batches added); the service merges
// s <- s_w + a (s - s_p), which is s_w itself when nothing was merged since the child was sent
// s_p (for pull-then-push rules, s_p is the state sent before the child's latest pull). Asynchronous updates merge as
// they are applied, a round's in child order when it closes; rejected updates not at all. (A mean of the children's
// latest states, as before, moved the statistics one step per round of N updates: N times too slowly.)
#pragma once

#include "mpigan/algos/rule.hpp"
#include "mpigan/dist/payload.hpp"
#include "mpigan/train/checkpoint.hpp"
#include "mpigan/train/experiment.hpp"

#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace mpigan::master {

/// An update as it arrived at the master.
struct Incoming {
  int child = 0;                   ///< 0..children-1
  std::int64_t pulled = 0;         ///< the version its weights came from
  std::int64_t samples = 0;        ///< samples behind it
  std::array<double, 3> sumsq{};   ///< sums of squares of its G, D and state blocks (dist::Header::sumsq)
  std::span<const float> payload;  ///< the whole payload (dist::PayloadLayout)
  /// The payload stays valid and unchanged until this child is answered (a shared-memory slot):
  /// a synchronous rule may hold a view instead of a copy.
  bool stable = false;
  /// Per network, the decay of the state the child was last sent in the state it reports
  /// (dist::Header::state_decay).
  std::array<double, 2> state_decay{1.0, 1.0};
};

enum class Outcome { applied, held, rejected_nonfinite, rejected_by_rule, diverged };
const char* to_string(Outcome o);

struct Decision {
  Outcome outcome = Outcome::applied;
  std::array<double, 2> scale{1.0, 1.0};  ///< the rules' effective scale per network (per-update log)
  double lr_factor = 1.0;                 ///< the learning-rate schedule's factor it was served with
  /// A synchronous round was applied (a new version): the held children to answer, in arrival
  /// order. The first one's reply is already written when first_reply_written.
  std::vector<int> round;
  bool first_reply_written = false;
};

/// How a master goes on after UpdateService::submit(): one policy for the real master
/// (master/server.cpp) and the sandbox's (sandbox/sandbox_masters.cpp), which carry it out with
/// their own transport and clock.
enum class Serve {
  answer,       ///< rejected (by the rule, or non-finite): nothing changed; the child gets the weights
  diverged,     ///< too many non-finite updates in a row: training ends as diverged
  wait,         ///< held for a synchronous round that is not complete: no reply yet
  close_round,  ///< held, and the round it completed was applied: a new version; answer the round
  new_version,  ///< applied: a new version; then reply_after_version() says how to answer
};
Serve serve_after(const Decision& d);

/// How a child whose update made a new version is answered, once the version is handled (logs,
/// validation, checkpoints, the end of training).
enum class Reply {
  none,     ///< the update of a pull-then-push exchange: the child pulled before it pushed
  stop,     ///< training ended with this version
  defer,    ///< more than topology.max_lead updates ahead: answered on release, with the weights of then
  weights,  ///< the weights (written by submit()) and the canonical BatchNorm state (fill_state())
};
/// @p wants_reply: false for a pull-then-push update; @p beyond_lead: UpdateService::beyond_lead().
Reply reply_after_version(bool wants_reply, bool stopping, bool beyond_lead);

class UpdateService {
 public:
  /// The buffer a child's reply is built in (its shared-memory slot, or a send buffer).
  using ReplySlot = std::function<std::span<float>(int child)>;

  struct Options {
    int children = 1;
    /// Top master above sub-masters: the tree rule (algos::make_tree_master) instead of the
    /// experiment's rule.
    bool tree_top = false;
    /// A round may write its first child's reply in the round's own pass (only where nothing
    /// changes the weights between the round and the replies: not on a sub-master).
    bool fuse_first_reply = true;
    /// Non-finite updates in a row that end training (0: 10, or twice the children when more).
    std::int64_t max_nonfinite = 0;
    /// tree_top, asynchronous: the factor on a sub-master's change (topology.submaster_scale;
    /// 0: 1 / children).
    double tree_scale = 0;
    /// The learning-rate schedule (optimizer.schedule) of the version and samples reached, set
    /// before each update is served (train::ExperimentConfig::lr_factor). Empty: the factor is set
    /// from outside (a sub-master takes its parent's, set_lr_factor).
    std::function<double(std::int64_t version, std::int64_t samples)> schedule;
    /// The schedule of a top master: @p e's (which must outlive the service).
    static std::function<double(std::int64_t, std::int64_t)> schedule_of(const train::ExperimentConfig& e) {
      return [&e](std::int64_t version, std::int64_t samples) { return e.lr_factor(version, samples); };
    }
  };

  /// The two networks served: their weights' layouts and initial values (on any backend), their
  /// initial BatchNorm state, and the optimizers the rules' masters apply (gradient rules).
  struct Networks {
    std::array<const ParameterSet*, 2> weights{};
    std::array<std::vector<float>, 2> state;
    Backend* backend = nullptr;  ///< where `weights` live
    std::array<nn::OptimizerConfig, 2> optimizers;
    /// A GAN's generator and discriminator, with the experiment's optimizers.
    static Networks of(const models::GanModel& m, Backend& backend, const train::ExperimentConfig& e);
  };

  UpdateService(const algos::Algorithm& algorithm, const Networks& networks, const Options& options,
                ReplySlot reply_slot);

  // ---- serving
  /// What child @p child is given when it pulls (and initially): both networks' weights (through
  /// the rules, which may record what each child has) and the canonical BN state.
  void pull(int child, std::span<float> out);
  /// Serve one update. @p reply: where the reply's weights go; empty when no reply follows (the
  /// update of a pull-then-push exchange).
  Decision submit(const Incoming& update, std::span<float> reply);
  /// Child @p child's data is exhausted: it no longer counts towards rounds. Returns a Decision
  /// with a non-empty round when its absence completed one.
  Decision child_done(int child);
  /// Child @p child is no longer answered (stopped, hung): it no longer holds back the others'
  /// lead.
  void child_gone(int child) { m_children[static_cast<std::size_t>(child)].gone = true; }
  /// How many more updates of @p child were applied than of the least-served child still training
  /// (neither done nor gone): topology.max_lead bounds it, for the real master and the sandbox.
  std::int64_t lead(int child) const;
  /// Is @p child more than @p max_lead (topology.max_lead; 0: unbounded) updates ahead?
  bool beyond_lead(int child, std::int64_t max_lead) const { return max_lead > 0 && lead(child) > max_lead; }
  /// The reply to a child of a closed round (its weights unless already written, and the state).
  void round_reply(int child, std::span<float> reply, bool weights_written);
  /// The canonical BN state into the state blocks of @p child's reply (remembered: the child's
  /// next report is merged against it).
  void fill_state(int child, std::span<float> reply);
  /// A sub-master's report to its parent: the canonical state into @p out's state blocks, and
  /// per network the decay of the state last set by set_state() in it (the product of the merged
  /// children's decays).
  std::array<double, 2> report_state(std::span<float> out) const;
  /// Replace the canonical state (a sub-master taking its parent's); the decay starts afresh.
  void set_state(std::span<const float> state);

  // ---- the canonical model
  std::span<float> weights(models::Net n) { return {m_nets[dist::index(n)].theta.data(), layout().weights(n)}; }
  std::span<const float> weights(models::Net n) const {
    return {m_nets[dist::index(n)].theta.data(), layout().weights(n)};
  }
  std::span<float> state() { return m_state; }
  std::span<const float> state() const { return m_state; }
  const dist::PayloadLayout& layout() const { return m_layout; }
  bool synchronous() const { return m_synchronous; }
  /// Child @p child's update is held for the open round (it waits for the others).
  bool held(int child) const { return std::find(m_held.begin(), m_held.end(), child) != m_held.end(); }
  int children() const { return static_cast<int>(m_children.size()); }

  // ---- the learning-rate schedule's factor on every rate the rules apply (RuleContext::lr_factor)
  double lr_factor() const { return *m_lr_factor; }
  void set_lr_factor(double f) { *m_lr_factor = f; }

  // ---- progress
  std::int64_t version() const { return m_version; }
  std::int64_t samples() const { return m_samples; }  ///< behind applied and held updates
  std::int64_t applied() const { return m_applied; }
  std::int64_t rejected() const { return m_rejected; }
  std::int64_t nonfinite_run() const { return m_nonfinite_run; }
  std::int64_t nonfinite_limit() const;

  /// Weights, state, the rules' state and the version, under "model/", "rule/" and "progress/"
  /// (each after @p prefix: the sandbox keeps several masters in one file).
  void save(train::CheckpointWriter& w, const std::string& prefix = "") const;
  void load(const train::CheckpointReader& r, const std::string& path, const std::string& prefix = "");
  void set_samples(std::int64_t s) {
    m_samples = s;
    follow_schedule();
  }
  /// What an exact continuation needs beyond save() (the sandbox's resume, sandbox/sandbox_state.cpp):
  /// the counts, each child's bookkeeping and the BatchNorm state's decay, under @p prefix. Taken
  /// between rounds only (no update held); load_exact() follows load().
  void save_exact(train::CheckpointWriter& w, const std::string& prefix) const;
  void load_exact(const train::CheckpointReader& r, const std::string& prefix);

 private:
  struct NetSlot {
    ParameterSet theta;  ///< canonical weights (host)
    std::unique_ptr<algos::MasterRule> rule;
  };
  struct ChildState {
    bool done = false, gone = false;
    std::int64_t applied = 0;  ///< its updates applied (asynchronous rules)
    std::vector<float> sent;   ///< the BN state it was last sent
    /// Pull-then-push rules: the state sent before the latest pull (the next update's start).
    std::vector<float> computed_from;
    std::vector<float> report;  ///< a held update's state, merged when the round closes
    std::array<double, 2> report_decay{1.0, 1.0};
  };
  bool round_ready() const;
  Decision close_round();
  /// The schedule's factor for the version and samples reached (Options::schedule, when set).
  void follow_schedule();
  void merge_state(ChildState& c, std::span<const float> reported, const std::array<double, 2>& decay);

  std::unique_ptr<Backend> m_host;
  /// Where the rules read the schedule's factor: its own allocation, stable however the service moves.
  std::unique_ptr<double> m_lr_factor = std::make_unique<double>(1.0);
  std::function<double(std::int64_t, std::int64_t)> m_schedule;
  dist::PayloadLayout m_layout;
  std::array<NetSlot, 2> m_nets;
  std::vector<float> m_state;
  std::array<double, 2> m_state_decay{1.0, 1.0};  ///< decay since set_state() (report_state)
  std::vector<ChildState> m_children;
  std::vector<int> m_held;  ///< held children, in arrival order
  ReplySlot m_reply_slot;
  bool m_synchronous = false, m_fuse_first = true;
  bool m_pull_push = false;  ///< updates follow a pull (GEM): merged against the state before it
  std::int64_t m_max_nonfinite = 0;
  std::int64_t m_version = 0, m_samples = 0, m_applied = 0, m_rejected = 0, m_nonfinite_run = 0;
};

}  // namespace mpigan::master
