// The master's request loop (server.hpp), internal to master/: the loop's view of a child and the Server class.
#pragma once

#include "mpigan/dist/launch.hpp"
#include "mpigan/master/checkpoints.hpp"
#include "mpigan/master/child_watch.hpp"
#include "mpigan/master/parent_link.hpp"
#include "mpigan/master/progress.hpp"
#include "mpigan/master/update_service.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace mpigan::master::detail {

using dist::Header;
using dist::Kind;

/// The loop's view of a child: its rank, the request being served and where it stands.
struct Child {
  int rank = -1;
  bool done = false, stopped = false;
  /// Its reply is deferred (topology.max_lead): it is too far ahead; pull: what it sent was a pull
  /// (pull-then-push), answered and followed by its update on release; else its update was applied.
  bool deferred = false, deferred_pull = false;
  Header header;              ///< the request being served (the receive buffer)
  Header last;                ///< a copy of the last request served (header is reused by the receive)
  std::int64_t flagged = -1;  ///< the last checkpoint it was asked to write its part of
  double arrived = 0;         ///< wall time its current request was seen
  ChildWatch watch;           ///< how long it may stay silent (topology.rank_timeout)
  MPI_Request req = MPI_REQUEST_NULL;
};

/// The request loop of one master rank. Its member functions are defined in server.cpp (start-up,
/// replies, the loop, serving, bounded staleness) and server_stop.cpp (hung children and the end
/// of training).
class Server {
 public:
  explicit Server(dist::RoleContext& ctx);

  dist::MasterResult run();

 private:
  // ---------------------------------------------------------------- replies
  /// Where the reply to child i is built: its shared-memory slot (the rule writes the weights
  /// straight into the child's view), or the buffer an MPI message is sent from.
  std::span<float> reply_span(std::size_t i);
  void send_weights(std::size_t i, std::int32_t flags, std::int64_t ckpt);
  void send_reply(std::size_t i, std::span<const float> payload, std::int32_t flags, std::int64_t ckpt);
  /// The answer to a served update: the weights (with a checkpoint request when one is pending).
  void answer(std::size_t i);
  void send_stop(std::size_t i, bool not_applied = false);
  /// Ask each child once per checkpoint to write its part (on the next reply it gets).
  std::int32_t flags_for(std::size_t i);

  // ---------------------------------------------------------------- the loop
  void post(std::size_t i);
  /// Idle polling: the master sleeps between polls, backing off up to a cap of 1% of the mean
  /// time between requests (1-10 ms). Slow CPU workers (a request every second or so) then cost
  /// the master ~100 wake-ups per second instead of 1000 (it shares a node with them), while the
  /// latency a request may wait stays ~1% of the interval; fast GPU workers keep the 1 ms cap.
  double idle_sleep_cap() const;
  void note_arrivals(double now, std::size_t n);
  /// The requests that have arrived, waiting (idle) until at least one has.
  std::vector<int> wait_for_requests(std::vector<MPI_Request>& reqs);
  void serve();
  void handle(std::size_t i);
  /// A pull (pull-then-push): the weights, then the update computed on them.
  void serve_pull(std::size_t i);
  /// The update's payload: in the child's shared-memory slot, or received into m_update.
  std::span<const float> receive_payload(std::size_t i);
  void serve_update(std::size_t i, bool reply);
  /// The service applied a synchronous round: log it, then answer its children.
  void round_closed(const Decision& d);

  // ---------------------------------------------------------------- bounded staleness (max_lead)
  /// Child @p i has had more than topology.max_lead updates applied beyond the child least served
  /// of those still training.
  bool too_far_ahead(std::size_t i) const;
  void defer(std::size_t i, bool pull);
  /// Answers the deferred children that are no longer too far ahead, with the weights of now.
  void release_deferred();

  // ---------------------------------------------------------------- hung children (server_stop.cpp)
  /// A child the master has waited on for longer than its limit: hung (SIGSTOP, a deadlock, swap).
  std::optional<std::size_t> hung_child(double now) const;
  /// Ends the job naming the hung children (m_hung): FAILED, then an exception (the rank aborts
  /// the job, the hung processes included).
  [[noreturn]] void fail_hung(std::int64_t taken_at_hang = -1);
  /// A hung child. The top master of a flat job (its children are worker groups) ends the job with
  /// a checkpoint of the current version: it writes the main file and the hung group's part itself
  /// (the data position of its last request; its rule's worker state starts afresh on resume),
  /// stops the other children asking for their parts (now, for those held in a round), and once
  /// serving is over waits for the parts, commits and ends the job (end_hung). A child found
  /// silent while the job ends (a second hung rank, or one hung during the final checkpoint) has
  /// its part of the pending checkpoint written the same way, so the commit never waits on it. A
  /// hung sub-master, or a child of one, ends the job at once with the last complete checkpoint.
  void stop_for_hung(std::size_t i, double now);
  /// After serving with a hung child: wait (up to the rank timeout, at least 30 s) for the other
  /// children's parts, commit the checkpoint, record FAILED and end the job.
  [[noreturn]] void end_hung();

  // ---------------------------------------------------------------- the end of training (server_stop.cpp)
  void maybe_all_done();
  void parent_said(const ParentLink::Reply& r);
  /// From now on every request is answered with stop; children waiting after `done` get it now.
  void enter_stopping(std::int64_t final_checkpoint);
  /// max_nonfinite updates in a row were non-finite: training has diverged. The canonical weights
  /// never took any of them, so they are checkpointed and the run ends with the failure recorded.
  void diverged(std::size_t last_child);
  void begin_stop(const std::string& why);
  /// After every new version: limits, sub-master exchange, validation, checkpoints, progress.
  void after_version();

  dist::RoleContext& m_ctx;
  dist::Topology& m_topology;
  const train::ExperimentConfig& m_experiment;
  bool m_top;
  std::vector<Child> m_children;
  UpdateService m_service;
  Progress m_progress;
  Checkpoints m_checkpoints;
  std::optional<ParentLink> m_parent;  ///< sub-masters only
  std::vector<float> m_update, m_reply;
  bool m_stopping = false, m_parent_stopped = false;
  std::vector<SilentChild> m_hung;      ///< the hung children, as they were found
  std::int64_t m_hung_checkpoint = -1;  ///< the checkpoint written at the hang
  std::vector<int> m_parts_by_master;   ///< ranks whose part of the pending checkpoint the master wrote
  std::int64_t m_final_checkpoint = -1;
  double m_last_arrival = 0, m_mean_interval = 0;  ///< seconds between requests (moving average)
  std::int64_t m_deferred = 0;                     ///< replies deferred by topology.max_lead
  dist::MasterResult m_result;
};

}  // namespace mpigan::master::detail
