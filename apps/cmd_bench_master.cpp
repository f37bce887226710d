// `mpigan bench master` (under mpiexec -n K+1): how many updates per second one master absorbs for
// parameter sets of a real model, against the memory-copy bound. Rank 0 runs the real master
// (update rule, BatchNorm-state averaging, per-update log); ranks 1..K are stand-in workers that
// skip the training step and send a fixed random update as fast as the master answers, following
// the real protocol (payloads through shared memory, as in runs, or --transport mpi). The last
// line, updates_per_s, is the master's capacity: updates per second of its busy time (time not
// spent waiting for a request), what it sustains when requests are always queued. With one
// stand-in the round trip also contains the stand-in's turn-around (round_trip_updates_per_s).
// The copy bound is the rate of copying the payload twice (in and out) with memcpy.
#include "commands.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/core/mpi/comm.hpp"
#include "mpigan/core/rng.hpp"
#include "mpigan/dist/launch.hpp"
#include "mpigan/dist/protocol.hpp"
#include "mpigan/master/server.hpp"
#include "mpigan/models/gan_model.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace mpigan::apps {
namespace {

struct BenchMasterOptions {
  std::string model = "3dgan-25";
  std::string rule = "downpour";
  std::int64_t updates = 200;
  std::string transport = "shm";  ///< shm: shared-memory payload slots (the default of runs); mpi: messages
};

void stand_in_worker(const dist::Topology& t, const dist::PayloadLayout& layout, bool pull_push,
                     const dist::PayloadChannels& ch) {
  using namespace dist;
  std::vector<float> payload(layout.total()), reply(layout.total());
  Rng rng(static_cast<std::uint64_t>(t.rank));
  rng.fill_uniform(payload, -1e-3f, 1e-3f);
  Header h = recv_header(t.links, t.parent, kTagReply, kReplySpinSeconds, ch.from_parent());
  pull_payload(t.links, ch, t.parent, reply);
  Header u;
  u.child = t.child_id;
  u.samples = 1;
  while (true) {
    u.version = h.version;
    if (pull_push) {
      u.kind = Kind::pull;
      send_header(t.links, u, t.parent, kTagHeader, ch.to_parent());
      h = recv_header(t.links, t.parent, kTagReply, kReplySpinSeconds, ch.from_parent());
      if (h.kind != Kind::weights) break;
      pull_payload(t.links, ch, t.parent, reply);
      u.kind = Kind::update;
      push_payload(t.links, ch, u, t.parent, payload, layout);
      continue;
    }
    u.kind = Kind::update;
    push_payload(t.links, ch, u, t.parent, payload, layout);
    h = recv_header(t.links, t.parent, kTagReply, kReplySpinSeconds, ch.from_parent());
    if (h.kind != Kind::weights) break;
    pull_payload(t.links, ch, t.parent, reply);
  }
}

/// Updates/s if the master only copied each update in and the reply out with memcpy (two
/// copies of the payload per update, buffers warm in cache): the memory-copy bound.
double copy_bound(std::size_t floats) {
  std::vector<float> a(floats, 1.0f), b(floats);
  using clock = std::chrono::steady_clock;
  std::memcpy(b.data(), a.data(), floats * sizeof(float));  // warm
  // The best of 8 batches: a bound, so the machine's quietest moment counts.
  const int reps = 50;
  double per_copy = 1e30;
  for (int batch = 0; batch < 8; ++batch) {
    const auto t0 = clock::now();
    for (int i = 0; i < reps; ++i) {
      a[static_cast<std::size_t>(i) % floats] = static_cast<float>(i);
      std::memcpy(b.data(), a.data(), floats * sizeof(float));
    }
    per_copy = std::min(per_copy, std::chrono::duration<double>(clock::now() - t0).count() / reps);
  }
  return 1.0 / (2.0 * per_copy);
}

/// Updates/s if a downpour master did nothing but its arithmetic on the canonical weights: an
/// RMSprop step writing the reply in the same pass (read gradient, weights and mean square; write
/// weights, mean square and the reply), on one thread, buffers warm. (The update's norm comes
/// with its header: the sender computes it.) With the copy bound this splits the master's time
/// between arithmetic and transport.
double arithmetic_bound(std::size_t floats) {
  auto be = make_backend("cpu");
  const auto n = static_cast<std::int64_t>(floats);
  Tensor w = Tensor::zeros(Shape{n}), g = Tensor::zeros(Shape{n}), ms = Tensor::zeros(Shape{n});
  Tensor reply = Tensor::zeros(Shape{n});
  Rng rng(7);
  rng.fill_uniform(std::span<float>(g.data(), floats), -1e-3f, 1e-3f);
  const RmspropStep step{.lr = 1e-3f, .rho = 0.9f, .epsilon = 1e-7f, .mirror = &reply};
  double sink = 0;
  auto once = [&] {
    be->rmsprop_update(w, g, ms, step);
    sink += reply.data()[static_cast<std::size_t>(n) / 2];
  };
  using clock = std::chrono::steady_clock;
  once();
  const int reps = 25;
  double per = 1e30;
  for (int batch = 0; batch < 8; ++batch) {  // the best batch, as for the copy bound
    const auto t0 = clock::now();
    for (int i = 0; i < reps; ++i) once();
    per = std::min(per, std::chrono::duration<double>(clock::now() - t0).count() / reps);
  }
  MPIGAN_CHECK(std::isfinite(sink), "bench master: non-finite weights in the arithmetic bound");
  return 1.0 / per;
}

/// Round trips/s of one payload each way between ranks 0 and 1 with blocking MPI_Send/MPI_Recv:
/// the transport bound (what MPI itself can move per update on this machine, no master work).
double transport_bound(const Comm& world, std::size_t floats) {
  std::vector<float> buf(floats, 1.0f);
  const int n = static_cast<int>(floats), reps = 100, warm = 10;
  MPI_Comm c = world.get();
  double t0 = 0;
  for (int i = 0; i < warm + reps; ++i) {
    if (i == warm) t0 = MPI_Wtime();
    if (world.rank() == 0) {
      MPIGAN_MPI_CHECK(MPI_Recv(buf.data(), n, MPI_FLOAT, 1, 901, c, MPI_STATUS_IGNORE));
      MPIGAN_MPI_CHECK(MPI_Send(buf.data(), n, MPI_FLOAT, 1, 902, c));
    } else if (world.rank() == 1) {
      MPIGAN_MPI_CHECK(MPI_Send(buf.data(), n, MPI_FLOAT, 0, 901, c));
      MPIGAN_MPI_CHECK(MPI_Recv(buf.data(), n, MPI_FLOAT, 0, 902, c, MPI_STATUS_IGNORE));
    }
  }
  const double rate = reps / (MPI_Wtime() - t0);
  world.barrier();
  return rate;
}

void bench_master(const BenchMasterOptions& o) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  const Comm world = Comm::world();
  MPIGAN_CHECK(world.size() >= 2, "bench master: run under mpiexec with at least 2 ranks (1 master + workers)");
  dist::DistExperiment d;
  d.experiment.name = "bench-master";
  d.experiment.model.name = o.model;
  d.experiment.max_updates = o.updates;
  d.experiment.validate = false;
  d.experiment.log_level = "warn";
  d.experiment.log_every = 1 << 30;
  d.experiment.data.train_files = {"(not read)"};
  d.dist.checkpoints = false;
  {
    ConfigDocument doc = ConfigDocument::parse(fmt::format("algorithm: {{name: {}}}", o.rule), "bench");
    ConfigNode root = doc.root();
    ConfigNode alg = root.section("algorithm");
    d.dist.algorithm = algos::make_algorithm(alg);
    doc.finish();
  }
  dist::Topology t = dist::Topology::build(world, d.dist.topology);
  set_process_label(t.label());
  init_logging("warn");
  const std::string dir = (std::filesystem::temp_directory_path() / "mpigan-bench-master").string();
  if (t.rank == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir + "/checkpoints");
  }
  world.barrier();
  // The masters' session (the canonical model); stand-ins only need its layout.
  train::Session session = dist::role_session(d.experiment, t);
  const dist::PayloadLayout layout = dist::PayloadLayout::of(*session.model);
  const std::size_t floats = layout.total();
  const double transport = transport_bound(world, floats);
  MPIGAN_CHECK(o.transport == "shm" || o.transport == "mpi", "bench master: --transport must be shm or mpi, got '{}'",
               o.transport);
  {
    const dist::PayloadChannels channels = dist::PayloadChannels::create(t, floats, o.transport == "shm");
    dist::Trace trace;
    if (t.role == dist::Role::worker) {
      stand_in_worker(t, layout, d.dist.algorithm->exchange() == algos::Exchange::pull_push, channels);
      t.links.barrier();
    } else {
      // The bounds first, on one thread as the master serves (topology.master_threads), while the
      // stand-in sleeps waiting for the initial weights.
      double bound = 0, arithmetic = 0;
      {
        ScopedHostThreads one(1);
        bound = copy_bound(floats);
        arithmetic = arithmetic_bound(floats);
      }
      dist::RoleContext ctx{d, t, dir, -1, trace, channels, std::move(session), layout, {}, {}};
      const auto r = master::run_master(ctx);
      const double rate = static_cast<double>(r.samples) / r.wall_s;  // each stand-in update carries 1 sample
      // Capacity: updates per second of the master's busy time (not waiting for a request), i.e.
      // the rate it sustains when requests are always queued (many workers). The round-trip rate
      // above also contains the stand-in's turn-around while the master idles.
      const double capacity = static_cast<double>(r.samples) / std::max(r.wall_s - r.idle_s, 1e-9);
      std::printf("model=%s rule=%s workers=%d payload_mb=%.2f transport=%s (%d of %d children in shared memory)\n",
                  o.model.c_str(), o.rule.c_str(), world.size() - 1, static_cast<double>(floats) * 4.0 / 1e6,
                  o.transport.c_str(), channels.shared_children(), world.size() - 1);
      std::printf("master_cpu_fraction=%.3f\n", r.cpu_s / r.wall_s);
      std::printf("copy_bound_per_s=%.1f\n", bound);
      std::printf("transport_bound_per_s=%.1f\n", transport);
      std::printf("arithmetic_bound_per_s=%.1f\n", arithmetic);
      std::printf("transport_plus_arithmetic_bound_per_s=%.1f\n", 1.0 / (1.0 / transport + 1.0 / arithmetic));
      std::printf("round_trip_updates_per_s=%.1f\n", rate);
      std::printf("master_busy_fraction=%.3f\n", (r.wall_s - r.idle_s) / r.wall_s);
      std::printf("fraction_of_transport_bound=%.3f\n", capacity / transport);
      std::printf("fraction_of_copy_bound=%.3f\n", capacity / bound);
      std::printf("updates_per_s=%.1f\n", capacity);
      std::filesystem::remove_all(dir);
    }
  }  // the channels are freed (collectively) before MPI_Finalize
  MPI_Finalize();
}

}  // namespace

void add_bench_master(CLI::App& bench) {
  auto o = std::make_shared<BenchMasterOptions>();
  auto* cmd = bench.add_subcommand("master", "Updates per second one master absorbs (run under mpiexec -n K+1)");
  cmd->add_option("--model", o->model, "model whose parameter sets are exchanged")->capture_default_str();
  cmd->add_option("--rule", o->rule, "update rule")->capture_default_str();
  cmd->add_option("--updates", o->updates, "updates to serve")->check(integer_check(1))->capture_default_str();
  cmd->add_option("--transport", o->transport, "payloads through shared memory (shm, as runs do) or MPI messages (mpi)")
      ->check(CLI::IsMember({"shm", "mpi"}))
      ->capture_default_str();
  cmd->callback([o] { bench_master(*o); });
}

}  // namespace mpigan::apps
