// Showers from a trained generator, written as data files (generate.hpp).
#include "mpigan/train/generate.hpp"

#include "mpigan/core/env.hpp"
#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/core/paths.hpp"
#include "mpigan/core/rng.hpp"
#include "mpigan/data/angle_measure.hpp"
#include "mpigan/data/event_file.hpp"
#include "mpigan/data/event_writer.hpp"
#include "mpigan/data/preprocess.hpp"
#include "mpigan/train/checkpoint.hpp"
#include "mpigan/train/run_dir.hpp"
#include "mpigan/train/session.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace mpigan::train {

namespace fs = std::filesystem;

namespace {

/// A run's config.yaml less what only the distributed layers and searches read (their keys are
/// recorded there too), parsed as an experiment.
ExperimentConfig load_run_config(const fs::path& config) {
  // Parsed in place (a syntax error names the file and its line; problems keep their lines), the
  // other layers' keys then removed from the document.
  ConfigDocument doc = ConfigDocument::load(config.string());
  YAML::Node node = doc.yaml();
  for (const char* section : {"topology", "algorithm", "search"}) node.remove(section);
  if (node["training"].IsMap()) {
    node["training"].remove("sync_every");
    node["training"].remove("max_nonfinite");
  }
  ExperimentConfig e = ExperimentConfig::parse(doc);
  doc.finish();
  return e;
}

}  // namespace

void load_generator(const std::string& path, Session& s) {
  CheckpointReader r(path);
  auto& g = s.model->generator;
  load_parameters(r, "model/generator/weights", g.weights(), *s.backend);
  if (r.has("model/generator/state/values")) {
    load_parameters(r, "model/generator/state", g.state(), *s.backend);
    return;
  }
  // A distributed run's main file: G's state first, then D's.
  const auto st = r.floats("model/state");
  const std::size_t need = g.state().size() + s.model->discriminator.state().size();
  MPIGAN_CHECK(st.size() == need, "checkpoint '{}': model/state holds {} values, the model needs {}", path, st.size(),
               need);
  copy_from_host(*s.backend, std::span<const float>(st).subspan(0, g.state().size()), g.state());
}

namespace {

using Conditions = ShowerConditions;

/// The most showers one `generate` writes: 10^8 showers of 25x25x25 cells are 6 TB.
constexpr std::int64_t kMaxGenerateEvents = 100'000'000;

Conditions draw_conditions(const ExperimentConfig& e, bool angle_model, const GenerateOptions& o) {
  Conditions c;
  if (!o.like.empty()) {
    const auto f = data::EventFile::open(o.like, std::nullopt, angle_model ? e.data.preprocess.angle_key : "");
    const std::int64_t n = o.events > 0 ? std::min(o.events, f->events()) : f->events();
    c.energy.assign(f->energy().begin(), f->energy().begin() + n);
    if (angle_model) c.angle.assign(f->angle().begin(), f->angle().begin() + n);
    return c;
  }
  MPIGAN_CHECK(o.energy.has_value(), "generate: give --energy A:B or --like FILE.h5");
  MPIGAN_CHECK(o.events > 0, "generate: --events must be positive, got {}", o.events);
  MPIGAN_CHECK(o.events <= kMaxGenerateEvents,
               "generate: --events {} is more than one file takes here ({}): generate in several files", o.events,
               kMaxGenerateEvents);
  const auto [e_lo, e_hi] = *o.energy;
  MPIGAN_CHECK(e_lo > 0 && e_hi >= e_lo && std::isfinite(e_hi),
               "generate: --energy {}:{} must satisfy 0 < LO <= HI (GeV, the primary particle's energy)", e_lo, e_hi);
  if (o.angle) {
    const double deg = 180.0 / std::acos(-1.0);
    MPIGAN_CHECK(angle_model,
                 "generate: --angle {}:{} given, but model {} is conditioned on the energy only (its showers are at "
                 "normal incidence): leave --angle out",
                 o.angle->first * deg, o.angle->second * deg, e.model.name);
    MPIGAN_CHECK(o.angle->first * deg >= 10.0 - 1e-9 && o.angle->second * deg <= 170.0 + 1e-9 &&
                     o.angle->first <= o.angle->second,
                 "generate: --angle {}:{} must satisfy 10 <= LO <= HI <= 170 (degrees)", o.angle->first * deg,
                 o.angle->second * deg);
  }
  Rng rng(o.seed, 0x9E4E7A7Eull);
  c.energy.resize(static_cast<std::size_t>(o.events));
  for (auto& x : c.energy) x = rng.uniform(static_cast<float>(o.energy->first), static_cast<float>(o.energy->second));
  if (angle_model) {
    const auto a = o.angle.value_or(std::pair{std::acos(-1.0) / 2, std::acos(-1.0) / 2});
    c.angle.resize(c.energy.size());
    for (auto& x : c.angle) x = rng.uniform(static_cast<float>(a.first), static_cast<float>(a.second));
  }
  return c;
}

}  // namespace

std::string shipped_generators_dir() {
  if (const char* env = env_value("MPIGAN_GENERATORS")) return env;
  return MPIGAN_SOURCE_DIR "/generators";
}

std::vector<ShippedGenerator> shipped_generators() {
  std::vector<ShippedGenerator> out;
  const fs::path root(shipped_generators_dir());
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (!entry.is_directory() || !fs::exists(entry.path() / "config.yaml")) continue;
    ShippedGenerator g{entry.path().filename().string(), entry.path().string(), ""};
    std::ifstream in(entry.path() / "validation.json");
    if (in) {
      const auto j = nlohmann::json::parse(in, nullptr, false);
      if (!j.is_discarded() && j.contains("summary") && j["summary"].is_string()) g.summary = j["summary"];
    }
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

TrainedModel locate_trained(const std::string& source) {
  TrainedModel m;
  fs::path p(source);
  if (!fs::exists(p) && p.filename() == p) {
    const fs::path shipped = fs::path(shipped_generators_dir()) / source;
    if (fs::exists(shipped / "config.yaml")) p = shipped;
  }
  MPIGAN_CHECK(fs::exists(p),
               "'{}' does not exist (expected a run directory, a checkpoint file or the name of a shipped "
               "generator: `mpigan generate --list`)",
               source);
  if (fs::is_directory(p)) {
    m.run_dir = p.string();
    MPIGAN_CHECK(fs::exists(p / "checkpoints" / "latest"),
                 "run directory '{}' has no complete checkpoint (checkpoints/latest)", m.run_dir);
    RunDirectory run(m.run_dir, true);
    const auto latest = run.latest_checkpoint();
    MPIGAN_CHECK(latest.has_value(), "run directory '{}' has no complete checkpoint (checkpoints/latest)", source);
    m.checkpoint = *latest;
  } else {
    m.checkpoint = p.string();
    // RUN_DIR/checkpoints/step-N.h5 -> RUN_DIR
    m.run_dir = fs::absolute(p).parent_path().parent_path().string();
  }
  const fs::path config = fs::path(m.run_dir) / "config.yaml";
  MPIGAN_CHECK(fs::exists(config), "no config.yaml in '{}' (the run directory of '{}')", m.run_dir, source);
  m.experiment = load_run_config(config);
  return m;
}

double generate_batches(models::GanStep& step, const data::Preprocess& pre, const ShowerConditions& c,
                        std::int64_t batch, std::uint64_t seed, data::Units units,
                        const std::function<void(std::int64_t, const Tensor&)>& sink, bool batch_statistics) {
  const auto n = static_cast<std::int64_t>(c.energy.size());
  const bool with_angle = !c.angle.empty();
  double seconds = 0;
  for (std::int64_t b0 = 0; b0 < n; b0 += batch) {
    const std::int64_t k = std::min(batch, n - b0);
    Tensor energy = Tensor::empty({k, 1}), angle;
    for (std::int64_t i = 0; i < k; ++i)
      energy.data()[i] = c.energy[static_cast<std::size_t>(b0 + i)] * pre.energy_scale;
    if (with_angle) {
      angle = Tensor::empty({k, 1});
      for (std::int64_t i = 0; i < k; ++i) angle.data()[i] = c.angle[static_cast<std::size_t>(b0 + i)];
    }
    const auto t0 = std::chrono::steady_clock::now();
    const Tensor images = step.generate(energy, angle, seed + static_cast<std::uint64_t>(b0), batch_statistics);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink(b0, data::postprocess_images(images, pre, units));
  }
  return seconds;
}

void recalibrate_generator(models::GanStep& step, const data::Preprocess& pre, const ShowerConditions& c,
                           std::int64_t batch, std::int64_t passes, std::uint64_t seed) {
  const auto n = static_cast<std::int64_t>(c.energy.size());
  MPIGAN_CHECK(n > 0 && batch > 0, "recalibrating the generator: {} conditions, batch {}", n, batch);
  const std::int64_t k = std::min(batch, n);
  const bool with_angle = !c.angle.empty();
  Tensor energy = Tensor::empty({k, 1}), angle;
  if (with_angle) angle = Tensor::empty({k, 1});
  for (std::int64_t i = 0; i < k; ++i) {
    const auto j = static_cast<std::size_t>(i * n / k);
    energy.data()[i] = c.energy[j] * pre.energy_scale;
    if (with_angle) angle.data()[i] = c.angle[j];
  }
  step.recalibrate_generator_state(energy, angle, static_cast<int>(passes), seed);
}

GenerateSummary generate_showers(const TrainedModel& m, const GenerateOptions& o) {
  using Clock = std::chrono::steady_clock;
  const auto t_start = Clock::now();
  MPIGAN_CHECK(!o.out.empty(), "generate: --out FILE.h5 is required");
  MPIGAN_CHECK(o.batch > 0, "generate: --batch must be positive, got {}", o.batch);
  MPIGAN_CHECK(o.threads >= 0, "generate: --threads must be >= 0 (0: the experiment's), got {}", o.threads);
  {
    std::error_code ec;
    MPIGAN_CHECK(o.like.empty() || !fs::equivalent(o.like, o.out, ec),
                 "generate: --out '{}' is the --like file: its Monte Carlo showers would be overwritten; give another "
                 "--out",
                 o.out);
  }
  ExperimentConfig e = m.experiment;
  if (!o.backend.empty()) e.backend = o.backend;
  if (o.threads > 0) e.threads = o.threads;
  if (!o.precision.empty()) e.precision = o.precision;
  Session s = Session::create(e, o.seed);
  load_generator(m.checkpoint, s);
  const bool angle_model = s.model->angle_model;
  const Conditions c = draw_conditions(e, angle_model, o);
  const auto n = static_cast<std::int64_t>(c.energy.size());
  MPIGAN_CHECK(n > 0, "generate: no events to generate");

  const data::Preprocess& pre = e.data.preprocess;
  MPIGAN_CHECK(!o.batch_statistics || o.recalibrate_batches == 0,
               "generate: --batch-statistics normalises with each batch's statistics; --recalibrate-bn re-estimates "
               "the running ones, which it does not use: give one of the two");
  if (o.recalibrate_batches > 0) recalibrate_generator(*s.step, pre, c, o.batch, o.recalibrate_batches, o.seed);
  const data::Geometry geometry = e.data.geometry;
  const data::Units file_units = geometry == data::Geometry::ecal51 ? data::Units::gev_x50 : data::Units::gev;
  // The model's image extents (the geometry's, or the tiny-8 sandbox's 8^3).
  const Shape& img = s.model->image;
  const Dims3 dims{img[1], img[2], img[3]};
  const std::int64_t cells = dims.product();
  // Written under a temporary name and renamed at the end: an interrupted generation leaves no
  // truncated file where the showers are expected.
  check_output_file(o.out, "generate");
  const std::string tmp = o.out + ".tmp";
  data::EventWriter writer(tmp, dims, n);
  std::vector<float> sum(static_cast<std::size_t>(n)), measured(angle_model ? static_cast<std::size_t>(n) : 0);
  // with the batches' own statistics, the batches the generator trained on
  const std::int64_t batch = o.batch_statistics ? e.batch : o.batch;
  const double gen_s = generate_batches(
      *s.step, pre, c, batch, o.seed, file_units,
      [&](std::int64_t b0, const Tensor& showers) {
        for (std::int64_t i = 0; i < showers.shape()[0]; ++i) {
          const std::span<const float> ev(showers.data() + i * cells, static_cast<std::size_t>(cells));
          double total = 0;
          for (float x : ev) total += x;
          sum[static_cast<std::size_t>(b0 + i)] = static_cast<float>(total);
          if (angle_model)
            measured[static_cast<std::size_t>(b0 + i)] = static_cast<float>(data::measure_angle(ev, dims));
          writer.write_compressed(b0 + i, data::EventWriter::compress(ev, writer.gzip_level()));
        }
      },
      o.batch_statistics);
  writer.write_labels(data::keys::energy, c.energy);
  if (angle_model) {
    std::vector<float> eta(c.angle.size());
    for (std::size_t i = 0; i < eta.size(); ++i) eta[i] = static_cast<float>(-std::log(std::tan(c.angle[i] / 2.0)));
    writer.write_labels(data::keys::theta, c.angle);
    writer.write_labels(data::keys::mtheta, measured);  // measured from the generated image, as the files do
    writer.write_labels(data::keys::eta, eta);
  }
  writer.write_labels(data::keys::sum, sum);
  writer.close();
  std::error_code ec;
  fs::rename(tmp, o.out, ec);
  if (ec) MPIGAN_THROW(Error, "generate: cannot move '{}' to '{}': {}", tmp, o.out, ec.message());
  GenerateSummary r;
  r.events = n;
  r.seconds = gen_s;
  r.showers_per_s = gen_s > 0 ? static_cast<double>(n) / gen_s : 0;
  r.total_seconds = std::chrono::duration<double>(Clock::now() - t_start).count();
  return r;
}

}  // namespace mpigan::train
