// A worker group's exchange with its master, and the group's gradient averaging (exchange.hpp).
#include "mpigan/worker/exchange.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/train/session.hpp"

#include <chrono>
#include <cstdlib>
#include <limits>

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
  GroupAverage(Backend& be, const dist::Topology& t) : m_be(be), m_t(t) {
    if (t.group_size <= 1) return;
    const char* force = std::getenv("MPIGAN_GROUP_REDUCE");
    const bool host_only = force && std::string(force) == "mpi";
    MPIGAN_CHECK(!force || host_only || std::string(force) == "auto",
                 "MPIGAN_GROUP_REDUCE='{}': expected 'auto' or 'mpi'", force);
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
    m_t.group_comm.allreduce_sum(x);
    const float inv = 1.0f / static_cast<float>(m_t.group_size);
    for (float& v : x) v *= inv;
  }

 private:
  Backend& m_be;
  const dist::Topology& m_t;
  std::unique_ptr<GroupReducer> m_device;
};

Exchanger::Exchanger(dist::RoleContext& ctx, WorkerProgress& progress)
    : m_ctx(ctx), m_progress(progress), m_mode(ctx.d.dist.algorithm->worker_mode()), m_host(make_backend("cpu")) {
  auto& s = ctx.session;
  const auto& e = ctx.d.experiment;
  const auto& layout = ctx.layout;
  m_payload.resize(layout.total());
  m_reply.resize(layout.total());
  m_local.resize(layout.g + layout.d);
  m_pulled.resize(layout.g + layout.d);
  const nn::Network* nets[2] = {&s.model->generator, &s.model->discriminator};
  const nn::OptimizerConfig* opts[2] = {&e.opt_generator, &e.opt_discriminator};
  const char* names[2] = {"generator", "discriminator"};
  for (Net n : kNets) {
    const std::size_t k = dist::index(n);
    m_rules[k] = ctx.d.dist.algorithm->make_worker({*m_host, nets[k]->weights(), *opts[k], 1, names[k]});
    m_acc[k] = ParameterSet::like(nets[k]->weights(), *s.backend);
  }
  m_group = std::make_unique<GroupAverage>(*s.backend, ctx.t);
  const auto& t = ctx.t;
  // Compute threads of this rank: a GPU worker's CPU side is one thread; `threads: 0` takes them all.
  const int threads = e.backend == "cuda" ? 1 : (e.threads > 0 ? e.threads : t.local_cpus);
  m_spin = dist::worker_spins(ctx.d.dist.topology.worker_wait, t.local_workers, threads, t.local_cpus);
  if (t.leader())
    spdlog::debug("waits for replies {} ({} workers x {} threads on {} CPUs of this node)",
                  m_spin ? "spinning" : "sleeping", t.local_workers, threads, t.local_cpus);
  m_fault = FaultPlan::from_environment();
}

Exchanger::~Exchanger() = default;

void Exchanger::begin_phase() {
  if (m_mode != algos::WorkerMode::gradients) return;
  for (auto& acc : m_acc) {
    Tensor a = acc.flat();
    m_ctx.session.backend->fill(a, 0.0f);
  }
}

void Exchanger::on_gradients(Net n) {
  auto& m = *m_ctx.session.model;
  nn::Network& net = n == Net::generator ? m.generator : m.discriminator;
  if (m_mode == algos::WorkerMode::gradients) {
    // Accumulate at fixed weights; averaged over the group once per exchange.
    Tensor a = m_acc[dist::index(n)].flat();
    m_ctx.session.backend->axpby(1.0f, net.grads().flat(), 1.0f, a);
    return;
  }
  // Local training: the replicas of a group must apply the same gradient.
  if (m_ctx.t.group_size > 1) {
    auto span = m_ctx.trace.span("allreduce", "comm");
    m_group->average(net.grads());
  }
  m_ctx.session.apply_local(n);
}

void Exchanger::build_payload() {
  auto& m = *m_ctx.session.model;
  auto& be = *m_ctx.session.backend;
  const auto& layout = m_ctx.layout;
  std::span<float> p(m_payload);
  const algos::Payload kind = m_ctx.d.dist.algorithm->payload();
  const nn::Network* nets[2] = {&m.generator, &m.discriminator};
  const bool grouped = m_ctx.t.group_size > 1;
  if (grouped && m_group->on_device()) {
    // Average on the devices before the copy out: the accumulated gradients (gradient payloads;
    // in local mode the replicas' weights are identical already) and the BN statistics.
    auto span = m_ctx.trace.span("allreduce", "comm");
    if (kind == algos::Payload::gradient)
      for (auto& acc : m_acc) m_group->average(acc);
    m_group->average(m.generator.state());
    m_group->average(m.discriminator.state());
  }
  for (Net n : kNets) {
    const std::size_t k = dist::index(n);
    const ParameterSet& src = kind == algos::Payload::gradient ? m_acc[k] : nets[k]->weights();
    train::copy_to_host(be, src, layout.block(n, p));
    train::copy_to_host(be, nets[k]->state(), layout.state_block(n, p));
  }
  if (kind == algos::Payload::delta)
    for (std::size_t i = 0; i < layout.g + layout.d; ++i) p[i] -= m_pulled[i];
  if (grouped && !m_group->on_device()) {
    // Gradients (gradient mode) and BN statistics are averaged over the group; in local mode the
    // replicas' weights are identical already, so averaging leaves them unchanged.
    auto span = m_ctx.trace.span("allreduce", "comm");
    m_group->average_host(p);
  }
  // Local weights on the host for the merge.
  for (Net n : kNets)
    train::copy_to_host(be, nets[dist::index(n)]->weights(), layout.block(n, std::span<float>(m_local)));
}

Header Exchanger::make_header(Kind kind, const UpdateInfo& info) const {
  Header h;
  h.kind = kind;
  h.child = m_ctx.t.child_id;
  h.version = m_progress.version;
  h.samples = info.samples * m_ctx.t.group_size;
  h.steps = m_progress.steps;
  h.epoch = info.position.epoch;
  h.cursor = info.position.cursor;
  h.compute_s = info.compute_s;
  h.wait_s = m_progress.last_wait;
  h.checkpoint = m_progress.checkpoint_written;
  const auto& l = info.losses;
  std::size_t n = 0;
  for (double x : {l.d_real, l.d_fake, l.g}) h.losses[n++] = x;
  for (const auto* hv : {&l.d_real_heads, &l.d_fake_heads, &l.g_heads})
    for (double x : *hv)
      if (n < dist::kMaxLosses) h.losses[n++] = x;
  h.n_losses = static_cast<std::int32_t>(n);
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
  if (m_fault.throws(m_ctx.t.group, m_progress.exchanges))
    MPIGAN_THROW(Error, "MPIGAN_FAULT: worker group {} fails at its exchange {} (an injected error)", m_ctx.t.group,
                 m_progress.exchanges);
  if (m_fault.nan_update(m_ctx.t.group, m_progress.exchanges)) {
    spdlog::warn("MPIGAN_FAULT: sending a NaN in update {}", m_progress.exchanges);
    m_payload[0] = std::numeric_limits<float>::quiet_NaN();
  }
  Header ctl;  // what the leader broadcasts to its group
  if (m_ctx.t.leader()) ctl = leader_exchange(info);
  return share_with_group(ctl);
}

Header Exchanger::leader_exchange(const UpdateInfo& info) {
  const auto& t = m_ctx.t;
  const auto& ch = m_ctx.channels;
  const auto& layout = m_ctx.layout;
  const auto t0 = Clock::now();
  std::span<float> p(m_payload), rep(m_reply);
  Header ctl;
  if (m_ctx.d.dist.algorithm->exchange() == algos::Exchange::pull_push) {
    {
      auto span = m_ctx.trace.span("pull", "comm");
      dist::send_header(t.links, make_header(Kind::pull, info), t.parent, dist::kTagHeader, ch.to_parent());
      ctl = dist::recv_header(t.links, t.parent, dist::kTagReply, reply_spin_s(info.compute_s), ch.from_parent());
      if (ctl.kind == Kind::weights) dist::pull_payload(t.links, ch, t.parent, rep);
    }
    if (ctl.kind == Kind::weights) {
      for (Net n : kNets) rule(n).before_send(layout.block(n, p), layout.block(n, std::span<const float>(rep)));
      auto span = m_ctx.trace.span("push", "comm");
      dist::push_payload(t.links, ch, make_header(Kind::update, info), t.parent, p, layout);
    }
  } else {
    for (Net n : kNets) rule(n).before_send(layout.block(n, p), {});
    {
      auto span = m_ctx.trace.span("push", "comm");
      dist::push_payload(t.links, ch, make_header(Kind::update, info), t.parent, p, layout);
    }
    auto span = m_ctx.trace.span("wait", "wait");
    ctl = dist::recv_header(t.links, t.parent, dist::kTagReply, reply_spin_s(info.compute_s), ch.from_parent());
    if (ctl.kind == Kind::weights) dist::pull_payload(t.links, ch, t.parent, rep);
  }
  m_progress.last_wait = seconds_since(t0);
  if (ctl.kind == Kind::weights) merge_reply(rep);
  return ctl;
}

void Exchanger::merge_reply(std::span<const float> reply) {
  const auto& layout = m_ctx.layout;
  std::span<float> local(m_local);
  for (Net n : kNets)
    rule(n).after_reply(layout.block(n, local), layout.block(n, reply),
                        layout.block(n, std::span<const float>(m_payload)));
  // The new weights and the canonical BN state go into the reply buffer for the group.
  std::copy(m_local.begin(), m_local.end(), m_reply.begin());
}

Header Exchanger::share_with_group(Header ctl) {
  if (m_ctx.t.group_size > 1) {
    auto span = m_ctx.trace.span("broadcast", "comm");
    m_ctx.t.group_comm.broadcast_bytes(&ctl, sizeof ctl, 0);
    if (ctl.kind == Kind::weights) m_ctx.t.group_comm.broadcast(m_reply, 0);
  }
  if (ctl.kind == Kind::weights) {
    load_weights();
    m_progress.version = ctl.version;
  }
  return ctl;
}

void Exchanger::load_weights() {
  auto& m = *m_ctx.session.model;
  auto& be = *m_ctx.session.backend;
  const auto& layout = m_ctx.layout;
  std::span<const float> rep(m_reply);
  nn::Network* nets[2] = {&m.generator, &m.discriminator};
  for (Net n : kNets) {
    train::copy_from_host(be, layout.block(n, rep), nets[dist::index(n)]->weights());
    train::copy_from_host(be, layout.state_block(n, rep), nets[dist::index(n)]->state());
  }
  std::copy(rep.begin(), rep.begin() + static_cast<std::ptrdiff_t>(layout.g + layout.d), m_pulled.begin());
}

void Exchanger::receive_initial() {
  const auto& t = m_ctx.t;
  Header h;
  if (t.leader()) {
    h = dist::recv_header(t.links, t.parent, dist::kTagReply, 0.0, m_ctx.channels.from_parent());
    MPIGAN_CHECK(h.kind == Kind::weights, "expected the initial weights from rank {}, got a '{}' message", t.parent,
                 dist::to_string(h.kind));
    dist::pull_payload(t.links, m_ctx.channels, t.parent, m_reply);
    // GEM-like rules keep the weights their first gradient is computed at.
    std::copy(m_reply.begin(), m_reply.begin() + static_cast<std::ptrdiff_t>(m_local.size()), m_local.begin());
  }
  h.flags = 0;  // no checkpoint on the initial weights
  share_with_group(h);
}

Header Exchanger::finish(const UpdateInfo& info) {
  const auto& t = m_ctx.t;
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
