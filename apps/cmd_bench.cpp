// `mpigan bench step`: the full 3DGAN training step (generate, D on real, D on fake, two G
// updates, RMSprop after each) on synthetic showers, timed over S steps after a warm-up step.
// Prints per-step times, the peak memory, and as its LAST line `samples_per_s=X` where
// X = batch * steps / (time of the timed steps). bench/compare_step.sh runs it beside the
// PyTorch peer (docs/performance.md).
#include "commands.hpp"

#include "mpigan/core/backend.hpp"
#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/core/rng.hpp"
#include "mpigan/data/preprocess.hpp"
#include "mpigan/models/gan_model.hpp"
#include "mpigan/models/gan_step.hpp"
#include "mpigan/nn/optimizer.hpp"
#include "mpigan/train/experiment.hpp"

#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace mpigan::apps {
namespace {

struct BenchStepOptions {
  std::string model = "3dgan-25";
  std::int64_t batch = 16;
  int steps = 5;
  int warmup = 1;
  int threads = 0;
  std::string device = "cpu";
  std::string precision = "fp32";
  std::uint64_t seed = 1;
  int profile = 0;  // extra steps timed layer by layer (bench step --profile N)
  std::string log_level = "info";
};

/// Plausible showers for timing: non-negative cells concentrated on the axis, sum ~ 2 E/100.
models::RealBatch synthetic_batch(const models::GanModel& m, std::int64_t n, Rng& rng) {
  models::RealBatch b;
  const Shape s = Shape::batch_of(n, m.image);
  b.image = Tensor::empty(s);
  b.energy = Tensor::empty({n, 1});
  b.ecal = Tensor::empty({n, 1});
  if (m.angle_model) b.angle = Tensor::empty({n, 1});
  const std::int64_t X = s[2], Y = s[3], Z = s[4];
  for (std::int64_t i = 0; i < n; ++i) {
    const float e = rng.uniform(0.1f, 5.0f);
    b.energy.data()[i] = e;
    if (m.angle_model) b.angle.data()[i] = rng.uniform(1.047f, 2.094f);
    double sum = 0;
    float* img = b.image.data() + i * s.item_numel();
    for (std::int64_t x = 0; x < X; ++x)
      for (std::int64_t y = 0; y < Y; ++y)
        for (std::int64_t z = 0; z < Z; ++z) {
          const double r2 = (x - X / 2.0) * (x - X / 2.0) + (y - Y / 2.0) * (y - Y / 2.0);
          const float v = static_cast<float>(e * std::exp(-r2 / 6.0 - (z - Z / 3.0) * (z - Z / 3.0) / 40.0) *
                                             rng.uniform(0.5f, 1.5f));
          img[(x * Y + y) * Z + z] = v;
          sum += v;
        }
    b.ecal.data()[i] = static_cast<float>(sum);
  }
  return b;
}

/// The per-layer table of `bench step --profile N`: milliseconds per step, forward and backward,
/// largest first, and what the layers leave of the step (losses, optimizers, copies).
void print_layer_times(const nn::LayerTimes& t, int steps, double step_s) {
  std::vector<const nn::LayerTimes::Row*> rows;
  double layers = 0.0;
  for (const auto& r : t.rows) {
    rows.push_back(&r);
    layers += r.forward_s + r.backward_s;
  }
  std::ranges::sort(rows, std::greater{}, [](const auto* r) { return r->forward_s + r->backward_s; });
  const double per = 1e3 / steps;
  std::printf(
      "\nprofile: %d steps, %.1f ms per step with a wait after every layer (layers %.1f ms, the rest %.1f ms)\n", steps,
      step_s * per, layers * per, (step_s - layers) * per);
  std::printf("%-14s %-12s %-18s %9s %9s %6s %6s  %s\n", "network", "layer", "kind", "fwd ms", "bwd ms", "share",
              "calls", "options");
  for (const auto* r : rows)
    std::printf("%-14s %-12s %-18s %9.2f %9.2f %5.1f%% %6lld  %s\n", r->network.c_str(), r->layer.c_str(),
                r->kind.c_str(), r->forward_s * per, r->backward_s * per,
                100.0 * (r->forward_s + r->backward_s) / step_s,
                static_cast<long long>((r->forward_calls + r->backward_calls) / steps), r->options.c_str());
}

/// GPU memory at its peak (nothing on host backends): over the whole run (peak_gpu_mem_mb, what
/// PyTorch's max_memory_allocated() reports without a reset) and over the timed steps alone
/// (peak_gpu_mem_steps_mb, the steady state).
void print_gpu_peaks(std::size_t warmup_peak, std::size_t steps_peak) {
  if (std::max(warmup_peak, steps_peak) == 0) return;
  std::printf("peak_gpu_mem_mb=%.1f\n", static_cast<double>(std::max(warmup_peak, steps_peak)) / (1 << 20));
  std::printf("peak_gpu_mem_steps_mb=%.1f\n", static_cast<double>(steps_peak) / (1 << 20));
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

void bench_step(const BenchStepOptions& o) {
  init_logging(o.log_level);
  BackendOptions bo;
  bo.threads = o.threads;
  bo.precision = parse_precision(o.precision);
  auto backend = make_backend(o.device, bo);
  if (o.threads > 0) omp_set_num_threads(o.threads);
  auto model = models::make_gan({.name = o.model}, *backend, o.seed);
  auto rms = nn::OptimizerConfig::defaults("rmsprop");
  auto opt_g = nn::make_optimizer(rms, *backend, model->generator.weights());
  auto opt_d = nn::make_optimizer(rms, *backend, model->discriminator.weights());
  models::StepConfig sc;
  sc.ecal_xscale = 1.0f;
  models::GanStep step(*model, *backend, sc, o.seed);
  Rng rng(o.seed, hash_string("bench-data"));
  const models::RealBatch batch = synthetic_batch(*model, o.batch, rng);
  auto apply = [&](models::Net n) {
    if (n == models::Net::generator)
      opt_g->step(model->generator.weights(), model->generator.grads());
    else
      opt_d->step(model->discriminator.weights(), model->discriminator.grads());
  };
  std::printf("model=%s batch=%lld steps=%d warmup=%d backend=%s\n", o.model.c_str(), static_cast<long long>(o.batch),
              o.steps, o.warmup, backend->describe().c_str());
  // The n-th step (warm-up, timed and profiled steps count on): its wall time, the GPU waited for.
  using clock = std::chrono::steady_clock;
  auto timed_step = [&](int n) {
    const auto t0 = clock::now();
    const auto l = step.run(batch, static_cast<std::uint64_t>(n), apply);
    backend->synchronize();
    return std::pair{std::chrono::duration<double>(clock::now() - t0).count(), l};
  };
  for (int w = 0; w < o.warmup; ++w) std::printf("warmup %d: %.3f s\n", w, timed_step(w).first);
  // The warm-up's peak (cuDNN's algorithm searches time their candidates on scratch operands),
  // then the timed steps' own.
  const std::size_t warmup_peak = backend->device_memory_peak();
  backend->reset_device_memory_peak();
  double total = 0.0;
  for (int s = 0; s < o.steps; ++s) {
    const auto [dt, l] = timed_step(o.warmup + s);
    total += dt;
    std::printf("step %d: %.3f s  d_loss %.4f  g_loss %.4f\n", s, dt, l.d_loss(), l.g);
    std::fflush(stdout);
  }
  const nn::GradientWorkspaces& g_ws = model->generator.gradient_workspaces();
  const nn::GradientWorkspaces& d_ws = model->discriminator.gradient_workspaces();
  const double outputs =
      static_cast<double>(model->generator.output_bytes() + model->discriminator.output_bytes()) / (1 << 20);
  const double workspaces =
      static_cast<double>(&g_ws == &d_ws ? g_ws.bytes() : g_ws.bytes() + d_ws.bytes()) / (1 << 20);
  std::printf("step_time_s=%.4f\n", total / o.steps);
  std::printf("activation_mb=%.1f (layer outputs %.1f, backward's gradient workspaces %.1f%s)\n", outputs + workspaces,
              outputs, workspaces, &g_ws == &d_ws ? ", shared by G and D" : "");
  std::printf("peak_rss_mb=%.1f\n", peak_rss_mb());
  print_gpu_peaks(warmup_peak, backend->device_memory_peak());
  std::printf("samples_per_s=%.3f\n", static_cast<double>(o.batch) * o.steps / total);
  if (o.profile > 0) {
    nn::LayerTimes times;
    model->generator.set_layer_times(&times);
    model->discriminator.set_layer_times(&times);
    double profiled = 0.0;
    for (int s = 0; s < o.profile; ++s) profiled += timed_step(o.warmup + o.steps + s).first;
    model->generator.set_layer_times(nullptr);
    model->discriminator.set_layer_times(nullptr);
    print_layer_times(times, o.profile, profiled);
  }
}

/// `mpigan bench generate`: what `mpigan generate` spends per shower, on an initialised model:
/// the generator's inference pass (GanStep::generate: latent, G in inference mode) and the inverse
/// preprocessing (data::postprocess_images), the showers ending in host memory. Last line:
/// showers_per_s over the timed batches.
void bench_generate(const BenchStepOptions& o, int batches) {
  BackendOptions bo;
  bo.threads = o.threads;
  bo.precision = parse_precision(o.precision);
  auto backend = make_backend(o.device, bo);
  if (o.threads > 0) omp_set_num_threads(o.threads);
  auto model = models::make_gan({.name = o.model}, *backend, o.seed);
  models::GanStep step(*model, *backend, {}, o.seed);
  data::Geometry geometry{};
  data::Preprocess pre;
  train::data_defaults_for_model(o.model, geometry, pre);
  Rng rng(o.seed, hash_string("bench-generate"));
  std::printf("model=%s batch=%lld batches=%d warmup=%d backend=%s\n", o.model.c_str(), static_cast<long long>(o.batch),
              batches, o.warmup, backend->describe().c_str());
  using clock = std::chrono::steady_clock;
  auto one = [&](std::uint64_t seed) {
    Tensor energy = Tensor::empty({o.batch, 1}), angle;
    for (std::int64_t i = 0; i < o.batch; ++i) energy.data()[i] = rng.uniform(0.1f, 5.0f);
    if (model->angle_model) {
      angle = Tensor::empty({o.batch, 1});
      for (std::int64_t i = 0; i < o.batch; ++i) angle.data()[i] = rng.uniform(1.07f, 2.07f);
    }
    const Tensor img = step.generate(energy, angle, seed);
    return data::postprocess_images(img, pre, data::Units::gev);
  };
  for (int w = 0; w < o.warmup; ++w) {
    const auto t0 = clock::now();
    one(static_cast<std::uint64_t>(w));
    std::printf("warmup %d: %.3f s\n", w, std::chrono::duration<double>(clock::now() - t0).count());
  }
  const std::size_t warmup_peak = backend->device_memory_peak();
  backend->reset_device_memory_peak();
  double total = 0;
  for (int b = 0; b < batches; ++b) {
    const auto t0 = clock::now();
    const Tensor out = one(static_cast<std::uint64_t>(o.warmup + b));
    const double dt = std::chrono::duration<double>(clock::now() - t0).count();
    total += dt;
    std::printf("batch %d: %.3f s\n", b, dt);
    std::fflush(stdout);
  }
  std::printf("peak_rss_mb=%.1f\n", peak_rss_mb());
  print_gpu_peaks(warmup_peak, backend->device_memory_peak());
  std::printf("showers_per_s=%.2f\n", static_cast<double>(o.batch) * batches / total);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks (see docs/performance.md)");
  bench->require_subcommand(1);
  auto o = std::make_shared<BenchStepOptions>();
  auto* step = bench->add_subcommand("step", "Time the full 3DGAN training step on synthetic showers");
  step->add_option("--model", o->model, "3dgan-25, anglegan-51 or tiny-8")->capture_default_str();
  step->add_option("--batch", o->batch, "samples per step")->check(integer_check(1))->capture_default_str();
  step->add_option("--steps", o->steps, "timed steps")->check(integer_check(1))->capture_default_str();
  step->add_option("--warmup", o->warmup, "untimed steps first")->check(integer_check(0))->capture_default_str();
  step->add_option("--threads", o->threads, "CPU threads (0 = OMP_NUM_THREADS or all cores)")
      ->check(integer_check(0, 1024))
      ->capture_default_str();
  step->add_option("--device,--backend", o->device, "cpu, cuda or reference")->capture_default_str();
  add_precision_option(*step, o->precision, "fp32 or bf16 convolutions")->capture_default_str();
  step->add_option("--seed", o->seed, "seed of weights and data")->check(seed_check())->capture_default_str();
  step->add_option("--profile", o->profile,
                   "after the timed steps, N more timed layer by layer (waiting for the backend after each)")
      ->check(integer_check(0))
      ->capture_default_str();
  step->add_option("--log-level", o->log_level, "debug: also each convolution's algorithms (cuda)")
      ->capture_default_str();
  step->callback([o] { bench_step(*o); });
  auto g = std::make_shared<BenchStepOptions>();
  g->batch = 128;
  auto batches = std::make_shared<int>(4);
  auto* gen = bench->add_subcommand("generate", "Time shower generation (inference + inverse preprocessing)");
  gen->add_option("--model", g->model, "3dgan-25, anglegan-51 or tiny-8")->capture_default_str();
  gen->add_option("--batch", g->batch, "showers per batch")->check(integer_check(1))->capture_default_str();
  gen->add_option("--batches", *batches, "timed batches")->check(integer_check(1))->capture_default_str();
  gen->add_option("--warmup", g->warmup, "untimed batches first")->check(integer_check(0))->capture_default_str();
  gen->add_option("--threads", g->threads, "CPU threads (0 = OMP_NUM_THREADS or all cores)")
      ->check(integer_check(0, 1024))
      ->capture_default_str();
  gen->add_option("--device,--backend", g->device, "cpu, cuda or reference")->capture_default_str();
  add_precision_option(*gen, g->precision, "fp32 or bf16 convolutions")->capture_default_str();
  gen->add_option("--seed", g->seed, "seed of weights and conditions")->check(seed_check())->capture_default_str();
  gen->callback([g, batches] { bench_generate(*g, *batches); });
  add_bench_master(*bench);
}

}  // namespace mpigan::apps
