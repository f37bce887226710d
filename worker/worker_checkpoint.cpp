// A worker group's checkpoint part (worker_checkpoint.hpp).
#include "mpigan/worker/worker_checkpoint.hpp"

#include "mpigan/core/log.hpp"
#include "mpigan/dist/run_files.hpp"
#include "mpigan/train/checkpoint.hpp"

#include <utility>

namespace mpigan::worker {

using models::Net;

namespace {

std::string part_path(const dist::RoleContext& ctx, std::int64_t id) {
  return dist::checkpoint_part_path(ctx.run_dir, id, dist::worker_part(ctx.topology.group));
}

/// The local optimizers by name (local mode only: gradient-mode workers keep none).
std::array<std::pair<const char*, nn::Optimizer*>, 2> optimizers(dist::RoleContext& ctx) {
  return {std::pair{"generator", ctx.session.opt_g.get()}, std::pair{"discriminator", ctx.session.opt_d.get()}};
}

const char* rule_key(Net n) {
  return n == Net::generator ? "rule/generator" : "rule/discriminator";
}

}  // namespace

void write_worker_part(dist::RoleContext& ctx, std::int64_t id, Exchanger& ex, WorkerProgress& progress,
                       const data::BatchSource& loader) {
  if (!ctx.topology.leader()) return;
  auto span = ctx.trace.span("checkpoint", "io");
  train::CheckpointWriter w(part_path(ctx, id));
  w.put_int("progress/steps", progress.steps);
  w.put_int("progress/epoch", loader.position().epoch);
  w.put_int("progress/cursor", loader.position().cursor);
  w.put_int("progress/version", progress.version);
  for (Net n : dist::kNets) ex.rule(n).save(w, rule_key(n));
  if (ex.mode() == algos::WorkerMode::local) {
    for (const auto& [name, opt] : optimizers(ctx))
      train::save_optimizer(w, std::string("optimizer/") + name, *opt, *ctx.session.backend);
  }
  if (!w.first_non_finite().empty()) {
    // A part nothing could resume from: not written, so this checkpoint never completes and
    // 'latest' stays at the last one whose every part is finite.
    spdlog::error("checkpoint part {} not written: {} not finite; 'latest' stays at the last complete checkpoint",
                  w.path(), w.first_non_finite());
    return;
  }
  w.commit();
  progress.checkpoint_written = id;
}

void load_worker_part(dist::RoleContext& ctx, std::int64_t id, Exchanger& ex, WorkerProgress& progress,
                      data::BatchSource& loader) {
  const std::string path = part_path(ctx, id);
  train::CheckpointReader r(path);
  progress.steps = r.get_int("progress/steps");
  loader.seek({r.get_int("progress/epoch"), r.get_int("progress/cursor")});
  if (r.has("progress/written_by_master")) {
    // This group hung when the checkpoint was taken; its master wrote the part from its last
    // request: the data position is kept, the rule's and optimizers' state start afresh.
    spdlog::warn("{}: written by the master for a hung group: its rule's worker state starts afresh", path);
    progress.checkpoint_written = id;
    return;
  }
  for (Net n : dist::kNets) ex.rule(n).load(r, rule_key(n));
  if (ex.mode() == algos::WorkerMode::local) {
    for (const auto& [name, opt] : optimizers(ctx))
      train::load_optimizer(r, std::string("optimizer/") + name, *opt, *ctx.session.backend, name);
  }
  progress.checkpoint_written = id;
  spdlog::debug("resumed from {} at step {}", path, progress.steps);
}

}  // namespace mpigan::worker
