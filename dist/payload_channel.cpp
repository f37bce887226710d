#include "mpigan/dist/payload_channel.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/kernels/vector_kernels.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <utility>

namespace mpigan::dist {

namespace {
/// Slots start on 64-byte boundaries: 16 floats.
std::size_t round_up16(std::size_t n) {
  return (n + 15) / 16 * 16;
}
/// A segment for n local children: n + 1 doorbells, then two slots per child.
constexpr std::size_t kBellFloats = Doorbell::kBytes / sizeof(float);
std::size_t bells_floats(std::size_t children) {
  return children == 0 ? 0 : kBellFloats * (children + 1);
}
Doorbell bell_at(float* segment, std::size_t k) {
  return Doorbell(reinterpret_cast<std::uint32_t*>(segment + kBellFloats * k));
}
/// How long a waiter with a doorbell every sender rings sleeps on it at most (a safety net).
constexpr double kBellTimeoutSeconds = 0.05;
}  // namespace

PayloadChannels::~PayloadChannels() {
  // Unwinding towards MPI_Abort: the other ranks will not join a collective free.
  if (std::uncaught_exceptions() > 0) return;
  release();
}

void PayloadChannels::release() noexcept {
  if (m_win != MPI_WIN_NULL) {
    MPI_Win_unlock_all(m_win);
    MPI_Win_free(&m_win);
  }
  if (m_node != MPI_COMM_NULL) MPI_Comm_free(&m_node);
  m_child_slot.clear();
  m_parent_slot = nullptr;
  m_bell = {};
  m_child_bell.clear();
  m_parent_bell = m_my_bell = {};
}

PayloadChannels::PayloadChannels(PayloadChannels&& o) noexcept
    : m_node(std::exchange(o.m_node, MPI_COMM_NULL)),
      m_win(std::exchange(o.m_win, MPI_WIN_NULL)),
      m_floats(o.m_floats),
      m_stride(o.m_stride),
      m_child_slot(std::move(o.m_child_slot)),
      m_parent_slot(std::exchange(o.m_parent_slot, nullptr)),
      m_bell(std::exchange(o.m_bell, {})),
      m_child_bell(std::move(o.m_child_bell)),
      m_parent_bell(std::exchange(o.m_parent_bell, {})),
      m_my_bell(std::exchange(o.m_my_bell, {})) {}

PayloadChannels& PayloadChannels::operator=(PayloadChannels&& o) noexcept {
  if (this != &o) {
    release();
    m_node = std::exchange(o.m_node, MPI_COMM_NULL);
    m_win = std::exchange(o.m_win, MPI_WIN_NULL);
    m_floats = o.m_floats;
    m_stride = o.m_stride;
    m_child_slot = std::move(o.m_child_slot);
    m_parent_slot = std::exchange(o.m_parent_slot, nullptr);
    m_bell = std::exchange(o.m_bell, {});
    m_child_bell = std::move(o.m_child_bell);
    m_parent_bell = std::exchange(o.m_parent_bell, {});
    m_my_bell = std::exchange(o.m_my_bell, {});
  }
  return *this;
}

PayloadChannels PayloadChannels::create(const Topology& t, std::size_t floats, bool enabled) {
  PayloadChannels ch;
#ifdef MPIGAN_SMPI
  // SMPI's MPI_Win_shared_query returns rank 0's base for every rank, and a futex doorbell would
  // block the simulator's one thread: payloads go as MPI messages.
  enabled = false;
#endif
  if (!enabled) return ch;
  ch.m_floats = floats;
  ch.m_stride = round_up16(floats);
  MPIGAN_MPI_CHECK(MPI_Comm_split_type(t.links.get(), MPI_COMM_TYPE_SHARED, t.rank, MPI_INFO_NULL, &ch.m_node));
  int node_size = 0, node_rank = 0;
  MPIGAN_MPI_CHECK(MPI_Comm_size(ch.m_node, &node_size));
  MPIGAN_MPI_CHECK(MPI_Comm_rank(ch.m_node, &node_rank));

  // Who on this node talks to which parent: (run rank, parent's run rank or -1, child id).
  const bool is_child = t.leader() || t.role == Role::sub_master;
  const std::array<int, 3> mine = {t.rank, is_child ? t.parent : -1, is_child ? t.child_id : -1};
  std::vector<int> all(static_cast<std::size_t>(3 * node_size));
  MPIGAN_MPI_CHECK(MPI_Allgather(mine.data(), 3, MPI_INT, all.data(), 3, MPI_INT, ch.m_node));
  const auto entry = [&](int r, int k) { return all[3 * static_cast<std::size_t>(r) + static_cast<std::size_t>(k)]; };
  // The children of run rank @p parent on this node, by child id: slot k belongs to the k-th.
  const auto children_of = [&](int parent) {
    std::vector<int> ids;
    for (int r = 0; r < node_size; ++r)
      if (entry(r, 1) == parent) ids.push_back(entry(r, 2));
    std::sort(ids.begin(), ids.end());
    return ids;
  };

  const std::vector<int> my_children = t.role == Role::worker ? std::vector<int>{} : children_of(t.rank);
  const std::size_t bell_floats = bells_floats(my_children.size());
  const auto bytes = static_cast<MPI_Aint>((bell_floats + 2 * ch.m_stride * my_children.size()) * sizeof(float));
  MPI_Info info;
  MPIGAN_MPI_CHECK(MPI_Info_create(&info));
  MPIGAN_MPI_CHECK(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
  float* base = nullptr;
  const int rc = MPI_Win_allocate_shared(bytes, static_cast<int>(sizeof(float)), info, ch.m_node, &base, &ch.m_win);
  MPI_Info_free(&info);
  MPIGAN_MPI_CHECK(rc);
  MPIGAN_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, ch.m_win));

  if (!my_children.empty()) {
    ch.m_child_slot.assign(t.children.size(), nullptr);
    ch.m_child_bell.assign(t.children.size(), Doorbell());
    ch.m_bell = bell_at(base, 0);
    ch.m_bell.reset();
    for (std::size_t k = 0; k < my_children.size(); ++k) {
      const auto id = static_cast<std::size_t>(my_children[k]);
      MPIGAN_CHECK(id < t.children.size(), "node peer claims child id {} of {}", id, t.children.size());
      ch.m_child_slot[id] = base + bell_floats + 2 * ch.m_stride * k;
      ch.m_child_bell[id] = bell_at(base, k + 1);
      ch.m_child_bell[id].reset();
    }
  }
  if (is_child) {
    int parent_node_rank = -1;
    for (int r = 0; r < node_size; ++r)
      if (entry(r, 0) == t.parent) parent_node_rank = r;
    if (parent_node_rank >= 0) {
      const std::vector<int> siblings = children_of(t.parent);
      const auto k =
          static_cast<std::size_t>(std::find(siblings.begin(), siblings.end(), t.child_id) - siblings.begin());
      MPI_Aint size = 0;
      int unit = 0;
      float* parent_base = nullptr;
      MPIGAN_MPI_CHECK(MPI_Win_shared_query(ch.m_win, parent_node_rank, &size, &unit, &parent_base));
      const std::size_t bell_floats_parent = bells_floats(siblings.size());
      MPIGAN_CHECK(static_cast<std::size_t>(size) >= (bell_floats_parent + 2 * ch.m_stride * (k + 1)) * sizeof(float),
                   "the parent's shared segment holds {} bytes, slot {} needs more", size, k);
      ch.m_parent_slot = parent_base + bell_floats_parent + 2 * ch.m_stride * k;
      ch.m_parent_bell = bell_at(parent_base, 0);
      ch.m_my_bell = bell_at(parent_base, k + 1);
    }
  }
  MPIGAN_MPI_CHECK(MPI_Barrier(ch.m_node));
  return ch;
}

int PayloadChannels::shared_children() const {
  return static_cast<int>(
      std::count_if(m_child_slot.begin(), m_child_slot.end(), [](float* p) { return p != nullptr; }));
}

Idle PayloadChannels::from_children(double poll_s) const {
  Idle idle;
  idle.max_sleep_s = poll_s;
  const int shared = shared_children();
  if (shared == 0) return idle;
  idle.bell = m_bell;
  // Children on other nodes do not ring: then the bell sleeps no longer than the polling interval.
  idle.bell_timeout_s = shared == static_cast<int>(m_child_slot.size()) ? kBellTimeoutSeconds : poll_s;
  return idle;
}

Idle PayloadChannels::from_parent() const {
  Idle idle;
  idle.bell = m_my_bell;
  idle.bell_timeout_s = kBellTimeoutSeconds;
  return idle;
}

void PayloadChannels::sync() const {
  if (m_win != MPI_WIN_NULL) MPIGAN_MPI_CHECK(MPI_Win_sync(m_win));
}

std::array<double, 3> block_sums_of_squares(std::span<const float> p, const PayloadLayout& layout) {
  const std::size_t begin[4] = {0, layout.g, layout.g + layout.d, layout.total()};
  std::array<double, 3> s{};
  for (int b = 0; b < 3; ++b) s[b] = cpu::sum_squares_range(p.data() + begin[b], begin[b + 1] - begin[b]);
  return s;
}

void push_payload(const Comm& links, const PayloadChannels& ch, Header h, int parent, std::span<const float> p,
                  const PayloadLayout& layout) {
  MPIGAN_CHECK(p.size() == layout.total(), "push_payload: {} floats for a payload of {}", p.size(), layout.total());
  const std::size_t begin[4] = {0, layout.g, layout.g + layout.d, layout.total()};
  if (ch.parent_shared()) {
    MPIGAN_CHECK(p.size() == ch.up().size(), "push_payload: {} floats for a slot of {}", p.size(), ch.up().size());
    float* slot = ch.up().data();
    for (int b = 0; b < 3; ++b)
      h.sumsq[b] = cpu::copy_sum_squares_range(p.data() + begin[b], slot + begin[b], begin[b + 1] - begin[b]);
    ch.sync();
    send_header(links, h, parent, kTagHeader, ch.to_parent());
    return;
  }
  h.sumsq = block_sums_of_squares(p, layout);
  send_header(links, h, parent, kTagHeader);
  links.send(p, parent, kTagPayload);
}

void pull_payload(const Comm& links, const PayloadChannels& ch, int parent, std::span<float> out) {
  if (ch.parent_shared()) {
    MPIGAN_CHECK(out.size() == ch.down().size(), "pull_payload: {} floats for a slot of {}", out.size(),
                 ch.down().size());
    ch.sync();
    std::memcpy(out.data(), ch.down().data(), out.size_bytes());
    return;
  }
  links.recv(out, parent, kTagReplyPayload);
}

}  // namespace mpigan::dist
