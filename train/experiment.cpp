// Parsing and validating an experiment file into ExperimentConfig (experiment.hpp), with the
// model-dependent data defaults.
#include "mpigan/train/experiment.hpp"

#include "mpigan/core/backend.hpp"
#include "mpigan/core/error.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace mpigan::train {

void data_defaults_for_model(const std::string& model, data::Geometry& geometry, data::Preprocess& preprocess) {
  if (model == "anglegan-51") {
    geometry = data::Geometry::ecal51;
    preprocess = data::preprocess_anglegan();
  } else if (model == "3dgan-5") {
    geometry = data::Geometry::ecal5;
    preprocess = data::preprocess_3dgan();
    preprocess.power = 0.5f;  // the model's ECAL-sum head follows data.preprocess.power (parse below)
  } else {
    geometry = data::Geometry::ecal25;
    preprocess = data::preprocess_3dgan();
  }
}

namespace {

nn::OptimizerConfig parse_optimizer(ConfigNode& n, const nn::OptimizerConfig& base) {
  nn::OptimizerConfig c = base;
  const std::string name = n.get_choice("name", base.name, {"sgd", "rmsprop", "adam"});
  if (name != base.name) {
    const auto d = nn::OptimizerConfig::defaults(name);
    c.name = name;
    c.lr = d.lr;
  }
  c.lr = n.get_real("lr", c.lr, 0.0, 1e3, true);
  c.momentum = n.get_real("momentum", c.momentum, 0.0, 0.999999);
  c.nesterov = n.get_bool("nesterov", c.nesterov);
  c.rho = n.get_real("rho", c.rho, 0.0, 0.999999);
  c.beta1 = n.get_real("beta1", c.beta1, 0.0, 0.999999);
  c.beta2 = n.get_real("beta2", c.beta2, 0.0, 0.999999);
  c.epsilon = n.get_real("epsilon", c.epsilon, 0.0, 1.0, true);
  return c;
}

YAML::Node optimizer_yaml(const nn::OptimizerConfig& c) {
  YAML::Node n;
  n["name"] = c.name;
  n["lr"] = c.lr;
  if (c.name == "sgd") {
    n["momentum"] = c.momentum;
    n["nesterov"] = c.nesterov;
  }
  if (c.name == "rmsprop") n["rho"] = c.rho;
  if (c.name == "adam") {
    n["beta1"] = c.beta1;
    n["beta2"] = c.beta2;
  }
  n["epsilon"] = c.epsilon;
  return n;
}

const char* units_name(data::Units u) {
  switch (u) {
    case data::Units::automatic:
      return "auto";
    case data::Units::gev:
      return "gev";
    case data::Units::gev_x50:
      return "gev_x50";
  }
  return "?";
}

/// Each parse_* reads one section of an experiment into @p e and records its problems (called in
/// document order, so every problem is reported, in the same order, at once).
void parse_model(ConfigNode& root, ExperimentConfig& e) {
  ConfigNode m = root.section("model");
  e.model.name = m.get_choice("name", "3dgan-25", models::model_names());
  e.model.latent = m.get_int("latent", 0, 0, 1 << 16);
  e.model.dropout = static_cast<float>(m.get_real("dropout", 0.2, 0.0, 0.95));
  e.model.leaky_alpha = static_cast<float>(m.get_real("leaky_alpha", 0.3, 0.0, 1.0));
  e.model.bn_momentum = static_cast<float>(m.get_real("bn_momentum", 0.99, 0.0, 1.0));
  e.model.noise = m.get_choice("noise", "normal", {"normal", "sphere"});
  e.model.condition = m.get_bool("condition", false);
  e.model.hlf_head = m.get_bool("hlf_head", false);
  e.model.hlf_lr_scale = static_cast<float>(m.get_real("hlf_lr_scale", 1.0, 1e-3, 1e3));
  MPIGAN_CHECK(
      e.model.hlf_head || e.model.hlf_lr_scale == 1.0f,
      "model.hlf_lr_scale = {}: the learning-rate multiplier of the hlf head, which needs model.hlf_head: true",
      e.model.hlf_lr_scale);
  e.model.input = m.get_choice("input", "product", {"product", "concat"});
  e.model.symmetrise = m.get_bool("symmetrise", false);
  e.model.generator_width = static_cast<int>(m.get_int("generator_width", 1, 1, 16));
  MPIGAN_CHECK(e.model.generator_width == 1 || e.model.name == "3dgan-5",
               "model.generator_width = {}: the generator's channel multiplier is for model 3dgan-5, not '{}'",
               e.model.generator_width, e.model.name);
  const models::LossWeights ref = models::reference_loss_weights(e.model.name);
  if (m.has("loss_weights")) {
    ConfigNode w = m.section("loss_weights");
    e.model.loss_weights.bce = static_cast<float>(w.get_real("bce", ref.bce, 0.0, 1e6));
    e.model.loss_weights.energy = static_cast<float>(w.get_real("energy", ref.energy, 0.0, 1e6));
    e.model.loss_weights.ecal = static_cast<float>(w.get_real("ecal", ref.ecal, 0.0, 1e6));
    e.model.loss_weights.angle = static_cast<float>(w.get_real("angle", ref.angle, 0.0, 1e6));
    e.model.loss_weights.hlf = static_cast<float>(w.get_real("hlf", e.model.loss_weights.bce, 0.0, 1e6));
    w.reject_unknown();
  } else {
    m.accept("loss_weights");
    e.model.loss_weights = ref;
  }
  m.reject_unknown();
}

void parse_simulate(ConfigNode& d, ExperimentConfig& e) {
  if (d.has("simulate")) {
    ConfigNode s = d.section("simulate");
    auto& sim = e.simulate;
    sim.enabled = true;
    sim.events = s.get_int("events", sim.events, 1, 100000000);
    const auto energy = s.get_reals("energy", {sim.energy_lo, sim.energy_hi}, 2);
    sim.energy_lo = energy[0];
    sim.energy_hi = energy[1];
    if (!(0 < sim.energy_lo && sim.energy_lo <= sim.energy_hi))
      s.problem("energy",
                fmt::format("expected [lo, hi] GeV with 0 < lo <= hi, got [{}, {}]", sim.energy_lo, sim.energy_hi));
    const bool angle_model = e.data.geometry == data::Geometry::ecal51;
    const auto angle =
        s.get_reals("angle", angle_model ? std::vector<double>{60, 120} : std::vector<double>{90, 90}, 2);
    sim.angle_lo = angle[0];
    sim.angle_hi = angle[1];
    if (!(0 < sim.angle_lo && sim.angle_lo <= sim.angle_hi && sim.angle_hi < 180))
      s.problem("angle",
                fmt::format("expected [lo, hi] degrees in (0, 180), got [{}, {}]", sim.angle_lo, sim.angle_hi));
    sim.events_per_file = s.get_int("events_per_file", sim.events_per_file, 1, 100000000);
    sim.seed = static_cast<std::uint64_t>(s.get_int("seed", 1, 0));
    sim.dir = s.get_string("dir", "");
    if (sim.dir.empty()) s.problem("dir", "the directory the simulated files go to is required");
    s.reject_unknown();
  } else {
    d.accept("simulate");
  }
}

void parse_synthetic(ConfigNode& d, ExperimentConfig& e) {
  if (d.has("synthetic")) {
    ConfigNode s = d.section("synthetic");
    e.synthetic.enabled = true;
    e.synthetic.events = s.get_int("events", e.synthetic.events, 1, 1 << 28);
    e.synthetic.validation_events = s.get_int("validation_events", e.synthetic.validation_events, 0, 1 << 28);
    e.synthetic.seed = static_cast<std::uint64_t>(s.get_int("seed", 1, 0));
    s.reject_unknown();
    if (e.model.name != "tiny-8")
      d.problem("synthetic",
                fmt::format("synthetic toy showers are 8x8x8, for model tiny-8 (model.name is '{}')", e.model.name));
    if (!e.data.train_files.empty()) d.problem("synthetic", "give either data.train files or data.synthetic, not both");
  } else {
    d.accept("synthetic");
    if (e.data.train_files.empty()) d.problem("train", "at least one training file, glob or @list file is required");
    if (e.model.name == "tiny-8")
      d.problem("", "model 'tiny-8' is a sandbox without a file geometry: set data.synthetic (in-memory toy showers)");
  }
}

void parse_data(ConfigNode& root, ExperimentConfig& e) {
  ConfigNode d = root.section("data");
  data_defaults_for_model(e.model.name, e.data.geometry, e.data.preprocess);
  e.data.train_files = d.get_strings("train", {});
  e.data.validation_files = d.get_strings("validation", {});
  e.data.validation_fraction = d.get_real("validation_fraction", 0.0, 0.0, 0.9);
  if (!e.data.validation_files.empty() && d.has("validation_fraction"))
    d.problem("validation_fraction", "give either data.validation (files) or data.validation_fraction, not both");
  e.data.split =
      d.get_choice("split", "files", {"files", "events"}) == "files" ? data::SplitMode::files : data::SplitMode::events;
  if (d.has("cross_validation")) {
    ConfigNode cv = d.section("cross_validation");
    e.data.folds = static_cast<int>(cv.get_int("folds", 2, 2, 100));
    e.data.fold = static_cast<int>(cv.get_int("fold", 0, 0, 99));
    if (e.data.fold >= e.data.folds)
      cv.problem("fold", fmt::format("fold {} of {} folds: expected 0 <= fold < folds", e.data.fold, e.data.folds));
    cv.reject_unknown();
  } else {
    d.accept("cross_validation");
  }
  const std::string units = d.get_choice("units", "auto", {"auto", "gev", "gev_x50"});
  e.data.units = units == "auto" ? data::Units::automatic : units == "gev" ? data::Units::gev : data::Units::gev_x50;
  e.data.max_events = d.get_int("max_events", 0, 0);
  e.prefetch = static_cast<int>(d.get_int("prefetch", 4, 1, 1024));
  e.read_threads = static_cast<int>(d.get_int("read_threads", 1, 1, 64));
  if (d.has("preprocess")) {
    ConfigNode p = d.section("preprocess");
    auto& pp = e.data.preprocess;
    pp.threshold = static_cast<float>(p.get_real("threshold", pp.threshold, 0.0, 1e6));
    pp.xscale = static_cast<float>(p.get_real("xscale", pp.xscale, 0.0, 1e9, true));
    pp.power = static_cast<float>(p.get_real("power", pp.power, 0.0, 10.0, true));
    pp.min_ecal_sum = static_cast<float>(p.get_real("min_ecal_sum", pp.min_ecal_sum, 0.0, 1e12));
    pp.angle_key = p.get_choice("angle_key", pp.angle_key, {"mtheta", "theta"});
    p.reject_unknown();
  } else {
    d.accept("preprocess");
  }
  parse_simulate(d, e);
  parse_synthetic(d, e);
  d.reject_unknown();
}

void parse_optimizers(ConfigNode& root, ExperimentConfig& e) {
  ConfigNode o = root.section("optimizer");
  const nn::OptimizerConfig common = parse_optimizer(o, nn::OptimizerConfig::defaults("rmsprop"));
  for (const auto& [key, target] :
       {std::pair{"generator", &e.opt_generator}, std::pair{"discriminator", &e.opt_discriminator}}) {
    if (!o.has(key)) {
      o.accept(key);
      *target = common;
      continue;
    }
    ConfigNode sub = o.section(key);
    *target = parse_optimizer(sub, common);
    sub.reject_unknown();
  }
  e.lr_schedule.kind = o.get_choice("schedule", e.lr_schedule.kind, {"constant", "cosine"});
  e.lr_schedule.final_fraction = o.get_real("final_fraction", e.lr_schedule.final_fraction, 0.0, 1.0);
  o.reject_unknown();
}

void parse_training(ConfigNode& root, ExperimentConfig& e) {
  ConfigNode t = root.section("training");
  e.epochs = t.get_int("epochs", e.epochs, 1, 1000000);
  e.max_updates = t.get_int("max_updates", 0, 0);
  e.max_samples = t.get_int("max_samples", 0, 0);
  e.batch = t.get_int("batch", e.batch, 1, 1 << 16);
  e.step.label_flip = static_cast<float>(t.get_real("label_flip", 0.05, 0.0, 0.49));
  const bool toy = e.synthetic.enabled;
  const auto fe = t.get_reals("fake_energy", toy ? std::vector<double>{0.5, 3.0} : std::vector<double>{0.1, 5.0}, 2);
  if (!(0 < fe[0] && fe[0] <= fe[1]))
    t.problem("fake_energy", fmt::format("expected [lo, hi] in E/100 with 0 < lo <= hi, got [{}, {}]", fe[0], fe[1]));
  e.step.fake_energy_lo = static_cast<float>(fe[0]);
  e.step.fake_energy_hi = static_cast<float>(fe[1]);
  e.step.generator_passes = static_cast<int>(t.get_int("generator_passes", 2, 1, 16));
  e.step.fakes_batch_stats =
      t.get_choice("discriminator_fakes", "inference", {"inference", "batch_stats"}) == "batch_stats";
  e.step.normalise_energy = t.get_bool("normalise_energy", false);
  e.step.ecal_mean_bins = static_cast<int>(t.get_int("ecal_mean_bins", 0, 0, 1000));
  e.step.hlf_mmd = static_cast<float>(t.get_real("hlf_mmd", 0.0, 0.0, 1e6));
  e.step.response_mmd = static_cast<float>(t.get_real("response_mmd", 0.0, 0.0, 1e6));
  e.step.longitudinal_mmd = static_cast<float>(t.get_real("longitudinal_mmd", 0.0, 0.0, 1e6));
  e.step.transverse_mmd = static_cast<float>(t.get_real("transverse_mmd", 0.0, 0.0, 1e6));
  e.step.mmd_energy_scale = t.get_choice("mmd_scale", "batch", {"batch", "energy"}) == "energy";
  e.step.response_spread = static_cast<float>(t.get_real("response_spread", 0.0, 0.0, 1e6));
  for (const auto& [key, w] :
       {std::pair{"hlf_mmd", e.step.hlf_mmd}, std::pair{"response_mmd", e.step.response_mmd},
        std::pair{"longitudinal_mmd", e.step.longitudinal_mmd}, std::pair{"transverse_mmd", e.step.transverse_mmd},
        std::pair{"response_spread", e.step.response_spread}})
    if (w > 0.0f && !e.model.condition)
      t.problem(key,
                "compares showers of like energy, read from a conditioned discriminator's input: it needs "
                "model.condition: true");
  e.step.ecal_xscale = e.data.preprocess.xscale;
  {
    const std::vector<double> ref(models::kReferenceEcalFit.begin(), models::kReferenceEcalFit.end());
    const auto c = t.get_reals("ecal_fit", ref, 5);
    for (std::size_t i = 0; i < 5; ++i) e.step.ecal_fit[i] = static_cast<float>(c[i]);
  }
  if (toy) e.step.ecal_linear = 2.0f;  // data/synthetic.hpp: sum = 2 E/100
  t.accept("sync_every");              // read by the distributed layers
  t.accept("max_nonfinite");
  t.reject_unknown();
}

/// validation, checkpoint, output, logging
void parse_run_sections(ConfigNode& root, ExperimentConfig& e) {
  ConfigNode v = root.section("validation");
  e.validate = v.get_bool("enabled", true);
  e.validate_every = v.get_int("every", 0, 0);
  e.validation_batches = v.get_int("batches", 4, 0);
  if (v.has("early_stopping")) {
    ConfigNode es = v.section("early_stopping");
    EarlyStoppingSpec& s = e.early_stopping;
    s.enabled = true;
    s.metric = es.get_choice("metric", s.metric, {"val_d_loss", "val_g_loss", "val_d_real", "val_d_fake", "fpd_hlf"});
    s.minimize = es.get_choice("mode", "min", {"min", "max"}) == "min";
    if (es.has("threshold")) s.threshold = es.get_real("threshold", 0.0);
    s.patience = es.get_int("patience", 0, 0);
    if (!s.threshold && s.patience == 0) es.problem("", "give a threshold, a patience, or both");
    es.reject_unknown();
  }
  if (v.has("physics")) {
    ConfigNode ph = v.section("physics");
    PhysicsValidationSpec& s = e.physics;
    s.enabled = ph.get_bool("enabled", true);
    s.every = ph.get_int("every", 0, 0);
    s.events = ph.get_int("events", s.events, 10, 1 << 24);
    s.batch = ph.get_int("batch", s.batch, 1, 1 << 16);
    s.recalibrate_bn = ph.get_int_or("recalibrate_bn", "auto", "a number of batches", 0, 10000,
                                     "8 for a distributed run with an asynchronous rule, else 0");
    ph.reject_unknown();
  }
  if (e.early_stopping.enabled && e.early_stopping.metric == "fpd_hlf" && !e.physics.enabled)
    v.problem("early_stopping", "metric fpd_hlf needs validation.physics (the figure of merit is computed there)");
  for (const char* k : {"metrics", "events"}) v.accept(k);  // distributed validation
  v.reject_unknown();
  ConfigNode c = root.section("checkpoint");
  e.checkpoint_every = c.get_int("every", 0, 0);
  e.checkpoint_keep = c.get_int("keep", 3, 1, 1000);
  c.reject_unknown();
  ConfigNode out = root.section("output");
  e.output_dir = out.get_string("dir", "");
  out.reject_unknown();
  ConfigNode lg = root.section("logging");
  e.log_level = lg.get_choice("level", "info", {"trace", "debug", "info", "warn", "error", "critical", "off"});
  e.log_every = lg.get_int("every", 10, 1);
  lg.accept("trace");
  lg.reject_unknown();
}

/// The resolved configuration: what was given, with every default filled in. One assignment per
/// key, section by section in the order of the experiment file's documentation (docs/experiments.md):
/// long because the experiment has that many keys, and kept as one list so that a new key is
/// written next to its section's others.
YAML::Node resolved_yaml(const ExperimentConfig& e, ConfigDocument& doc,
                         const std::vector<std::string>& extra_sections) {
  YAML::Node r;
  r["name"] = e.name;
  r["seed"] = e.seed;
  r["backend"] = e.backend;
  r["threads"] = e.threads;
  r["precision"] = e.precision;
  r["model"]["name"] = e.model.name;
  r["model"]["latent"] = e.model.latent;
  r["model"]["dropout"] = e.model.dropout;
  r["model"]["leaky_alpha"] = e.model.leaky_alpha;
  r["model"]["bn_momentum"] = e.model.bn_momentum;
  r["model"]["noise"] = e.model.noise;
  r["model"]["condition"] = e.model.condition;
  r["model"]["hlf_head"] = e.model.hlf_head;
  r["model"]["hlf_lr_scale"] = e.model.hlf_lr_scale;
  r["model"]["input"] = e.model.input;
  r["model"]["symmetrise"] = e.model.symmetrise;
  r["model"]["generator_width"] = e.model.generator_width;
  r["model"]["loss_weights"]["bce"] = e.model.loss_weights.bce;
  r["model"]["loss_weights"]["energy"] = e.model.loss_weights.energy;
  r["model"]["loss_weights"]["ecal"] = e.model.loss_weights.ecal;
  r["model"]["loss_weights"]["angle"] = e.model.loss_weights.angle;
  r["model"]["loss_weights"]["hlf"] = e.model.loss_weights.hlf;
  for (const auto& f : e.data.train_files) r["data"]["train"].push_back(f);
  for (const auto& f : e.data.validation_files) r["data"]["validation"].push_back(f);
  if (e.data.validation_files.empty()) r["data"]["validation_fraction"] = e.data.validation_fraction;
  r["data"]["split"] = e.data.split == data::SplitMode::files ? "files" : "events";
  if (e.data.folds >= 2) {
    r["data"]["cross_validation"]["folds"] = e.data.folds;
    r["data"]["cross_validation"]["fold"] = e.data.fold;
  }
  r["data"]["units"] = units_name(e.data.units);
  r["data"]["max_events"] = e.data.max_events;
  r["data"]["prefetch"] = e.prefetch;
  r["data"]["read_threads"] = e.read_threads;
  r["data"]["preprocess"]["threshold"] = e.data.preprocess.threshold;
  r["data"]["preprocess"]["xscale"] = e.data.preprocess.xscale;
  r["data"]["preprocess"]["power"] = e.data.preprocess.power;
  r["data"]["preprocess"]["min_ecal_sum"] = e.data.preprocess.min_ecal_sum;
  r["data"]["preprocess"]["angle_key"] = e.data.preprocess.angle_key;
  if (e.synthetic.enabled) {
    r["data"]["synthetic"]["events"] = e.synthetic.events;
    r["data"]["synthetic"]["validation_events"] = e.synthetic.validation_events;
    r["data"]["synthetic"]["seed"] = e.synthetic.seed;
  }
  if (e.simulate.enabled) {
    auto s = r["data"]["simulate"];
    s["events"] = e.simulate.events;
    s["energy"].push_back(e.simulate.energy_lo);
    s["energy"].push_back(e.simulate.energy_hi);
    s["angle"].push_back(e.simulate.angle_lo);
    s["angle"].push_back(e.simulate.angle_hi);
    s["events_per_file"] = e.simulate.events_per_file;
    s["seed"] = e.simulate.seed;
    s["dir"] = e.simulate.dir;
  }
  r["optimizer"]["schedule"] = e.lr_schedule.kind;
  r["optimizer"]["final_fraction"] = e.lr_schedule.final_fraction;
  r["optimizer"]["generator"] = optimizer_yaml(e.opt_generator);
  r["optimizer"]["discriminator"] = optimizer_yaml(e.opt_discriminator);
  r["training"]["epochs"] = e.epochs;
  r["training"]["max_updates"] = e.max_updates;
  r["training"]["max_samples"] = e.max_samples;
  r["training"]["batch"] = e.batch;
  r["training"]["label_flip"] = e.step.label_flip;
  r["training"]["fake_energy"].push_back(e.step.fake_energy_lo);
  r["training"]["fake_energy"].push_back(e.step.fake_energy_hi);
  r["training"]["generator_passes"] = e.step.generator_passes;
  r["training"]["discriminator_fakes"] = e.step.fakes_batch_stats ? "batch_stats" : "inference";
  r["training"]["normalise_energy"] = e.step.normalise_energy;
  r["training"]["ecal_mean_bins"] = e.step.ecal_mean_bins;
  r["training"]["hlf_mmd"] = e.step.hlf_mmd;
  r["training"]["response_mmd"] = e.step.response_mmd;
  r["training"]["longitudinal_mmd"] = e.step.longitudinal_mmd;
  r["training"]["transverse_mmd"] = e.step.transverse_mmd;
  r["training"]["mmd_scale"] = e.step.mmd_energy_scale ? "energy" : "batch";
  r["training"]["response_spread"] = e.step.response_spread;
  for (float c : e.step.ecal_fit) r["training"]["ecal_fit"].push_back(c);
  r["validation"]["enabled"] = e.validate;
  r["validation"]["every"] = e.validate_every;
  r["validation"]["batches"] = e.validation_batches;
  if (e.early_stopping.enabled) {
    YAML::Node es = r["validation"]["early_stopping"];
    es["metric"] = e.early_stopping.metric;
    es["mode"] = e.early_stopping.minimize ? "min" : "max";
    if (e.early_stopping.threshold) es["threshold"] = *e.early_stopping.threshold;
    es["patience"] = e.early_stopping.patience;
  }
  if (e.physics.enabled) {
    YAML::Node ph = r["validation"]["physics"];
    ph["every"] = e.physics.every;
    ph["events"] = e.physics.events;
    ph["batch"] = e.physics.batch;
    if (e.physics.recalibrate_bn)
      ph["recalibrate_bn"] = *e.physics.recalibrate_bn;
    else
      ph["recalibrate_bn"] = "auto";
  }
  r["checkpoint"]["every"] = e.checkpoint_every;
  r["checkpoint"]["keep"] = e.checkpoint_keep;
  r["output"]["dir"] = e.output_dir;
  r["logging"]["level"] = e.log_level;
  r["logging"]["every"] = e.log_every;
  // Sections read by other layers are carried over as given.
  for (const auto& s : extra_sections)
    if (doc.yaml()[s]) r[s] = doc.yaml()[s];
  return r;
}

/// @p s with every byte outside printable ASCII as \xNN (a name holding NUL or control characters).
std::string printable(const std::string& s) {
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    out += u >= 0x20 && u < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }
  return out;
}

}  // namespace

ExperimentConfig ExperimentConfig::parse(ConfigDocument& doc, const std::vector<std::string>& extra_sections) {
  ExperimentConfig e;
  ConfigNode root = doc.root();
  e.name = root.get_string("name", e.name);
  // It names the run directory and appears in every log: POSIX's portable file name characters.
  const bool portable = std::all_of(e.name.begin(), e.name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-' || c == '+';
  });
  if (e.name.empty() || e.name.size() > 100 || !portable || e.name == "." || e.name == "..")
    root.problem("name", fmt::format("must be 1-100 of the characters A-Z a-z 0-9 . _ - + (it names the run "
                                     "directory), found {}",
                                     e.name.size() > 100 ? fmt::format("{} characters", e.name.size())
                                                         : "'" + printable(e.name) + "'"));
  e.seed = static_cast<std::uint64_t>(root.get_int("seed", 1, 0));
  {
    // Every backend mpigan has is a known name; one this build lacks is named as such, so an
    // experiment written for a GPU machine fails on a CPU-only build with the reason, not a typo.
    const std::string b = root.get_choice("backend", e.backend, known_backend_names());
    const auto built = backend_names();
    if (std::find(built.begin(), built.end(), b) != built.end())
      e.backend = b;
    else {
      std::string have;
      for (const auto& n : built) have += (have.empty() ? "" : ", ") + n;
      root.problem("backend", fmt::format("'{}': this build has no {} backend (build with -DMPIGAN_CUDA=ON where the "
                                          "CUDA toolkit is installed); this build has {}",
                                          b, b, have));
    }
  }
  e.threads = static_cast<int>(root.get_int("threads", 0, 0, 1024));
  e.precision = root.get_choice("precision", e.precision, {"fp32", "bf16"});
  for (const auto& s : extra_sections) root.accept(s);
  root.accept("search");  // the hyper-parameter search's section (hpo/study.hpp); a trial ignores it

  parse_model(root, e);
  parse_data(root, e);
  parse_optimizers(root, e);
  MPIGAN_CHECK(e.model.hlf_lr_scale == 1.0f || e.opt_discriminator.name != "sgd",
               "model.hlf_lr_scale = {} is a learning-rate multiplier under adam or rmsprop; the discriminator's "
               "optimizer is sgd, under which the head's gain would multiply its rate by the square",
               e.model.hlf_lr_scale);
  parse_training(root, e);
  parse_run_sections(root, e);
  root.reject_unknown();
  if (e.model.name == "3dgan-5" || e.model.name == "3dgan-25") e.model.power = e.data.preprocess.power;

  if (e.output_dir.empty()) e.output_dir = "runs/" + e.name;
  e.resolved = resolved_yaml(e, doc, extra_sections);
  return e;
}

double LrSchedule::factor(std::int64_t step, std::int64_t total) const {
  if (total <= 0) return 1.0;
  return at(static_cast<double>(step) / static_cast<double>(total));
}

double LrSchedule::at(double spent) const {
  if (kind == "constant") return 1.0;
  const double t = std::clamp(spent, 0.0, 1.0);
  return final_fraction + (1.0 - final_fraction) * 0.5 * (1.0 + std::cos(std::acos(-1.0) * t));
}

const char* ExperimentConfig::budget_spent(std::int64_t version, std::int64_t samples) const {
  if (max_updates > 0 && version >= max_updates) return "max_updates reached";
  if (max_samples > 0 && samples >= max_samples) return "max_samples reached";
  return nullptr;
}

double ExperimentConfig::lr_factor(std::int64_t version, std::int64_t samples) const {
  if (max_updates <= 0 && max_samples <= 0) return 1.0;
  double spent = 0;
  if (max_updates > 0) spent = std::max(spent, static_cast<double>(version) / static_cast<double>(max_updates));
  if (max_samples > 0) spent = std::max(spent, static_cast<double>(samples) / static_cast<double>(max_samples));
  return lr_schedule.at(spent);
}

const std::vector<std::string>& ExperimentConfig::own_sections() {
  static const std::vector<std::string> keys{"name",       "seed",       "backend", "threads",   "precision",
                                             "search",     "model",      "data",    "optimizer", "training",
                                             "validation", "checkpoint", "output",  "logging"};
  return keys;
}

ExperimentConfig ExperimentConfig::load(const std::string& path, const std::vector<std::string>& overrides,
                                        const std::vector<std::string>& extra_sections) {
  ConfigDocument doc = ConfigDocument::load(path, overrides);
  ExperimentConfig e = parse(doc, extra_sections);
  doc.finish();
  return e;
}

}  // namespace mpigan::train
