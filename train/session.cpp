// The training session every computing process holds (session.hpp), and host copies of parameter sets.
#include "mpigan/train/session.hpp"

#include "mpigan/train/physics_monitor.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/rng.hpp"
#include "mpigan/train/run_dir.hpp"

#include <algorithm>
#include <cmath>

namespace mpigan::train {

Session Session::create(const ExperimentConfig& e, std::uint64_t step_seed, int device_id) {
  Session s;
  BackendOptions bo;
  bo.threads = e.threads;
  bo.precision = parse_precision(e.precision);
  // One GPU per rank, by node-local rank (the caller's device_id), wrapped over the visible GPUs.
  const int gpus = device_count(e.backend);
  bo.device_id = device_id >= 0 && gpus > 0 ? device_id % gpus : device_id;
  s.backend = make_backend(e.backend, bo);
  s.model = models::make_gan(e.model, *s.backend, e.seed);
  s.opt_g = nn::make_optimizer(e.opt_generator, *s.backend, s.model->generator.weights());
  s.opt_d = nn::make_optimizer(e.opt_discriminator, *s.backend, s.model->discriminator.weights());
  s.step = std::make_unique<models::GanStep>(*s.model, *s.backend, e.step, step_seed);
  return s;
}

void Session::apply_local(models::Net net) {
  if (net == models::Net::generator)
    opt_g->step(model->generator.weights(), model->generator.grads());
  else
    opt_d->step(model->discriminator.weights(), model->discriminator.grads());
}

void Session::save(CheckpointWriter& w) const {
  save_parameters(w, "model/generator/weights", model->generator.weights(), *backend);
  save_parameters(w, "model/generator/state", model->generator.state(), *backend);
  save_parameters(w, "model/discriminator/weights", model->discriminator.weights(), *backend);
  save_parameters(w, "model/discriminator/state", model->discriminator.state(), *backend);
  for (const auto& [name, opt] : {std::pair{"generator", opt_g.get()}, std::pair{"discriminator", opt_d.get()}})
    save_optimizer(w, std::string("optimizer/") + name, *opt, *backend);
}

std::string Session::first_non_finite() const {
  std::vector<std::pair<std::string, const ParameterSet*>> sets{
      {"generator weights", &model->generator.weights()},
      {"generator BatchNorm state", &model->generator.state()},
      {"discriminator weights", &model->discriminator.weights()},
      {"discriminator BatchNorm state", &model->discriminator.state()}};
  for (const auto& [name, opt] : {std::pair{"generator", opt_g.get()}, std::pair{"discriminator", opt_d.get()}})
    for (const auto& [slot, p] : opt->slots()) sets.emplace_back(std::string(name) + " optimizer " + slot, p);
  for (const auto& [name, p] : sets) {
    if (p->size() == 0) continue;
    std::vector<float> host(p->size());
    copy_to_host(*backend, *p, host);
    const auto bad = std::count_if(host.begin(), host.end(), [](float x) { return !std::isfinite(x); });
    if (bad > 0) return fmt::format("{} ({} of {} values)", name, bad, host.size());
  }
  return {};
}

void Session::load(const CheckpointReader& r) {
  load_parameters(r, "model/generator/weights", model->generator.weights(), *backend);
  load_parameters(r, "model/generator/state", model->generator.state(), *backend);
  load_parameters(r, "model/discriminator/weights", model->discriminator.weights(), *backend);
  load_parameters(r, "model/discriminator/state", model->discriminator.state(), *backend);
  for (const auto& [name, opt] : {std::pair{"generator", opt_g.get()}, std::pair{"discriminator", opt_d.get()}})
    load_optimizer(r, std::string("optimizer/") + name, *opt, *backend, name);
}

void copy_to_host(Backend& be, const ParameterSet& p, std::span<float> out) {
  MPIGAN_CHECK(out.size() == p.size(), "copy_to_host: {} values into a span of {}", p.size(), out.size());
  const Tensor h = be.to_host(p.flat());
  std::copy(h.data(), h.data() + p.size(), out.begin());
}

void copy_from_host(Backend& be, std::span<const float> in, ParameterSet& p) {
  MPIGAN_CHECK(in.size() == p.size(), "copy_from_host: {} values into a set of {}", in.size(), p.size());
  Tensor flat = p.flat();
  be.from_host(Tensor::from(flat.shape(), in), flat);
}

models::RealBatch real_batch(const data::Batch& b) {
  return {b.image, b.energy, b.ecal, b.angle};
}

std::vector<std::string> metrics_columns(const std::vector<std::string>& heads) {
  std::vector<std::string> c{"kind",          "epoch",  "step",   "samples", "elapsed_s",
                             "samples_per_s", "d_loss", "d_real", "d_fake",  "g_loss"};
  for (const char* part : {"d_real_", "d_fake_", "g_"})
    for (const auto& h : heads) c.push_back(part + h);
  for (auto& p : physics_columns()) c.push_back(std::move(p));
  return c;
}

std::vector<std::string> metrics_row(const std::string& kind, std::int64_t epoch, std::int64_t step,
                                     std::int64_t samples, double elapsed_s, double samples_per_s,
                                     const models::StepLosses& l) {
  std::vector<std::string> r{kind,
                             std::to_string(epoch),
                             std::to_string(step),
                             std::to_string(samples),
                             csv_number(elapsed_s),
                             csv_number(samples_per_s),
                             csv_number(l.d_loss()),
                             csv_number(l.d_real),
                             csv_number(l.d_fake),
                             csv_number(l.g)};
  for (const auto* v : {&l.d_real_heads, &l.d_fake_heads, &l.g_heads})
    for (double x : *v) r.push_back(csv_number(x));
  r.resize(r.size() + physics_columns().size());  // the physics figures: physics rows only
  return r;
}

}  // namespace mpigan::train
