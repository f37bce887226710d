// A worker group's exchange with its master, and the group's gradient averaging (exchange.hpp).
#include "mpigan/worker/exchange.hpp"

#include "mpigan/core/env.hpp"
#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/train/session.hpp"

#include <chrono>
#include <limits>
#include <thread>

namespace mpigan::worker {

using dist::Header;
using dist::Kind;
using dist::kNets;
using models::Net;

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}
}  // namespace

/// Averages over the ranks of a worker group: on the devices with the backend's group reducer
/// (NCCL on the cuda backend) when it has one, else on the host with an MPI allreduce.
class Exchanger::GroupAverage {
 public:
  GroupAverage(Backend& be, const dist::Topology& t) : m_be(be), m_topology(t) {
    if (t.group_size <= 1) return;
    static const EnvChoice<bool> kReducers[] = {
        {"auto", "on the devices where the backend has a group reducer, else on the host", false},
        {"mpi", "on the host with an MPI allreduce", true}};
    const bool host_only = env_choice("MPIGAN_GROUP_REDUCE", kReducers, false);
    // Every rank of a group uses the same backend (one experiment), so all take the same branch.
    if (host_only) return;
    m_device = be.make_group_reducer(t.group_rank, t.group_size, [&t](std::span<std::byte> id) {
      t.group_comm.broadcast_bytes(id.data(), id.size(), 0);
    });
    if (m_device) spdlog::info("group of {} averages on the devices ({} backend)", t.group_size, be.name());
  }
  bool on_device() const { return m_device != nullptr; }

  /// @p p becomes the mean over the group (in place, wherever it lives).
  void average(ParameterSet& p) {
    if (m_device) {
      Tensor f = p.flat();
      m_device->average(f);
      return;
    }
    std::vector<float> host(p.size());
    train::copy_to_host(m_be, p, host);
    average_host(host);
    train::copy_from_host(m_be, host, p);
  }
  /// A host buffer becomes the mean over the group.
  void average_host(std::span<float> x) const {
    m_topology.group_comm.allreduce_sum(x);
    const float inv = 1.0f / static_cast<float>(m_topology.group_size);
    for (float& v : x) v *= inv;
  }

 private:
  Backend& m_be;
  const dist::Topology& m_topology;
  std::unique_ptr<GroupReducer> m_device;
};

Exchanger::Exchanger(dist::RoleContext& ctx, WorkerProgress& progress)
    : m_ctx(ctx),
      m_progress(progress),
      m_update(*ctx.job.dist.algorithm, ctx.session, ctx.job.experiment, ctx.layout, ctx.topology.siblings) {
  const auto& e = ctx.job.experiment;
  m_group = std::make_unique<GroupAverage>(*ctx.session.backend, ctx.topology);
  const auto& t = ctx.topology;
  // Compute threads of this rank: a GPU worker's CPU side is one thread; `threads: 0` takes them all.
  const int threads = e.backend == "cuda" ? 1 : (e.threads > 0 ? e.threads : t.local_cpus);
  m_spin = dist::worker_spins(ctx.job.dist.topology.worker_wait, t.local_workers, threads, t.local_cpus);
  if (t.leader())
    spdlog::debug("waits for replies {} ({} workers x {} threads on {} CPUs of this node)",
                  m_spin ? "spinning" : "sleeping", t.local_workers, threads, t.local_cpus);
  m_fault = FaultPlan::from_environment();
}

Exchanger::~Exchanger() = default;

void Exchanger::begin_phase() {
  m_update.begin_phase();
}

void Exchanger::on_gradients(Net n) {
  if (mode() == algos::WorkerMode::gradients) {
    m_update.accumulate(n);  // at fixed weights; averaged over the group once per exchange
    return;
  }
  // Local training: the replicas of a group must apply the same gradient.
  auto& m = *m_ctx.session.model;
  nn::Network& net = n == Net::generator ? m.generator : m.discriminator;
  if (m_ctx.topology.group_size > 1) {
    auto span = m_ctx.trace.span("allreduce", "comm");
    m_group->average(net.grads());
  }
  m_ctx.session.apply_local(n);
}

void Exchanger::build_payload() {
  auto& m = *m_ctx.session.model;
  const bool grouped = m_ctx.topology.group_size > 1;
  if (grouped && m_group->on_device()) {
    // Average on the devices before the copy out: the accumulated gradients (gradient payloads;
    // in local mode the replicas' weights are identical already) and the BN statistics.
    auto span = m_ctx.trace.span("allreduce", "comm");
    if (m_update.payload_kind() == algos::Payload::gradient)
      for (Net n : kNets) m_group->average(m_update.accumulator(n));
    m_group->average(m.generator.state());
    m_group->average(m.discriminator.state());
  }
  const std::span<float> p = m_update.build();
  if (grouped && !m_group->on_device()) {
    // Gradients (gradient mode) and BN statistics are averaged over the group; in local mode the
    // replicas' weights are identical already, so averaging leaves them unchanged.
    auto span = m_ctx.trace.span("allreduce", "comm");
    m_group->average_host(p);
  }
}

Header Exchanger::make_header(Kind kind, const UpdateInfo& info) const {
  Header h;
  h.kind = kind;
  h.child = m_ctx.topology.child_id;
  h.version = m_progress.version;
  h.samples = info.samples * m_ctx.topology.group_size;
  h.steps = m_progress.steps;
  h.epoch = info.position.epoch;
  h.cursor = info.position.cursor;
  h.compute_s = info.compute_s;
  h.wait_s = m_progress.last_wait;
  h.checkpoint = m_progress.checkpoint_written;
  h.state_decay = m_update.state_decay();
  put_losses(h, info.losses);
  return h;
}

double Exchanger::reply_spin_s(double compute) const {
  // How long to poll for a reply before sleeping: a step's worth when spinning (a round's
  // straggler wait; a longer pause, a checkpoint or validation, then sleeps), else 2 ms.
  return m_spin ? std::max(dist::kReplySpinSeconds, compute) : dist::kReplySpinSeconds;
}

Header Exchanger::exchange(const UpdateInfo& info) {
  build_payload();
  ++m_progress.exchanges;
  if (const double ms = m_fault.pause_ms(m_ctx.topology.group); ms > 0)
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
  if (m_fault.throws(m_ctx.topology.group, m_progress.exchanges))
    MPIGAN_THROW(Error, "MPIGAN_FAULT: worker group {} fails at its exchange {} (an injected error)",
                 m_ctx.topology.group, m_progress.exchanges);
  if (m_fault.nan_update(m_ctx.topology.group, m_progress.exchanges)) {
    spdlog::warn("MPIGAN_FAULT: sending a NaN in update {}", m_progress.exchanges);
    m_update.payload()[0] = std::numeric_limits<float>::quiet_NaN();
  }
  Header ctl;  // what the leader broadcasts to its group
  if (m_ctx.topology.leader()) ctl = leader_exchange(info);
  return share_with_group(ctl);
}

Header Exchanger::leader_exchange(const UpdateInfo& info) {
  const auto& t = m_ctx.topology;
  const auto& ch = m_ctx.channels;
  const auto& layout = m_ctx.layout;
  const auto t0 = Clock::now();
  const std::span<float> p = m_update.payload(), rep = m_update.reply_buffer();
  Header ctl;
  if (m_ctx.job.dist.algorithm->exchange() == algos::Exchange::pull_push) {
    {
      auto span = m_ctx.trace.span("pull", "comm");
      dist::send_header(t.links, make_header(Kind::pull, info), t.parent, dist::kTagHeader, ch.to_parent());
      ctl = dist::recv_header(t.links, t.parent, dist::kTagReply, reply_spin_s(info.compute_s), ch.from_parent());
      if (ctl.kind == Kind::weights) dist::pull_payload(t.links, ch, t.parent, rep);
    }
    if (ctl.kind == Kind::weights) {
      m_update.before_send(rep);
      auto span = m_ctx.trace.span("push", "comm");
      dist::push_payload(t.links, ch, make_header(Kind::update, info), t.parent, p, layout);
    }
  } else {
    m_update.before_send({});
    {
      auto span = m_ctx.trace.span("push", "comm");
      dist::push_payload(t.links, ch, make_header(Kind::update, info), t.parent, p, layout);
    }
    auto span = m_ctx.trace.span("wait", "wait");
    ctl = dist::recv_header(t.links, t.parent, dist::kTagReply, reply_spin_s(info.compute_s), ch.from_parent());
    if (ctl.kind == Kind::weights) dist::pull_payload(t.links, ch, t.parent, rep);
  }
  m_progress.last_wait = seconds_since(t0);
  if (ctl.kind == Kind::weights) m_update.merge(rep);
  return ctl;
}

Header Exchanger::share_with_group(Header ctl) {
  if (m_ctx.topology.group_size > 1) {
    auto span = m_ctx.trace.span("broadcast", "comm");
    m_ctx.topology.group_comm.broadcast_bytes(&ctl, sizeof ctl, 0);
    if (ctl.kind == Kind::weights) m_ctx.topology.group_comm.broadcast(m_update.reply_buffer(), 0);
  }
  if (ctl.kind == Kind::weights) {
    m_update.load();
    m_progress.version = ctl.version;
    // The master's learning-rate schedule: the rule's rates, and in local mode the local optimizers'.
    const bool local = m_update.mode() == algos::WorkerMode::local;
    m_update.follow_schedule(
        ctl.lr_factor, {local ? m_ctx.session.opt_g.get() : nullptr, local ? m_ctx.session.opt_d.get() : nullptr});
  }
  return ctl;
}

void Exchanger::receive_initial() {
  const auto& t = m_ctx.topology;
  Header h;
  if (t.leader()) {
    h = dist::recv_header(t.links, t.parent, dist::kTagReply, 0.0, m_ctx.channels.from_parent());
    MPIGAN_CHECK(h.kind == Kind::weights, "expected the initial weights from rank {}, got a '{}' message", t.parent,
                 dist::to_string(h.kind));
    dist::pull_payload(t.links, m_ctx.channels, t.parent, m_update.reply_buffer());
    // GEM-like rules keep the weights their first gradient is computed at.
    m_update.set_local_from_reply();
  }
  h.flags = 0;  // no checkpoint on the initial weights
  share_with_group(h);
}

Header Exchanger::finish(const UpdateInfo& info) {
  const auto& t = m_ctx.topology;
  Header reply;
  reply.kind = Kind::stop;
  if (t.leader()) {
    dist::send_header(t.links, make_header(Kind::done, {0, {}, 0, info.position}), t.parent, dist::kTagHeader,
                      m_ctx.channels.to_parent());
    reply = dist::recv_header(t.links, t.parent, dist::kTagReply, 0.0, m_ctx.channels.from_parent());
    MPIGAN_CHECK(reply.kind == Kind::stop, "expected 'stop' from the master after 'done', got a '{}' message",
                 dist::to_string(reply.kind));
  }
  if (t.group_size > 1) {
    Header stop;
    stop.kind = Kind::stop;
    t.group_comm.broadcast_bytes(&stop, sizeof stop, 0);
  }
  return reply;
}

}  // namespace mpigan::worker
