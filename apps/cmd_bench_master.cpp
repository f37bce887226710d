// `mpigan bench master` (under mpiexec -n K+1): how many updates per second one master absorbs for
// parameter sets of a real model, against the memory-copy bound. Rank 0 runs the real master
// (update rule, BatchNorm-state averaging, per-update log); ranks 1..K are stand-in workers that
// skip the training step and send a fixed random update as fast as the master answers, following
// the real protocol. The copy bound is the rate of copying one update's payload once with memcpy:
// no master can absorb updates faster than it can read them.
#include "commands.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/core/mpi/comm.hpp"
#include "mpigan/core/rng.hpp"
#include "mpigan/master/master.hpp"
#include "mpigan/models/gan_model.hpp"
#include "mpigan/worker/protocol.hpp"

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
};

void stand_in_worker(const worker::Topology& t, const worker::PayloadLayout& layout, bool pull_push) {
  using namespace worker;
  std::vector<float> payload(layout.total()), reply(layout.total());
  Rng rng(static_cast<std::uint64_t>(t.rank));
  rng.fill_uniform(payload, -1e-3f, 1e-3f);
  Header h = recv_header(t.links, t.parent, kTagReply, kReplySpinSeconds);
  t.links.recv(reply, t.parent, kTagReplyPayload);
  Header u;
  u.child = t.child_id;
  u.samples = 1;
  while (true) {
    u.version = h.version;
    if (pull_push) {
      u.kind = Kind::pull;
      send_header(t.links, u, t.parent, kTagHeader);
      h = recv_header(t.links, t.parent, kTagReply, kReplySpinSeconds);
      if (h.kind != Kind::weights) break;
      t.links.recv(reply, t.parent, kTagReplyPayload);
      u.kind = Kind::update;
      send_header(t.links, u, t.parent, kTagHeader);
      t.links.send(payload, t.parent, kTagPayload);
      continue;
    }
    u.kind = Kind::update;
    send_header(t.links, u, t.parent, kTagHeader);
    t.links.send(payload, t.parent, kTagPayload);
    h = recv_header(t.links, t.parent, kTagReply, kReplySpinSeconds);
    if (h.kind != Kind::weights) break;
    t.links.recv(reply, t.parent, kTagReplyPayload);
  }
}

/// Updates/s if the master only copied each update in and the reply out with memcpy (two
/// copies of the payload per update, buffers warm in cache): the memory-copy bound.
double copy_bound(std::size_t floats) {
  std::vector<float> a(floats, 1.0f), b(floats);
  using clock = std::chrono::steady_clock;
  std::memcpy(b.data(), a.data(), floats * sizeof(float));  // warm
  const int reps = 200;
  const auto t0 = clock::now();
  for (int i = 0; i < reps; ++i) {
    a[static_cast<std::size_t>(i) % floats] = static_cast<float>(i);
    std::memcpy(b.data(), a.data(), floats * sizeof(float));
  }
  const double per_copy = std::chrono::duration<double>(clock::now() - t0).count() / reps;
  return 1.0 / (2.0 * per_copy);
}

/// Updates/s if the master did nothing but the arithmetic every update needs on the canonical
/// weights: the finiteness/norm pass over the received update (sum of squares) and an RMSprop step
/// (read gradient, weights and mean square; write weights and mean square), on one thread, buffers
/// warm. With the copy bound this splits the master's time between arithmetic and transport.
double arithmetic_bound(std::size_t floats) {
  auto be = make_backend("cpu");
  const auto n = static_cast<std::int64_t>(floats);
  Tensor w = Tensor::zeros(Shape{n}), g = Tensor::zeros(Shape{n}), ms = Tensor::zeros(Shape{n});
  Rng rng(7);
  rng.fill_uniform(std::span<float>(g.data(), floats), -1e-3f, 1e-3f);
  const RmspropStep step{.lr = 1e-3f, .rho = 0.9f, .epsilon = 1e-7f};
  double sink = 0;
  auto once = [&] {
    sink += be->sum_squares(g);
    be->rmsprop_update(w, g, ms, step);
  };
  using clock = std::chrono::steady_clock;
  once();
  const int reps = 200;
  const auto t0 = clock::now();
  for (int i = 0; i < reps; ++i) once();
  const double per = std::chrono::duration<double>(clock::now() - t0).count() / reps;
  MPIGAN_CHECK(std::isfinite(sink), "bench master: non-finite sum of squares");
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
  worker::DistExperiment d;
  d.experiment.name = "bench-master";
  d.experiment.model.name = o.model;
  d.experiment.max_updates = o.updates;
  d.experiment.validate = false;
  d.experiment.log_level = "warn";
  d.experiment.log_every = 1 << 30;
  d.experiment.data.train_files = {"(not read)"};
  {
    ConfigDocument doc = ConfigDocument::parse(fmt::format("algorithm: {{name: {}}}", o.rule), "bench");
    ConfigNode root = doc.root();
    ConfigNode alg = root.section("algorithm");
    d.dist.algorithm = algos::make_algorithm(alg);
    doc.finish();
  }
  worker::Topology t = worker::Topology::build(world, d.dist.topology);
  set_process_label(t.label());
  init_logging("warn");
  const std::string dir = (std::filesystem::temp_directory_path() / "mpigan-bench-master").string();
  if (t.rank == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir + "/checkpoints");
  }
  world.barrier();
  std::size_t floats = 0;
  {
    auto be = make_backend("cpu");
    auto m = models::make_gan({.name = o.model}, *be, 1);
    floats = m->generator.weights().size() + m->discriminator.weights().size() + m->generator.state().size() +
             m->discriminator.state().size();
  }
  const double transport = transport_bound(world, floats);
  worker::Trace trace;
  if (t.role == worker::Role::worker) {
    auto be = make_backend("cpu");
    auto m = models::make_gan({.name = o.model}, *be, 1);
    const worker::PayloadLayout layout{m->generator.weights().size(), m->discriminator.weights().size(),
                                       m->generator.state().size(), m->discriminator.state().size()};
    stand_in_worker(t, layout, d.dist.algorithm->exchange() == algos::Exchange::pull_push);
    t.links.barrier();
  } else {
    const auto r = master::run_master(d, t, dir, -1, trace);
    const double bound = copy_bound(floats);
    const double arithmetic = arithmetic_bound(floats);
    const double rate = static_cast<double>(r.samples) / r.wall_s;  // each stand-in update carries 1 sample
    std::printf("model=%s rule=%s workers=%d payload_mb=%.2f\n", o.model.c_str(), o.rule.c_str(), world.size() - 1,
                static_cast<double>(floats) * 4.0 / 1e6);
    std::printf("master_cpu_fraction=%.3f\n", r.cpu_s / r.wall_s);
    std::printf("copy_bound_per_s=%.1f\n", bound);
    std::printf("transport_bound_per_s=%.1f\n", transport);
    std::printf("arithmetic_bound_per_s=%.1f\n", arithmetic);
    std::printf("transport_plus_arithmetic_bound_per_s=%.1f\n", 1.0 / (1.0 / transport + 1.0 / arithmetic));
    std::printf("fraction_of_copy_bound=%.3f\n", rate / bound);
    std::printf("fraction_of_transport_bound=%.3f\n", rate / transport);
    std::printf("updates_per_s=%.1f\n", rate);
    std::filesystem::remove_all(dir);
  }
  MPI_Finalize();
}

}  // namespace

void add_bench_master(CLI::App& bench) {
  auto o = std::make_shared<BenchMasterOptions>();
  auto* cmd = bench.add_subcommand("master", "Updates per second one master absorbs (run under mpiexec -n K+1)");
  cmd->add_option("--model", o->model, "model whose parameter sets are exchanged")->capture_default_str();
  cmd->add_option("--rule", o->rule, "update rule")->capture_default_str();
  cmd->add_option("--updates", o->updates, "updates to serve")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->callback([o] { bench_master(*o); });
}

}  // namespace mpigan::apps
