// Where a master and a child on the same node put their payloads: two slots per child in an MPI-3
// shared-memory window (MPI_Win_allocate_shared over the node's ranks), instead of MPI messages.
//
//   up slot    child -> master: the child copies its update in, then sends the header; the master
//              reads the update in place (its update rule consumes it straight from the slot).
//   down slot  master -> child: the master's update rule writes the reply (fresh weights and BN
//              state) straight into it, then the master sends the header; the child copies it out.
//
// So an update costs the master no copy at all, where MPI moved the 4 MB of each direction with a
// copy on the master's core (UCX's cross-memory attach, ~11 GB/s) plus rendezvous round trips
// (docs/performance.md, master capacity). Children on other nodes, and every child when
// topology.shared_memory is false, use MPI messages as before; the headers always go over MPI.
//
// Ordering: the protocol alternates strictly per child (request, then reply), so a slot is never
// written while the other side reads it: a child writes its up slot only after the reply to its
// previous request, and the master writes a child's down slot only in answer to a request (or
// once at the start). The header message orders the accesses; MPI_Win_sync on both sides (the
// window is locked for the whole run with MPI_Win_lock_all) makes the writes visible.
//
// Doorbells: the master's segment starts with one Doorbell (core/mpi/doorbell.hpp) that its
// children on the node ring after each header they send it, and one per child that the master
// rings after each header it sends that child. Waiting for a header, either side sleeps on its
// bell instead of polling MPI on a timer: a master whose children all share its node sleeps
// through their whole compute phase (children on other nodes do not ring: the master then
// sleeps on its bell no longer than its polling interval).
//
// Lifetime: create() and the destructor are collective over the ranks of the node (every rank of
// the run calls create() once, with the same `enabled`); a destructor reached by stack unwinding
// (an exception, followed by MPI_Abort) frees nothing, so it cannot hang the failing rank.
#pragma once

#include "mpigan/dist/protocol.hpp"
#include "mpigan/dist/topology.hpp"

#include <array>
#include <cstddef>
#include <span>
#include <vector>

namespace mpigan::dist {

class PayloadChannels {
 public:
  PayloadChannels() = default;  ///< no shared memory: every payload travels as an MPI message
  ~PayloadChannels();
  PayloadChannels(PayloadChannels&& other) noexcept;
  PayloadChannels& operator=(PayloadChannels&& other) noexcept;
  PayloadChannels(const PayloadChannels&) = delete;
  PayloadChannels& operator=(const PayloadChannels&) = delete;

  /// Collective over every rank of t.links. @p floats: the payload size (PayloadLayout::total()).
  static PayloadChannels create(const Topology& t, std::size_t floats, bool enabled);

  // Master side, child i of t.children.
  bool child_shared(std::size_t i) const { return i < m_child_slot.size() && m_child_slot[i] != nullptr; }
  std::span<float> child_up(std::size_t i) const { return {m_child_slot[i], m_floats}; }
  std::span<float> child_down(std::size_t i) const { return {m_child_slot[i] + m_stride, m_floats}; }
  /// The children that share this rank's node (for the log).
  int shared_children() const;
  /// Ring after sending child i a header (invalid unless the child shares this node).
  Doorbell to_child(std::size_t i) const { return i < m_child_bell.size() ? m_child_bell[i] : Doorbell(); }
  /// How the master waits for its children's headers; @p poll_s: its polling interval, used for
  /// children on other nodes.
  Idle from_children(double poll_s) const;

  // Child side (a group leader or a sub-master, towards its parent).
  bool parent_shared() const { return m_parent_slot != nullptr; }
  std::span<float> up() const { return {m_parent_slot, m_floats}; }
  std::span<float> down() const { return {m_parent_slot + m_stride, m_floats}; }
  /// Ring after sending the parent a header (invalid unless the parent shares this node).
  Doorbell to_parent() const { return m_parent_bell; }
  /// How this child waits for its parent's headers.
  Idle from_parent() const;

  /// MPI_Win_sync: after writing a slot and before the header goes out; after a header came in
  /// and before reading a slot.
  void sync() const;

 private:
  void release() noexcept;
  MPI_Comm m_node = MPI_COMM_NULL;
  MPI_Win m_win = MPI_WIN_NULL;
  std::size_t m_floats = 0, m_stride = 0;
  std::vector<float*> m_child_slot;  ///< per child: its up slot (down follows at +stride); null = MPI
  float* m_parent_slot = nullptr;
  Doorbell m_bell;                     ///< master side: the bell its node's children ring
  std::vector<Doorbell> m_child_bell;  ///< master side: per child, the bell it sleeps on
  Doorbell m_parent_bell, m_my_bell;   ///< child side: the parent's bell, and this child's own
};

/// Child side: send @p h and then the payload @p p (laid out as @p layout) to @p parent (shared
/// memory: copy @p p into the up slot before the header instead). Sets h.sumsq from @p p first,
/// in the same pass as the copy into the slot.
/// Sums of squares of a payload's G, D and state blocks (Header::sumsq): the master's finiteness
/// check and the update norms it logs.
std::array<double, 3> block_sums_of_squares(std::span<const float> p, const PayloadLayout& layout);
void push_payload(const Comm& links, const PayloadChannels& ch, Header h, int parent, std::span<const float> p,
                  const PayloadLayout& layout);
/// Child side, after a header with a payload came: the payload into @p out.
void pull_payload(const Comm& links, const PayloadChannels& ch, int parent, std::span<float> out);

}  // namespace mpigan::dist
