// A worker rank's compute loop (worker.hpp).
#include "mpigan/worker/worker.hpp"

#include "mpigan/core/log.hpp"
#include "mpigan/train/session.hpp"
#include "mpigan/train/sources.hpp"
#include "mpigan/worker/exchange.hpp"
#include "mpigan/worker/virtual_worker.hpp"
#include "mpigan/worker/worker_checkpoint.hpp"

#include <chrono>

namespace mpigan::worker {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

void run_worker(dist::RoleContext& ctx) {
  if (ctx.job.dist.virtual_compute) return run_virtual_worker(ctx);
  const auto& e = ctx.job.experiment;
  const auto& t = ctx.topology;
  const train::DataPlan plan = train::DataPlan::open(e, false);
  std::unique_ptr<data::BatchSource> source = plan.train(e.batch / t.group_size, t.shard, t.shards);
  data::BatchSource& loader = *source;
  WorkerProgress progress;
  Exchanger ex(ctx, progress);
  if (ctx.resume >= 0) load_worker_part(ctx, ctx.resume, ex, progress, loader);
  ex.receive_initial();

  auto& s = ctx.session;
  const auto on_gradients = [&](models::Net n) { ex.on_gradients(n); };
  double compute_total = 0, wait_total = 0;
  data::Batch batch;
  while (true) {
    // ---- compute phase: sync_every steps
    const auto t0 = Clock::now();
    UpdateInfo info;
    bool exhausted = false;
    ex.begin_phase();
    {
      auto span = ctx.trace.span("compute", "compute");
      for (std::int64_t k = 0; k < ctx.job.dist.sync_every; ++k) {
        if (!train::next_batch(loader, batch, e.epochs)) {
          exhausted = true;
          break;
        }
        info.losses = s.step->run(train::real_batch(batch), static_cast<std::uint64_t>(progress.steps), on_gradients);
        ++progress.steps;
        info.samples += batch.size();
      }
    }
    info.compute_s = std::chrono::duration<double>(Clock::now() - t0).count();
    info.position = loader.position();
    compute_total += info.compute_s;
    if (info.samples > 0) {
      const dist::Header ctl = ex.exchange(info);
      wait_total += progress.last_wait;
      if (ctl.flags & dist::kFlagCheckpoint) write_worker_part(ctx, ctl.checkpoint, ex, progress, loader);
      if (ctl.kind != dist::Kind::weights) break;  // the master said stop
      if (!exhausted) continue;
    }
    // Data exhausted: say so and wait for the stop (which may ask for the final checkpoint's part).
    const dist::Header stop = ex.finish(info);
    if (stop.flags & dist::kFlagCheckpoint) write_worker_part(ctx, stop.checkpoint, ex, progress, loader);
    break;
  }
  spdlog::debug("{} steps, {} exchanges, {:.1f} s computing, {:.1f} s waiting", progress.steps, progress.exchanges,
                compute_total, wait_total);
}

}  // namespace mpigan::worker
