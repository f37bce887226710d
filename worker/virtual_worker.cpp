// A virtual worker: drawn compute times and the real exchange (virtual_worker.hpp).
#include "mpigan/worker/virtual_worker.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"

#include <algorithm>
#include <chrono>
#include <span>
#include <thread>
#include <vector>

#ifdef MPIGAN_SMPI
#include <smpi/smpi.h>
#endif

namespace mpigan::worker {

using dist::Header;
using dist::Kind;

void inject_compute(double seconds) {
  if (seconds <= 0) return;
#ifdef MPIGAN_SMPI
  smpi_execute_benched(seconds);  // exactly `seconds` of simulated time on this rank's host
#else
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
#endif
}

namespace {

/// The payload of a virtual update, from the last reply: the rule's kind of update of both
/// networks (zeros, or the weights themselves), then the BatchNorm state as given.
void build_virtual_payload(algos::Payload kind, const dist::PayloadLayout& layout, std::span<const float> reply,
                           std::span<float> payload) {
  std::copy(reply.begin(), reply.end(), payload.begin());
  if (kind != algos::Payload::weights) {
    const auto w = layout.all_weights(payload);
    std::fill(w.begin(), w.end(), 0.0f);
  }
}

/// A virtual worker's payload or reply buffer. Under SMPI every virtual worker's buffer of one
/// kind is the same memory (smpi_shared_malloc): thousands of simulated ranks live in one process,
/// and what the buffers hold only has to be finite and of the real size.
class VirtualBuffer {
 public:
  VirtualBuffer(std::size_t floats, [[maybe_unused]] int kind) : m_size(floats) {
#ifdef MPIGAN_SMPI
    // One shared block per kind: the file and line name it.
    m_data = static_cast<float*>(smpi_shared_malloc(floats * sizeof(float), "mpigan-virtual-worker", kind));
    std::fill(m_data, m_data + floats, 0.0f);
#else
    m_own.assign(floats, 0.0f);
    m_data = m_own.data();
#endif
  }
  ~VirtualBuffer() {
#ifdef MPIGAN_SMPI
    smpi_shared_free(m_data);
#endif
  }
  VirtualBuffer(const VirtualBuffer&) = delete;
  VirtualBuffer& operator=(const VirtualBuffer&) = delete;
  std::span<float> span() {
    return {m_data, m_size};
  }

 private:
  std::size_t m_size;
  float* m_data = nullptr;
  std::vector<float> m_own;
};

}  // namespace

void run_virtual_worker(dist::RoleContext& ctx) {
  const auto& t = ctx.topology;
  const auto& ch = ctx.channels;
  const auto& layout = ctx.layout;
  const auto& alg = *ctx.job.dist.algorithm;
  const auto& model = *ctx.job.dist.virtual_compute;
  const auto& e = ctx.job.experiment;
  const std::int64_t steps_per_update = ctx.job.dist.sync_every;
  MPIGAN_CHECK(t.group_size == 1, "virtual workers are single ranks (group_size {})", t.group_size);
  VirtualBuffer payload_buffer(layout.total(), 1), reply_buffer(layout.total(), 2);
  const std::span<float> payload = payload_buffer.span(), reply = reply_buffer.span();

  Header h = dist::recv_header(t.links, t.parent, dist::kTagReply, 0.0, ch.from_parent());
  MPIGAN_CHECK(h.kind == Kind::weights, "expected the initial weights from rank {}, got a '{}' message", t.parent,
               dist::to_string(h.kind));
  dist::pull_payload(t.links, ch, t.parent, reply);
  std::int64_t version = h.version, steps = 0, updates = 0;
  double last_wait = 0;
  const bool pull_push = alg.exchange() == algos::Exchange::pull_push;
  while (true) {
    const double compute = model.draw(e.seed, t.group, updates, steps_per_update);
    {
      auto span = ctx.trace.span("compute", "compute");
      inject_compute(compute);
    }
    steps += steps_per_update;
    ++updates;
    Header u;
    u.child = t.child_id;
    u.version = version;
    u.samples = e.batch * steps_per_update;
    u.steps = steps;
    u.compute_s = compute;
    u.wait_s = last_wait;
    const double t0 = MPI_Wtime();
    Header ctl;
    if (pull_push) {
      u.kind = Kind::pull;
      dist::send_header(t.links, u, t.parent, dist::kTagHeader, ch.to_parent());
      ctl = dist::recv_header(t.links, t.parent, dist::kTagReply, dist::kReplySpinSeconds, ch.from_parent());
      if (ctl.kind == Kind::weights) {
        dist::pull_payload(t.links, ch, t.parent, reply);
        build_virtual_payload(alg.payload(), layout, reply, payload);
        u.kind = Kind::update;
        dist::push_payload(t.links, ch, u, t.parent, payload, layout);
      }
    } else {
      build_virtual_payload(alg.payload(), layout, reply, payload);
      u.kind = Kind::update;
      {
        auto span = ctx.trace.span("push", "comm");
        dist::push_payload(t.links, ch, u, t.parent, payload, layout);
      }
      {
        auto span = ctx.trace.span("wait", "wait");
        ctl = dist::recv_header(t.links, t.parent, dist::kTagReply, dist::kReplySpinSeconds, ch.from_parent());
      }
      auto span = ctx.trace.span("pull", "comm");
      if (ctl.kind == Kind::weights) dist::pull_payload(t.links, ch, t.parent, reply);
    }
    last_wait = MPI_Wtime() - t0;
    if (ctl.kind != Kind::weights) break;  // stop
    version = ctl.version;
  }
  spdlog::debug("virtual worker: {} updates of {} step(s)", updates, steps_per_update);
}

}  // namespace mpigan::worker
