// The exact state of a sandbox run (sandbox_loop.hpp): saved when the run stops by a signal
// or at its budget, between two events, and restored by `mpigan sandbox --resume`, so that the
// continued run computes what the uninterrupted one would have, bit for bit.
//
// Between events every virtual worker has its next update built (it computed it when its reply
// arrived) and waits in the event queue, and no synchronous round is open (the stop is noted in
// the event that made a version of the top master; in a tree no sub-master waits for the top then,
// unless its workers are done). So the state is: the clock and the queue; per worker its update
// in flight (payload, header), the weights it pulled and holds, its rules' and optimizers' state,
// its data position and counters; each master's service (weights, BatchNorm state, rules, each
// child's bookkeeping) and its logs' bookkeeping; a sub-master's link to the top (the weights it
// last took, the samples pushed). The session's model is not saved: each worker loads its own
// weights into it before it computes. Size: about three payloads per worker.
#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/master/checkpoints.hpp"
#include "mpigan/sandbox/sandbox_loop.hpp"
#include "mpigan/train/run_dir.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

namespace mpigan::sandbox {

std::string state_path(const std::string& run_dir) {
  return run_dir + "/sandbox-state.h5";
}

namespace detail {

namespace {

constexpr std::int64_t kFormat = 1;

std::vector<double> header_values(const dist::Header& h) {
  std::vector<double> v{static_cast<double>(h.kind),
                        static_cast<double>(h.child),
                        static_cast<double>(h.version),
                        static_cast<double>(h.samples),
                        static_cast<double>(h.steps),
                        static_cast<double>(h.epoch),
                        static_cast<double>(h.cursor),
                        static_cast<double>(h.flags),
                        static_cast<double>(h.n_losses),
                        static_cast<double>(h.checkpoint),
                        h.compute_s,
                        h.wait_s};
  v.insert(v.end(), h.sumsq.begin(), h.sumsq.end());
  v.insert(v.end(), h.state_decay.begin(), h.state_decay.end());
  v.insert(v.end(), h.losses.begin(), h.losses.end());
  return v;
}

/// header_values' length: 12 scalars, then sumsq, state_decay and losses.
constexpr std::size_t kHeaderValues = 12 + 3 + 2 + dist::kMaxLosses;
static_assert(std::tuple_size_v<decltype(dist::Header::sumsq)> == 3 &&
              std::tuple_size_v<decltype(dist::Header::state_decay)> == 2);

dist::Header header_from(const std::vector<double>& v) {
  dist::Header h;
  h.kind = static_cast<dist::Kind>(static_cast<int>(v[0]));
  h.child = static_cast<std::int32_t>(v[1]);
  h.version = static_cast<std::int64_t>(v[2]);
  h.samples = static_cast<std::int64_t>(v[3]);
  h.steps = static_cast<std::int64_t>(v[4]);
  h.epoch = static_cast<std::int64_t>(v[5]);
  h.cursor = static_cast<std::int64_t>(v[6]);
  h.flags = static_cast<std::int32_t>(v[7]);
  h.n_losses = static_cast<std::int32_t>(v[8]);
  h.checkpoint = static_cast<std::int64_t>(v[9]);
  h.compute_s = v[10];
  h.wait_s = v[11];
  auto it = v.begin() + 12;
  std::copy(it, it + 3, h.sumsq.begin());
  std::copy(it + 3, it + 5, h.state_decay.begin());
  std::copy(it + 5, v.end(), h.losses.begin());
  return h;
}

std::string worker_key(int id) {
  return fmt::format("worker/{}", id);
}

constexpr const char* kNetNames[2] = {"generator", "discriminator"};

void save_worker(train::CheckpointWriter& out, const VirtualWorker& w, Backend& backend) {
  const std::string key = worker_key(w.id);
  const auto pos = w.data->position();
  out.put(key + "/fields",
          std::vector<double>{static_cast<double>(w.version), static_cast<double>(w.steps),
                              static_cast<double>(w.exchanges), static_cast<double>(w.served), w.exhausted ? 1.0 : 0.0,
                              w.done ? 1.0 : 0.0, w.deferred ? 1.0 : 0.0, w.deferred_pull ? 1.0 : 0.0, w.deferred_at,
                              w.sent_at, static_cast<double>(w.top_base), static_cast<double>(pos.epoch),
                              static_cast<double>(pos.cursor), w.lr_factor});
  out.put(key + "/header", header_values(w.header));
  w.update->save_state(out, key);
  for (std::size_t k = 0; k < 2; ++k)
    if (w.opt[k]) train::save_optimizer(out, key + "/optimizer/" + kNetNames[k], *w.opt[k], backend);
}

void load_worker(const train::CheckpointReader& r, VirtualWorker& w, Backend& backend) {
  const std::string key = worker_key(w.id);
  // 14 fields; 13 in states written before the schedule's factor was kept (a factor of 1).
  auto f = r.doubles(key + "/fields");
  if (f.size() == 13) f.push_back(1.0);
  if (f.size() != 14) MPIGAN_THROW(DataError, "'{}': {}/fields holds {} values; 14 expected", r.path(), key, f.size());
  w.version = static_cast<std::int64_t>(f[0]);
  w.steps = static_cast<std::int64_t>(f[1]);
  w.exchanges = static_cast<std::int64_t>(f[2]);
  w.served = static_cast<std::int64_t>(f[3]);
  w.exhausted = f[4] != 0;
  w.done = f[5] != 0;
  w.deferred = f[6] != 0;
  w.deferred_pull = f[7] != 0;
  w.deferred_at = f[8];
  w.sent_at = f[9];
  w.top_base = static_cast<std::int64_t>(f[10]);
  w.data->seek({static_cast<std::int64_t>(f[11]), static_cast<std::int64_t>(f[12])});
  w.lr_factor = f[13];
  w.header = header_from(r.doubles(key + "/header", kHeaderValues));
  w.update->load_state(r, key);
  for (std::size_t k = 0; k < 2; ++k)
    if (w.opt[k])
      train::load_optimizer(r, key + "/optimizer/" + kNetNames[k], *w.opt[k], backend,
                            fmt::format("virtual worker {}'s {}", w.id, kNetNames[k]));
}

/// A branch: the logs and the best generator of run @p from continue in @p to.
void branch_logs(const std::string& from, const std::string& to) {
  namespace fs = std::filesystem;
  for (const char* name : {"updates.csv", "metrics.csv", "checkpoints/best.h5"}) {
    const fs::path src = fs::path(from) / name;
    if (fs::exists(src)) fs::copy_file(src, fs::path(to) / name, fs::copy_options::overwrite_existing);
  }
  spdlog::info("sandbox: a branch of {} continues in {}", from, to);
}

/// The options and experiment that must match for a continuation to be the same simulation.
struct Identity {
  std::string name, saved, now;
};

}  // namespace

void Sandbox::save_state() {
  const std::string path = state_path(m_dir);
  const VirtualMaster& t = *m_masters.front();
  train::CheckpointWriter out(path);
  out.put_int("sandbox/format", kFormat);
  out.put_int("sandbox/workers", m_options.workers);
  out.put_int("sandbox/masters", static_cast<std::int64_t>(m_masters.size()));
  out.put_string("sandbox/rule", m_job.dist.algorithm->name());
  out.put_string("sandbox/model", m_experiment.model.name);
  out.put_string("sandbox/compute", m_options.compute.spec());
  out.put("sandbox/clock",
          std::vector<double>{
              m_now, m_latest, static_cast<double>(m_seq), static_cast<double>(m_workers_done),
              static_cast<double>(m_deferred), t.free, m_options.network.bandwidth_bytes_per_s,
              m_options.network.latency_s, m_options.master_s, static_cast<double>(m_options.seed),
              m_wall_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - m_wall0).count(),
              m_result.master.last_val_d, m_result.master.last_val_g});
  std::vector<double> events;
  for (auto q = m_events; !q.empty(); q.pop()) {
    const Event& e = q.top();
    events.insert(events.end(), {e.t, static_cast<double>(e.seq), static_cast<double>(e.worker),
                                 static_cast<double>(static_cast<int>(e.kind))});
  }
  out.put("sandbox/events", events);
  t.service->save(out);
  t.service->save_exact(out, "service");
  t.progress->save_state(out, "progress_log");
  if (tree()) save_tree(out);
  for (const VirtualWorker& w : m_workers) save_worker(out, w, *m_session.backend);
  out.commit();  // a non-finite update in flight is kept as it is: the master will reject it, as before
  m_result.state_file = path;
  m_result.state_version = t.service->version();
  spdlog::info("sandbox: state saved to {} at version {}: `mpigan sandbox ... --resume` continues from it", path,
               t.service->version());
}

std::int64_t Sandbox::load_state() {
  const std::string from = m_options.resume_from.empty() ? m_dir : m_options.resume_from;
  const std::string path = state_path(from);
  if (!std::filesystem::exists(path))
    MPIGAN_THROW(ConfigError,
                 "sandbox --resume {}: no {} there (a sandbox run writes it when it stops by a signal or at its "
                 "budget)",
                 from, path);
  train::CheckpointReader r(path);
  MPIGAN_CHECK(r.get_int("sandbox/format") == kFormat, "{}: state format {}, this build reads {}", path,
               r.get_int("sandbox/format"), kFormat);
  // States saved before trees could be resumed have no entry: they are flat.
  const std::int64_t saved_masters = r.has("sandbox/masters") ? r.get_int("sandbox/masters") : 1;
  const std::vector<Identity> identity{
      {"--workers", std::to_string(r.get_int("sandbox/workers")), std::to_string(m_options.workers)},
      {"topology.masters", std::to_string(saved_masters), std::to_string(m_masters.size())},
      {"algorithm.name", r.get_string("sandbox/rule"), m_job.dist.algorithm->name()},
      {"model.name", r.get_string("sandbox/model"), m_experiment.model.name},
      {"--compute", r.get_string("sandbox/compute"), m_options.compute.spec()}};
  for (const Identity& k : identity)
    if (k.saved != k.now)
      MPIGAN_THROW(ConfigError, "sandbox --resume: {} was written with {} {}; this run has {}: resume with the same {}",
                   path, k.name, k.saved, k.now, k.name);
  const auto clock = r.doubles("sandbox/clock", 13);
  const std::vector<std::pair<const char*, double>> options{{"--bandwidth", m_options.network.bandwidth_bytes_per_s},
                                                            {"--latency", m_options.network.latency_s},
                                                            {"--master-ms", m_options.master_s},
                                                            {"--clock-seed", static_cast<double>(m_options.seed)}};
  for (std::size_t i = 0; i < options.size(); ++i)
    if (clock[6 + i] != options[i].second)
      MPIGAN_THROW(ConfigError, "sandbox --resume: {} was written with another {} ({} there, {} now)", path,
                   options[i].first, clock[6 + i], options[i].second);
  m_now = clock[0];
  m_latest = clock[1];
  m_seq = static_cast<std::uint64_t>(clock[2]);
  m_workers_done = static_cast<int>(clock[3]);
  m_deferred = static_cast<std::int64_t>(clock[4]);
  VirtualMaster& t = top();
  t.free = clock[5];
  m_wall_before = clock[10];
  m_result.master.last_val_d = clock[11];
  m_result.master.last_val_g = clock[12];
  const auto events = r.doubles("sandbox/events");
  MPIGAN_CHECK(events.size() % 4 == 0, "{}: sandbox/events holds {} values, not events of 4", path, events.size());
  for (std::size_t i = 0; i < events.size(); i += 4)
    m_events.push({events[i], static_cast<std::uint64_t>(events[i + 1]), static_cast<int>(events[i + 2]),
                   static_cast<Event::Kind>(static_cast<int>(events[i + 3]))});
  t.service->load(r, path);
  t.service->load_exact(r, "service");
  for (VirtualWorker& w : m_workers) load_worker(r, w, *m_session.backend);
  if (!std::filesystem::equivalent(from, m_dir)) branch_logs(from, m_dir);
  if (tree()) load_tree(r);
  const std::int64_t v = t.service->version();
  t.progress->open_logs(v);
  t.progress->load_state(r, "progress_log");
  spdlog::info("sandbox: resumed from {} at version {} ({} samples, simulated {:.1f} s)", path, v, t.service->samples(),
               m_latest);
  return v;
}

void Sandbox::save_tree(train::CheckpointWriter& out) const {
  for (std::size_t k = 1; k < m_masters.size(); ++k) {
    const VirtualMaster& sub = *m_masters[k];
    // Between events a sub-master waits for the top only when its workers are done.
    MPIGAN_CHECK((!sub.blocked || sub.done) && sub.waiting.empty(),
                 "sandbox: sub-master {} is waiting for the top master between events; its state cannot be saved",
                 sub.rank);
    const std::string key = fmt::format("master/{}/", sub.rank);
    sub.service->save(out, key);
    sub.service->save_exact(out, key + "service");
    sub.progress->save_state(out, key + "progress_log");
    sub.change->save_exact(out, key + "change");
    out.put(key + "fields", std::vector<double>{sub.free, static_cast<double>(sub.workers_done), sub.done ? 1.0 : 0.0,
                                                sub.blocked ? 1.0 : 0.0});
    out.put(key + "bases", std::span<const std::int64_t>(sub.bases));
  }
  out.put("sandbox/canonical", std::span<const std::int64_t>(m_canonical));
  out.put_int("sandbox/submasters_done", m_submasters_done);
}

void Sandbox::load_tree(const train::CheckpointReader& r) {
  for (std::size_t k = 1; k < m_masters.size(); ++k) {
    VirtualMaster& sub = *m_masters[k];
    const std::string key = fmt::format("master/{}/", sub.rank);
    sub.service->load(r, r.path(), key);
    sub.service->load_exact(r, key + "service");
    sub.progress->load_state(r, key + "progress_log");
    sub.change->load_exact(r, key + "change");
    const auto f = r.doubles(key + "fields", 4);
    sub.free = f[0];
    sub.workers_done = static_cast<int>(f[1]);
    sub.done = f[2] != 0;
    sub.blocked = f[3] != 0;
    sub.bases = r.int64s(key + "bases");
  }
  m_canonical = r.int64s("sandbox/canonical");
  m_submasters_done = static_cast<int>(r.get_int("sandbox/submasters_done"));
}

}  // namespace detail

}  // namespace mpigan::sandbox
