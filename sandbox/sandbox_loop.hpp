// The research sandbox's event loop (sandbox.hpp), internal to sandbox/: the virtual workers and
// masters and the Sandbox class. Its member functions are defined in sandbox.cpp (set-up, the
// loop, the workers' phases, the summary) and sandbox_masters.cpp (serving updates and pulls,
// rounds, bounded staleness, a tree's exchanges with the top master, the end of training).
#pragma once

#include "mpigan/dist/payload_channel.hpp"
#include "mpigan/master/parent_change.hpp"
#include "mpigan/master/progress.hpp"
#include "mpigan/master/update_service.hpp"
#include "mpigan/sandbox/sandbox.hpp"
#include "mpigan/train/session.hpp"
#include "mpigan/worker/update_builder.hpp"

#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <vector>

namespace mpigan::sandbox::detail {

/// What a worker rank keeps, less the transport.
struct VirtualWorker {
  int id = 0;      ///< 0..N-1: rank masters + id of the real job
  int master = 0;  ///< the master serving it (index into Sandbox::m_masters)
  int child = 0;   ///< its child id at that master
  std::unique_ptr<worker::UpdateBuilder> update;
  std::unique_ptr<models::GanStep> step;              ///< its own step seed
  std::array<std::unique_ptr<nn::Optimizer>, 2> opt;  ///< local rules: its own optimizers
  std::unique_ptr<data::BatchSource> data;
  std::int64_t version = 0, steps = 0, exchanges = 0, served = 0;
  bool exhausted = false, done = false;
  /// topology.max_lead: its reply (or, pull-then-push, its pull) waits for the others to catch up.
  bool deferred = false, deferred_pull = false;
  double deferred_at = 0;     ///< when the deferred pull arrived
  dist::Header header;        ///< the update in flight, as its header would say
  double sent_at = 0;         ///< simulated time its update (or pull) left
  std::int64_t top_base = 0;  ///< a tree: the top's version its weights came from
  double lr_factor = 1.0;     ///< the schedule's factor its last reply carries (dist::Header::lr_factor)
};

struct Event {
  enum class Kind { update, pull, done };
  double t = 0;
  std::uint64_t seq = 0;  ///< creation order: ties in time break deterministically
  int worker = 0;
  Kind kind = Kind::update;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

/// A master: the top (index 0: rank 0) or a sub-master of a tree (index and rank s =
/// 1..topology.masters-1), with its update service, its progress bookkeeping (the top's writes
/// the logs) and its own clock. A sub-master links to the top as master/parent_link.hpp does,
/// without the transport: every topology.submaster_every of its versions it hands the top its
/// change and waits (blocked: its workers' arrivals queue) until the top answers.
struct VirtualMaster {
  int rank = 0;
  std::vector<int> workers;  ///< its workers in child order (empty for the top of a tree)
  std::unique_ptr<master::UpdateService> service;
  std::unique_ptr<master::Progress> progress;
  double free = 0;  ///< when it can next serve
  std::unique_ptr<master::ParentChange> change;
  std::vector<float> up, down;   ///< its update to the top; the top's reply
  bool blocked = false;          ///< waiting for the top's reply
  bool done = false;             ///< its workers' data ended: it told the top
  std::vector<Event> waiting;    ///< its workers' arrivals while it was blocked
  std::function<void()> resume;  ///< what it does once the top has answered
  int workers_done = 0;
  /// The top versions the updates applied since its last exchange started from (their workers'
  /// top_base): their canonical staleness is counted when the top applies the change.
  std::vector<std::int64_t> bases;
};

class Sandbox {
 public:
  Sandbox(const dist::DistExperiment& d, const SandboxOptions& o);
  SandboxResult run();

 private:
  // ---- sandbox.cpp: set-up, the workers' phases, the summary
  void add_master(int rank, int children);
  void push(double t, int worker, Event::Kind kind) { m_events.push({t, m_seq++, worker, kind}); }
  void send_initial();
  void start_phase(VirtualWorker& w, double t);
  void deliver(VirtualWorker& w, double t);
  /// The worker takes the learning-rate schedule's factor its reply carried (w.lr_factor).
  void follow_schedule(VirtualWorker& w);
  master::Incoming incoming(VirtualWorker& w);
  master::LogRow row_for(const VirtualWorker& w, double arrived) const;
  void fill_result();
  /// config.yaml; on a resume, after train::RunDirectory::check_resumed_config.
  void write_config() const;
  void write_checkpoint(std::int64_t v);
  void write_summary() const;

  // ---- sandbox_state.cpp: the exact state of a run, saved at a stop and resumed
  void save_state();
  /// Restore the state of the state file; returns the version it continues from.
  std::int64_t load_state();
  /// A tree: the sub-masters' services, logs' bookkeeping and parent links, the canonical staleness.
  void save_tree(train::CheckpointWriter& out) const;
  void load_tree(const train::CheckpointReader& r);
  bool tree() const { return m_masters.size() > 1; }
  VirtualMaster& top() { return *m_masters.front(); }
  VirtualMaster& master_of(const VirtualWorker& w) { return *m_masters[static_cast<std::size_t>(w.master)]; }
  void set_now(double t) {
    m_now = t;
    m_latest = std::max(m_latest, t);
  }

  // ---- sandbox_masters.cpp: serving, rounds, bounded staleness, the tree, the end
  void serve_update(VirtualWorker& w, double arrived, bool reply);
  void serve_pull(VirtualWorker& w, double arrived);
  bool too_far_ahead(const VirtualWorker& w);
  void release_deferred();
  void send_weights(VirtualWorker& w);
  void reply_to(VirtualWorker& w);
  /// A tree: the weights now in @p w's reply came from the top's version its sub-master last took.
  void note_base(VirtualWorker& w) {
    if (const auto& c = master_of(w).change) w.top_base = c->parent_version();
  }
  void worker_done(VirtualWorker& w);
  void round_closed(VirtualMaster& m, const master::Decision& d);
  /// A new version of master @p m: a sub-master's exchange with the top (every submaster_every)
  /// or the top's progress, validation and stopping rules; then @p next (at once, or when a
  /// blocked sub-master is answered).
  void after_version(VirtualMaster& m, std::function<void()> next);
  void after_top_version();
  void exchange_with_top(VirtualMaster& sub, std::function<void()> next);
  void top_round_closed(const master::Decision& d);
  void answer_submaster(VirtualMaster& sub);
  void submaster_done(VirtualMaster& sub);
  void diverged(const VirtualMaster& m, int child);
  void begin_stop(const std::string& why);

  const dist::DistExperiment& m_job;
  const train::ExperimentConfig& m_experiment;
  SandboxOptions m_options;
  std::string m_dir;
  train::Session m_session;  ///< shared by the virtual workers (one computes at a time) and validation
  dist::PayloadLayout m_layout;
  std::size_t m_bytes = 0;
  std::vector<VirtualWorker> m_workers;
  std::vector<std::unique_ptr<VirtualMaster>> m_masters;  ///< the top, then the sub-masters
  dist::Trace m_trace;                                    ///< disabled
  double m_now = 0;                                       ///< the clock of the event being handled
  double m_latest = 0;                                    ///< the latest time reached
  std::priority_queue<Event, std::vector<Event>, std::greater<>> m_events;
  std::uint64_t m_seq = 0;
  int m_workers_done = 0, m_submasters_done = 0;
  std::int64_t m_deferred = 0;  ///< replies released after waiting for topology.max_lead
  bool m_stopping = false;
  /// A stop by a signal or the budget, noted during an event: the event finishes, the
  /// state is saved, then the run stops (so that it can continue exactly).
  std::string m_pause;
  bool m_save_due = false;           ///< checkpoint.every: a checkpoint (and the state) after this event
  double m_wall_before = 0;          ///< real seconds of the runs this one continues
  std::int64_t m_resumed_from = -1;  ///< the version this run continued from (--resume)
  std::chrono::steady_clock::time_point m_wall0;
  std::vector<std::int64_t> m_canonical;  ///< a tree: canonical staleness histogram
  SandboxResult m_result;
};

}  // namespace mpigan::sandbox::detail
