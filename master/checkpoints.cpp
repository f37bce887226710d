// The top master's checkpoints and their commit (checkpoints.hpp).
#include "mpigan/master/checkpoints.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/dist/run_files.hpp"
#include "mpigan/train/run_dir.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

namespace mpigan::master {

namespace fs = std::filesystem;

Checkpoints::Checkpoints(dist::RoleContext& ctx, UpdateService& service) : m_ctx(ctx), m_service(service) {}

void save_canonical(train::CheckpointWriter& w, const UpdateService& service, const dist::DistExperiment& d) {
  service.save(w);
  w.put_int("progress/samples", service.samples());
  w.put_string("algorithm/name", d.dist.algorithm->name());
  w.put_string("experiment/name", d.experiment.name);
  w.put_string("experiment/model", d.experiment.model.name);
}

void Checkpoints::write(std::int64_t id, dist::MasterResult& result) {
  // virtual workers train nothing, the benchmark's stand-ins hold nothing: nothing to keep
  if (m_ctx.job.dist.virtual_compute || !m_ctx.job.dist.checkpoints) return;
  auto span = m_ctx.trace.span("checkpoint", "io");
  const auto& t = m_ctx.topology;
  const std::string path = dist::checkpoint_main_path(m_ctx.run_dir, id);
  train::CheckpointWriter w(path);
  save_canonical(w, m_service, m_ctx.job);
  w.put_int("topology/masters", t.masters);
  w.put_int("topology/groups", t.groups);
  w.put_int("topology/group_size", t.group_size);
  if (!w.first_non_finite().empty()) {
    // Never a checkpoint nothing could resume from: the canonical weights, BatchNorm state and the
    // rules' state must be finite (the service rejects non-finite updates, but state statistics
    // and optimizer slots can overflow).
    spdlog::error("checkpoint {} not written: {} not finite; 'latest' stays at the last finite checkpoint", path,
                  w.first_non_finite());
    return;
  }
  w.commit();
  m_pending = id;
  m_pending_path = path;
  result.last_checkpoint = path;
  spdlog::info("checkpoint {} written; 'latest' moves to it once every rank has written its part", path);
  try_commit();
}

std::vector<std::string> Checkpoints::expected_parts(std::int64_t id) const {
  std::vector<std::string> parts;
  for (int s = 1; s < m_ctx.topology.masters; ++s)
    parts.push_back(dist::checkpoint_part_path(m_ctx.run_dir, id, dist::submaster_part(s)));
  for (int g = 0; g < m_ctx.topology.groups; ++g)
    parts.push_back(dist::checkpoint_part_path(m_ctx.run_dir, id, dist::worker_part(g)));
  return parts;
}

bool Checkpoints::try_commit() {
  if (m_pending < 0 || m_pending_path.empty()) return false;
  for (const auto& p : expected_parts(m_pending))
    if (!fs::exists(p)) return false;
  train::RunDirectory run(m_ctx.run_dir, false);
  run.commit_checkpoint(m_pending_path, m_ctx.job.experiment.checkpoint_keep);
  // Parts of checkpoints no longer kept go too.
  for (const auto& e : fs::directory_iterator(m_ctx.run_dir + "/checkpoints")) {
    const std::string name = e.path().filename().string();
    const auto dot = name.find('.');
    if (!name.starts_with("step-") || dot == std::string::npos || name.ends_with(".tmp")) continue;
    const std::string main = name.substr(0, dot) + ".h5";
    if (name != main && !fs::exists(m_ctx.run_dir + "/checkpoints/" + main)) fs::remove(e.path());
  }
  spdlog::info("checkpoint {} complete (latest)", m_pending_path);
  m_pending = -1;
  return true;
}

void Checkpoints::finish() {
  m_ctx.topology.links.barrier();
  if (m_pending >= 0 && !try_commit())
    spdlog::warn("checkpoint {}: some ranks did not write their part; 'latest' stays at the previous checkpoint",
                 m_pending_path);
}

bool Checkpoints::write_part_for(int group, const dist::Header& last) {
  const std::string path = dist::checkpoint_part_path(m_ctx.run_dir, m_pending, dist::worker_part(group));
  if (fs::exists(path)) return false;
  train::CheckpointWriter w(path);
  w.put_int("progress/steps", last.steps);
  w.put_int("progress/epoch", last.epoch);
  w.put_int("progress/cursor", last.cursor);
  w.put_int("progress/version", last.version);
  w.put_int("progress/written_by_master", 1);
  w.commit();
  return true;
}

bool Checkpoints::wait_commit(double limit_s) {
  const double t0 = MPI_Wtime();
  while (m_pending >= 0) {
    if (try_commit()) return true;
    if (MPI_Wtime() - t0 >= limit_s) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void Checkpoints::load(std::int64_t id, dist::MasterResult& result) {
  const auto& t = m_ctx.topology;
  const std::string path = dist::checkpoint_main_path(m_ctx.run_dir, id);
  train::CheckpointReader r(path);
  const auto masters = r.get_int("topology/masters"), groups = r.get_int("topology/groups"),
             gs = r.get_int("topology/group_size");
  if (masters != t.masters || groups != t.groups || gs != t.group_size)
    MPIGAN_THROW(DataError,
                 "checkpoint '{}' was written by {} master(s) and {} group(s) of {}; this run has {}, {} and {}: "
                 "resume with the same topology",
                 path, masters, groups, gs, t.masters, t.groups, t.group_size);
  const std::string alg = r.get_string("algorithm/name");
  if (alg != m_ctx.job.dist.algorithm->name())
    MPIGAN_THROW(DataError, "checkpoint '{}' was written by update rule '{}', this run uses '{}'", path, alg,
                 m_ctx.job.dist.algorithm->name());
  m_service.load(r, path);
  m_service.set_samples(r.get_int("progress/samples"));
  result.samples = m_service.samples();
  spdlog::info("resumed from {} at version {}", path, m_service.version());
}

}  // namespace mpigan::master
