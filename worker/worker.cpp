#include "mpigan/worker/worker.hpp"

#include "mpigan/core/backend.hpp"
#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/core/rng.hpp"
#include "mpigan/train/checkpoint.hpp"
#include "mpigan/train/session.hpp"
#include "mpigan/train/sources.hpp"
#include "mpigan/train/trainer.hpp"
#include "mpigan/worker/protocol.hpp"

#if MPIGAN_HAVE_CUDA
#include "mpigan/core/backend/cuda/cuda_backend.hpp"
#include "mpigan/core/backend/cuda/nccl_comm.hpp"
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace mpigan::worker {

std::string checkpoint_main_path(const std::string& run_dir, std::int64_t id) {
  return fmt::format("{}/checkpoints/step-{:08d}.h5", run_dir, id);
}

std::string checkpoint_part_path(const std::string& run_dir, std::int64_t id, const std::string& part) {
  return fmt::format("{}/checkpoints/step-{:08d}.{}.h5", run_dir, id, part);
}

namespace {

using Clock = std::chrono::steady_clock;

/// Fault injection for the distributed tests: MPIGAN_FAULT=nan_update@G:E makes worker group G
/// (`all`: every group) put a NaN in the update of its E-th exchange (1-based); `E+` in that and
/// every later one (a diverged run). The master must reject them and go on, or stop as diverged.
struct InjectedNan {
  int group = -2;  ///< -1: all groups; -2: none
  std::int64_t exchange = -1;
  bool onwards = false;
  bool hits(int g, std::int64_t e) const {
    return (group == -1 || group == g) && (onwards ? e >= exchange : e == exchange);
  }
};
InjectedNan injected_nan_update() {
  const char* f = std::getenv("MPIGAN_FAULT");
  InjectedNan r;
  if (!f) return r;
  int g = -1, used = 0;
  long long e = -1;
  if (std::sscanf(f, "nan_update@all:%lld%n", &e, &used) == 1)
    r.group = -1;
  else if (std::sscanf(f, "nan_update@%d:%lld%n", &g, &e, &used) == 2)
    r.group = g;
  else
    return r;
  r.exchange = e;
  r.onwards = f[used] == '+';
  return r;
}
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

/// Copy a (device) ParameterSet into a host span, or back.
void to_host(Backend& be, const ParameterSet& p, std::span<float> out) {
  const Tensor h = be.to_host(p.flat());
  std::copy(h.data(), h.data() + p.size(), out.begin());
}
void from_host(Backend& be, std::span<const float> in, ParameterSet& p) {
  Tensor flat = p.flat();
  be.from_host(Tensor::from(flat.shape(), in), flat);
}

/// Averages a worker group's device buffers GPU to GPU with NCCL when the ranks train on the cuda
/// backend (issue: one GPU per rank, batch parallelism inside a group); otherwise inactive, and the
/// worker averages on the host with MPI. MPIGAN_GROUP_REDUCE=mpi forces the host path.
class DeviceGroupReduce {
 public:
  DeviceGroupReduce(Backend& be, const Topology& t) : m_be(be), m_size(t.group_size) {
#if MPIGAN_HAVE_CUDA
    const char* force = std::getenv("MPIGAN_GROUP_REDUCE");
    const bool mpi_only = force && std::string(force) == "mpi";
    MPIGAN_CHECK(!force || mpi_only || std::string(force) == "auto",
                 "MPIGAN_GROUP_REDUCE='{}': expected 'auto' or 'mpi'", force);
    // Every rank of a group uses the same backend (one experiment), so all take the same branch.
    if (m_size > 1 && be.name() == "cuda" && !mpi_only) {
      NcclId id{};
      if (t.group_rank == 0) id = nccl_new_id();
      t.group_comm.broadcast_bytes(id.data(), id.size(), 0);
      m_nccl = std::make_unique<NcclComm>(id, t.group_rank, m_size, dynamic_cast<CudaBackend&>(be));
      spdlog::info("{}: group of {} averages on the GPUs with NCCL", t.label(), m_size);
    }
#else
    (void)t;
#endif
  }
  bool active() const {
#if MPIGAN_HAVE_CUDA
    return m_nccl != nullptr;
#else
    return false;
#endif
  }
  /// @p p becomes the mean over the group (in place, on the device). Only when active().
  void average(ParameterSet& p) {
#if MPIGAN_HAVE_CUDA
    Tensor f = p.flat();
    m_nccl->allreduce_sum(f);
    m_be.axpby(0.0f, f, 1.0f / static_cast<float>(m_size), f);
    m_nccl->check_async();
#else
    (void)p;
    MPIGAN_FATAL("DeviceGroupReduce::average without the cuda backend");
#endif
  }

 private:
  Backend& m_be;
  int m_size;
#if MPIGAN_HAVE_CUDA
  std::unique_ptr<NcclComm> m_nccl;
#endif
};

class Worker {
 public:
  Worker(const DistExperiment& d, Topology& t, const std::string& run_dir, Trace& trace, const PayloadChannels& channels)
      : m_d(d), m_e(d.experiment), m_t(t), m_run_dir(run_dir), m_trace(trace), m_ch(channels),
        m_session(train::Session::create(m_e, mix64(m_e.seed ^ mix64(0x3C0FFEEull + static_cast<std::uint64_t>(t.rank))),
                                         t.device_id)),
        m_host(make_backend("cpu")) {
    auto& m = *m_session.model;
    m_layout = {m.generator.weights().size(), m.discriminator.weights().size(), m.generator.state().size(),
                m.discriminator.state().size()};
    m_payload.resize(m_layout.total());
    m_reply.resize(m_layout.total());
    m_local.resize(m_layout.g + m_layout.d);
    m_pulled.resize(m_layout.g + m_layout.d);
    const algos::Algorithm& alg = *d.dist.algorithm;
    m_mode = alg.worker_mode();
    m_rule_g = alg.make_worker({*m_host, m.generator.weights(), m_e.opt_generator, 1, "generator"});
    m_rule_d = alg.make_worker({*m_host, m.discriminator.weights(), m_e.opt_discriminator, 1, "discriminator"});
    m_acc_g = ParameterSet::like(m.generator.weights(), *m_session.backend);
    m_acc_d = ParameterSet::like(m.discriminator.weights(), *m_session.backend);
    m_device_reduce = std::make_unique<DeviceGroupReduce>(*m_session.backend, t);
    // Compute threads of this rank: a GPU worker's CPU side is one thread; `threads: 0` takes them all.
    const int threads = m_e.backend == "cuda" ? 1 : (m_e.threads > 0 ? m_e.threads : t.local_cpus);
    m_spin = worker_spins(d.dist.topology.worker_wait, t.local_workers, threads, t.local_cpus);
    if (t.leader())
      spdlog::debug("{}: waits for replies {} ({} workers x {} threads on {} CPUs of this node)", t.label(),
                    m_spin ? "spinning" : "sleeping", t.local_workers, threads, t.local_cpus);
  }

  WorkerResult run(std::int64_t resume_checkpoint) {
    const train::DataPlan plan = train::DataPlan::open(m_e, false);
    std::unique_ptr<data::BatchSource> source = plan.train(m_e.batch / m_t.group_size, m_t.shard, m_t.shards);
    data::BatchSource& loader = *source;
    if (resume_checkpoint >= 0) load_part(resume_checkpoint, loader);

    receive_initial_weights();
    WorkerResult r;
    data::Batch batch;
    auto& s = m_session;
    const auto apply = [&](models::Net n) { on_gradients(n); };
    bool exhausted = false;
    while (true) {
      // ---- compute phase: sync_every steps
      const auto t0 = Clock::now();
      std::int64_t samples = 0;
      models::StepLosses last;
      zero_accumulators();
      {
        auto span = m_trace.span("compute", "compute");
        for (std::int64_t k = 0; k < m_d.dist.sync_every; ++k) {
          if (!next_batch(loader, batch)) {
            exhausted = true;
            break;
          }
          last = s.step->run(train::real_batch(batch), static_cast<std::uint64_t>(m_steps), apply);
          ++m_steps;
          samples += batch.size();
        }
      }
      const double compute = seconds_since(t0);
      r.compute_s += compute;
      if (samples == 0) {
        // Data exhausted: say so and wait for the stop.
        if (m_t.leader()) send_done(loader);
        group_wait_stop();
        break;
      }
      r.samples += samples * m_t.group_size;
      const bool go_on = exchange(samples, last, compute, loader, r);
      ++r.exchanges;
      if (!go_on) break;
      if (exhausted) {
        if (m_t.leader()) send_done(loader);
        group_wait_stop();
        break;
      }
    }
    r.steps = m_steps;
    return r;
  }

 private:
  bool next_batch(data::BatchSource& loader, data::Batch& b) {
    while (true) {
      if (loader.next(b)) return true;
      if (loader.position().epoch >= m_e.epochs) return false;  // all epochs done
    }
  }

  void zero_accumulators() {
    if (m_mode != algos::WorkerMode::gradients) return;
    Tensor g = m_acc_g.flat(), d = m_acc_d.flat();
    m_session.backend->fill(g, 0.0f);
    m_session.backend->fill(d, 0.0f);
  }

  /// After each gradient computation of the GAN step.
  void on_gradients(models::Net n) {
    auto& m = *m_session.model;
    nn::Network& net = n == models::Net::generator ? m.generator : m.discriminator;
    if (m_mode == algos::WorkerMode::gradients) {
      // Accumulate at fixed weights; averaged over the group once per exchange.
      ParameterSet& acc = n == models::Net::generator ? m_acc_g : m_acc_d;
      Tensor a = acc.flat();
      m_session.backend->axpby(1.0f, net.grads().flat(), 1.0f, a);
      return;
    }
    // Local training: the replicas of a group must apply the same gradient.
    if (m_t.group_size > 1) group_average(net.grads());
    m_session.apply_local(n);
  }

  void group_average(ParameterSet& p) {
    auto span = m_trace.span("allreduce", "comm");
    if (m_device_reduce->active()) {
      m_device_reduce->average(p);
      return;
    }
    std::vector<float> host(p.size());
    to_host(*m_session.backend, p, host);
    m_t.group_comm.allreduce_sum(host);
    const float inv = 1.0f / static_cast<float>(m_t.group_size);
    for (float& x : host) x *= inv;
    from_host(*m_session.backend, host, p);
  }

  /// Fills m_payload with this worker's update (per the rule's payload kind) and BN state.
  void build_payload() {
    auto& m = *m_session.model;
    auto& be = *m_session.backend;
    std::span<float> p(m_payload);
    const algos::Payload kind = m_d.dist.algorithm->payload();
    const bool on_device = m_t.group_size > 1 && m_device_reduce->active();
    if (on_device) {
      // Average on the GPUs before the copy out: the accumulated gradients (gradient payloads;
      // in local mode the replicas' weights are identical already) and the BN statistics.
      auto span = m_trace.span("allreduce", "comm");
      if (kind == algos::Payload::gradient) {
        m_device_reduce->average(m_acc_g);
        m_device_reduce->average(m_acc_d);
      }
      m_device_reduce->average(m.generator.state());
      m_device_reduce->average(m.discriminator.state());
    }
    if (kind == algos::Payload::gradient) {
      to_host(be, m_acc_g, m_layout.gen(p));
      to_host(be, m_acc_d, m_layout.dis(p));
    } else {
      to_host(be, m.generator.weights(), m_layout.gen(p));
      to_host(be, m.discriminator.weights(), m_layout.dis(p));
      if (kind == algos::Payload::delta)
        for (std::size_t i = 0; i < m_layout.g + m_layout.d; ++i) p[i] -= m_pulled[i];
    }
    to_host(be, m.generator.state(), m_layout.gen_state(p));
    to_host(be, m.discriminator.state(), m_layout.dis_state(p));
    if (m_t.group_size > 1 && !on_device) {
      // Gradients (gradient mode) and BN statistics are averaged over the group; in local mode the
      // replicas' weights are identical already, so averaging leaves them unchanged.
      auto span = m_trace.span("allreduce", "comm");
      m_t.group_comm.allreduce_sum(p);
      const float inv = 1.0f / static_cast<float>(m_t.group_size);
      for (float& x : p) x *= inv;
    }
    // Local weights on the host for the merge.
    to_host(be, m.generator.weights(), std::span<float>(m_local).subspan(0, m_layout.g));
    to_host(be, m.discriminator.weights(), std::span<float>(m_local).subspan(m_layout.g, m_layout.d));
  }

  Header make_header(Kind kind, std::int64_t samples, const models::StepLosses& l, double compute,
                     const data::BatchSource& loader) const {
    Header h;
    h.kind = kind;
    h.child = m_t.child_id;
    h.version = m_version;
    h.samples = samples * m_t.group_size;
    h.steps = m_steps;
    h.epoch = loader.position().epoch;
    h.cursor = loader.position().cursor;
    h.compute_s = compute;
    h.wait_s = m_last_wait;
    h.checkpoint = m_checkpoint_written;
    const std::vector<double> v = {l.d_real, l.d_fake, l.g};
    std::size_t n = 0;
    for (double x : v) h.losses[n++] = x;
    for (const auto* hv : {&l.d_real_heads, &l.d_fake_heads, &l.g_heads})
      for (double x : *hv)
        if (n < kMaxLosses) h.losses[n++] = x;
    h.n_losses = static_cast<std::int32_t>(n);
    return h;
  }

  /// How long to poll for a reply before sleeping: a step's worth when spinning (a round's
  /// straggler wait; a longer pause, a checkpoint or validation, then sleeps), else 2 ms.
  double reply_spin_s(double compute) const { return m_spin ? std::max(kReplySpinSeconds, compute) : kReplySpinSeconds; }

  /// One exchange; returns false when the master says stop.
  bool exchange(std::int64_t samples, const models::StepLosses& last, double compute, const data::BatchSource& loader,
                WorkerResult& r) {
    build_payload();
    const auto fault = injected_nan_update();
    if (fault.hits(m_t.group, r.exchanges + 1)) {
      spdlog::warn("{}: MPIGAN_FAULT: sending a NaN in update {}", m_t.label(), r.exchanges + 1);
      m_payload[0] = std::numeric_limits<float>::quiet_NaN();
    }
    Header ctl;  // what the leader broadcasts to its group
    if (m_t.leader()) {
      const Comm& c = m_t.links;
      const auto t0 = Clock::now();
      std::span<float> p(m_payload), rep(m_reply);
      if (m_d.dist.algorithm->exchange() == algos::Exchange::pull_push) {
        {
          auto span = m_trace.span("pull", "comm");
          send_header(c, make_header(Kind::pull, samples, last, compute, loader), m_t.parent, kTagHeader, m_ch.to_parent());
          ctl = recv_header(c, m_t.parent, kTagReply, reply_spin_s(compute), m_ch.from_parent());
          if (ctl.kind == Kind::weights) pull_payload(c, m_ch, m_t.parent, rep);
        }
        if (ctl.kind == Kind::weights) {
          m_rule_g->before_send(m_layout.gen(p), m_layout.gen(std::span<const float>(rep)));
          m_rule_d->before_send(m_layout.dis(p), m_layout.dis(std::span<const float>(rep)));
          auto span = m_trace.span("push", "comm");
          push_payload(c, m_ch, make_header(Kind::update, samples, last, compute, loader), m_t.parent, p, m_layout);
        }
      } else {
        m_rule_g->before_send(m_layout.gen(p), {});
        m_rule_d->before_send(m_layout.dis(p), {});
        {
          auto span = m_trace.span("push", "comm");
          push_payload(c, m_ch, make_header(Kind::update, samples, last, compute, loader), m_t.parent, p, m_layout);
        }
        auto span = m_trace.span("wait", "wait");
        ctl = recv_header(c, m_t.parent, kTagReply, reply_spin_s(compute), m_ch.from_parent());
        if (ctl.kind == Kind::weights) pull_payload(c, m_ch, m_t.parent, rep);
      }
      m_last_wait = seconds_since(t0);
      r.wait_s += m_last_wait;
      if (ctl.kind == Kind::weights) {
        std::span<float> local(m_local);
        m_rule_g->after_reply(local.subspan(0, m_layout.g), m_layout.gen(std::span<const float>(rep)), m_layout.gen(p));
        m_rule_d->after_reply(local.subspan(m_layout.g, m_layout.d), m_layout.dis(std::span<const float>(rep)),
                              m_layout.dis(p));
        // The new weights and the canonical BN state go into the reply buffer for the group.
        std::copy(m_local.begin(), m_local.end(), m_reply.begin());
      }
    }
    return apply_reply(ctl, loader);
  }

  /// Leader -> group: the control header and (unless stopping) the new weights and BN state.
  bool apply_reply(Header ctl, const data::BatchSource& loader) {
    if (m_t.group_size > 1) {
      auto span = m_trace.span("broadcast", "comm");
      m_t.group_comm.broadcast_bytes(&ctl, sizeof ctl, 0);
      if (ctl.kind == Kind::weights) m_t.group_comm.broadcast(m_reply, 0);
    }
    if (ctl.kind != Kind::weights) {
      if (ctl.flags & kFlagCheckpoint) write_part(ctl.checkpoint, loader);  // the final checkpoint
      return false;
    }
    auto& m = *m_session.model;
    auto& be = *m_session.backend;
    std::span<const float> rep(m_reply);
    from_host(be, rep.subspan(0, m_layout.g), m.generator.weights());
    from_host(be, rep.subspan(m_layout.g, m_layout.d), m.discriminator.weights());
    from_host(be, m_layout.gen_state(rep), m.generator.state());
    from_host(be, m_layout.dis_state(rep), m.discriminator.state());
    std::copy(rep.begin(), rep.begin() + static_cast<std::ptrdiff_t>(m_layout.g + m_layout.d), m_pulled.begin());
    m_version = ctl.version;
    if (ctl.flags & kFlagCheckpoint) write_part(ctl.checkpoint, loader);
    return true;
  }

  void receive_initial_weights() {
    Header h;
    if (m_t.leader()) {
      h = recv_header(m_t.links, m_t.parent, kTagReply, 0.0, m_ch.from_parent());
      MPIGAN_CHECK(h.kind == Kind::weights, "{}: expected the initial weights from rank {}, got message kind {}",
                   m_t.label(), m_t.parent, static_cast<int>(h.kind));
      pull_payload(m_t.links, m_ch, m_t.parent, m_reply);
      // GEM-like rules keep the weights their first gradient is computed at.
      for (std::size_t i = 0; i < m_layout.g + m_layout.d; ++i) m_local[i] = m_reply[i];
    }
    h.flags = 0;  // no checkpoint on the initial weights
    if (m_t.group_size > 1) {
      m_t.group_comm.broadcast_bytes(&h, sizeof h, 0);
      m_t.group_comm.broadcast(m_reply, 0);
    }
    auto& m = *m_session.model;
    auto& be = *m_session.backend;
    std::span<const float> rep(m_reply);
    from_host(be, rep.subspan(0, m_layout.g), m.generator.weights());
    from_host(be, rep.subspan(m_layout.g, m_layout.d), m.discriminator.weights());
    from_host(be, m_layout.gen_state(rep), m.generator.state());
    from_host(be, m_layout.dis_state(rep), m.discriminator.state());
    std::copy(rep.begin(), rep.begin() + static_cast<std::ptrdiff_t>(m_layout.g + m_layout.d), m_pulled.begin());
    m_version = h.version;
  }

  void send_done(const data::BatchSource& loader) {
    Header h = make_header(Kind::done, 0, {}, 0, loader);
    send_header(m_t.links, h, m_t.parent, kTagHeader, m_ch.to_parent());
    const Header reply = recv_header(m_t.links, m_t.parent, kTagReply, 0.0, m_ch.from_parent());
    MPIGAN_CHECK(reply.kind == Kind::stop, "{}: expected stop after done, got message kind {}", m_t.label(),
                 static_cast<int>(reply.kind));
    if (reply.flags & kFlagCheckpoint) write_part(reply.checkpoint, loader);
  }

  void group_wait_stop() {
    if (m_t.group_size > 1) {
      Header h;
      h.kind = Kind::stop;
      m_t.group_comm.broadcast_bytes(&h, sizeof h, 0);
    }
  }

  std::string part_name() const { return fmt::format("worker-{}", m_t.group); }

  void write_part(std::int64_t id, const data::BatchSource& loader) {
    if (!m_t.leader()) return;
    auto span = m_trace.span("checkpoint", "io");
    train::CheckpointWriter w(checkpoint_part_path(m_run_dir, id, part_name()));
    w.put_int("progress/steps", m_steps);
    w.put_int("progress/epoch", loader.position().epoch);
    w.put_int("progress/cursor", loader.position().cursor);
    w.put_int("progress/version", m_version);
    m_rule_g->save(w, "rule/generator");
    m_rule_d->save(w, "rule/discriminator");
    if (m_mode == algos::WorkerMode::local) {
      for (const auto& [name, opt] : {std::pair{"generator", m_session.opt_g.get()}, std::pair{"discriminator", m_session.opt_d.get()}}) {
        w.put_int(std::string("optimizer/") + name + "/iterations", opt->iterations());
        for (const auto& [slot, p] : opt->slots())
          train::save_parameters(w, std::string("optimizer/") + name + "/" + slot, *p, *m_session.backend);
      }
    }
    w.commit();
    m_checkpoint_written = id;
  }

  void load_part(std::int64_t id, data::BatchSource& loader) {
    const std::string path = checkpoint_part_path(m_run_dir, id, part_name());
    train::CheckpointReader r(path);
    m_steps = r.get_int("progress/steps");
    loader.seek({r.get_int("progress/epoch"), r.get_int("progress/cursor")});
    m_rule_g->load(r, "rule/generator");
    m_rule_d->load(r, "rule/discriminator");
    if (m_mode == algos::WorkerMode::local) {
      for (const auto& [name, opt] : {std::pair{"generator", m_session.opt_g.get()}, std::pair{"discriminator", m_session.opt_d.get()}}) {
        opt->set_iterations(r.get_int(std::string("optimizer/") + name + "/iterations"));
        for (const auto& [slot, p] : opt->slots())
          train::load_parameters(r, std::string("optimizer/") + name + "/" + slot, *p, *m_session.backend);
      }
    }
    m_checkpoint_written = id;
    spdlog::debug("{}: resumed from {} at step {}", m_t.label(), path, m_steps);
  }

  const DistExperiment& m_d;
  const train::ExperimentConfig& m_e;
  Topology& m_t;
  std::string m_run_dir;
  Trace& m_trace;
  const PayloadChannels& m_ch;  ///< shared-memory slots towards the master (leaders on its node)
  train::Session m_session;
  std::unique_ptr<Backend> m_host;
  PayloadLayout m_layout;
  algos::WorkerMode m_mode;
  std::unique_ptr<algos::WorkerRule> m_rule_g, m_rule_d;
  ParameterSet m_acc_g, m_acc_d;
  std::unique_ptr<DeviceGroupReduce> m_device_reduce;
  std::vector<float> m_payload, m_reply, m_local, m_pulled;
  std::int64_t m_version = 0, m_steps = 0, m_checkpoint_written = -1;
  double m_last_wait = 0;
  bool m_spin = false;  ///< topology.worker_wait resolved for this rank
};

}  // namespace

WorkerResult run_worker(const DistExperiment& d, Topology& t, const std::string& run_dir, std::int64_t resume_checkpoint,
                        Trace& trace, const PayloadChannels& channels) {
  Worker w(d, t, run_dir, trace, channels);
  return w.run(resume_checkpoint);
}

}  // namespace mpigan::worker
