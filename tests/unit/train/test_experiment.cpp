// Experiment files: strict validation that reports every problem at once with file:line:column,
// the key path, the value and what is allowed; --set overrides; the resolved configuration.
#include "test_utils.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/train/experiment.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <fstream>

using namespace mpigan;
using namespace mpigan::train;

namespace {
ExperimentConfig parse(const std::string& text, const std::vector<std::string>& set = {}) {
  ConfigDocument doc = ConfigDocument::parse(text, "exp.yaml", set);
  ExperimentConfig e = ExperimentConfig::parse(doc);
  doc.finish();
  return e;
}

std::vector<std::string> problems_of(const std::string& text, const std::vector<std::string>& set = {}) {
  try {
    parse(text, set);
  } catch (const ConfigError& e) {
    return e.problems();
  }
  return {};
}

bool contains(const std::vector<std::string>& v, const std::string& needle) {
  for (const auto& s : v)
    if (s.find(needle) != std::string::npos) return true;
  return false;
}
}  // namespace

TEST_CASE("a valid experiment parses, with defaults filled in") {
  const auto e = parse(R"(
name: t
model: {name: 3dgan-25}
data: {train: "data/*.h5"}
training: {batch: 32, max_updates: 10}
)");
  CHECK(e.batch == 32);
  CHECK(e.max_updates == 10);
  CHECK(e.opt_generator.name == "rmsprop");
  CHECK(e.opt_generator.lr == doctest::Approx(1e-3));
  CHECK(e.data.geometry == data::Geometry::ecal25);
  CHECK(e.step.ecal_xscale == doctest::Approx(100.0));  // the data's xscale reaches the ECAL fit
  CHECK(e.model.loss_weights.bce == doctest::Approx(2.0));
  CHECK(e.output_dir == "runs/t");
  CHECK(e.resolved["training"]["batch"].as<int>() == 32);
  CHECK(e.resolved["optimizer"]["discriminator"]["lr"].as<double>() == doctest::Approx(1e-3));
  CHECK(e.max_samples == 0);
  CHECK(e.resolved["training"]["max_samples"].as<int>() == 0);
}

TEST_CASE("own_sections names every top-level key the experiment reads and resolves") {
  // A resumed run tells the experiment's sections from the distributed layers' by this list
  // (run_dir.cpp); a section added to parse() but not here would be taken for a layer's.
  const auto e = parse(R"(
name: t
model: {name: 3dgan-25}
data: {train: "data/*.h5"}
search: {enabled: false}
)");
  std::vector<std::string> resolved{"search"};  // accepted, read by the search (hpo/), not resolved
  for (const auto& kv : e.resolved) resolved.push_back(kv.first.as<std::string>());
  std::vector<std::string> own = ExperimentConfig::own_sections();
  std::sort(resolved.begin(), resolved.end());
  std::sort(own.begin(), own.end());
  CHECK(fmt::format("{}", fmt::join(resolved, " ")) == fmt::format("{}", fmt::join(own, " ")));
  // and each of them is accepted where the experiment is parsed (no "unknown key")
  for (const auto& key : ExperimentConfig::own_sections()) {
    CAPTURE(key);
    CHECK_FALSE(
        contains(problems_of("name: t\nmodel: {name: 3dgan-25}\ndata: {train: x}\n" + key + ": 7\n"), "unknown"));
  }
}

TEST_CASE("optimizer.schedule in a distributed run: the cosine runs over the budget that ends the run first") {
  const std::string base = "name: t\nmodel: {name: 3dgan-25}\ndata: {train: \"data/*.h5\"}\n";
  const auto cos = parse(base +
                         "optimizer: {schedule: cosine, final_fraction: 0.1}\ntraining: {max_samples: 1000, "
                         "max_updates: 100}\n");
  CHECK(cos.lr_factor(0, 0) == doctest::Approx(1.0));
  // Half the samples spent: 0.1 + 0.9 (1 + cos(pi / 2)) / 2 = 0.55.
  CHECK(cos.lr_factor(10, 500) == doctest::Approx(0.55));
  // Half the updates spent while a quarter of the samples: the updates lead.
  CHECK(cos.lr_factor(50, 250) == doctest::Approx(0.55));
  // A quarter: 0.1 + 0.45 (1 + cos(pi / 4)) = 0.868198.
  CHECK(cos.lr_factor(0, 250) == doctest::Approx(0.1 + 0.45 * (1.0 + std::sqrt(0.5))));
  CHECK(cos.lr_factor(100, 2000) == doctest::Approx(0.1));  // spent, and beyond: final_fraction
  const auto constant = parse(base + "training: {max_samples: 1000}\n");
  CHECK(constant.lr_factor(10, 500) == 1.0);
  const auto no_budget = parse(base + "optimizer: {schedule: cosine}\n");
  CHECK(no_budget.lr_factor(10, 500) == 1.0);
  // The single-process trainer's steps, through the same curve.
  CHECK(cos.lr_schedule.factor(1, 4) == doctest::Approx(cos.lr_schedule.at(0.25)));
}

TEST_CASE("training.max_samples and max_updates: the first budget spent ends the run") {
  const std::string base = "name: t\nmodel: {name: 3dgan-25}\ndata: {train: \"data/*.h5\"}\n";
  const auto only_samples = parse(base + "training: {max_samples: 1000}\n");
  CHECK(only_samples.budget_spent(1000000, 999) == nullptr);
  CHECK(std::string(only_samples.budget_spent(1, 1000)) == "max_samples reached");
  const auto both = parse(base + "training: {max_samples: 1000, max_updates: 10}\n");
  CHECK(both.budget_spent(9, 999) == nullptr);
  CHECK(std::string(both.budget_spent(10, 160)) == "max_updates reached");
  CHECK(std::string(both.budget_spent(5, 1024)) == "max_samples reached");
  const auto neither = parse(base);
  CHECK(neither.budget_spent(1 << 30, std::int64_t{1} << 40) == nullptr);
  CHECK_THROWS_WITH_AS(parse(base + "training: {max_samples: -1}\n"), doctest::Contains("training.max_samples"),
                       ConfigError);
}

TEST_CASE("precision: fp32 by default, bf16 on request, anything else named with the choices") {
  const std::string base = "name: t\nmodel: {name: 3dgan-5}\ndata: {train: \"data/*.h5\"}\n";
  CHECK(parse(base).precision == "fp32");
  const auto bf16 = parse(base + "precision: bf16\n");
  CHECK(bf16.precision == "bf16");
  CHECK(bf16.resolved["precision"].as<std::string>() == "bf16");
  CHECK_THROWS_WITH_AS(parse(base + "precision: fp16\n"), doctest::Contains("precision"), ConfigError);
  CHECK_THROWS_WITH_AS(parse(base + "precision: fp16\n"), doctest::Contains("bf16"), ConfigError);
}

TEST_CASE("every problem is reported at once, with line:column, key path, value and what is allowed") {
  const auto p = problems_of(R"(name: t
model:
  name: stylegan
  dropout: 2
data:
  train: "x/*.h5"
training:
  batch: abc
  epochs: 0
traning: {batch: 3}
optimizer:
  name: adam
  beta1: 1.5
)");
  INFO(fmt::format("{}", fmt::join(p, "\n")));
  CHECK(p.size() == 6);
  CHECK(contains(p,
                 "exp.yaml:3:9: model.name: value 'stylegan' is not allowed: expected one of 3dgan-25, anglegan-51, "
                 "3dgan-5, tiny-8"));
  CHECK(contains(p, "exp.yaml:4:12: model.dropout: value 2 is out of range: expected a number in [0, 0.95]"));
  CHECK(contains(p, "exp.yaml:8:10: training.batch: expected an integer, got 'abc'"));
  CHECK(contains(p, "exp.yaml:9:11: training.epochs: value 0 is out of range: expected an integer in [1, 1000000]"));
  CHECK(contains(p, "exp.yaml:10:1: traning: unknown key"));
  CHECK(contains(p, "exp.yaml:13:10: optimizer.beta1: value 1.5 is out of range"));
}

TEST_CASE("a backend this build lacks is named as such; an unknown one lists every backend") {
  const auto unknown = problems_of("name: t\nbackend: tpu\ndata: {train: a.h5}\n");
  INFO(fmt::format("{}", fmt::join(unknown, "\n")));
  CHECK(unknown.size() == 1);
  CHECK(contains(unknown, "exp.yaml:2:10: backend: value 'tpu' is not allowed: expected one of reference, cpu, cuda"));
  const auto gpu = problems_of("name: t\nbackend: cuda\ndata: {train: a.h5}\n");
  INFO(fmt::format("{}", fmt::join(gpu, "\n")));
#if MPIGAN_HAVE_CUDA
  CHECK(gpu.empty());
  CHECK(parse("name: t\nbackend: cuda\ndata: {train: a.h5}\n").backend == "cuda");
#else
  CHECK(gpu.size() == 1);
  CHECK(contains(gpu, "exp.yaml:2:10: backend: 'cuda': this build has no cuda backend (build with -DMPIGAN_CUDA=ON"));
  CHECK(contains(gpu, "this build has reference, cpu"));
#endif
}

TEST_CASE("--set overrides any key, and bad overrides are reported") {
  const std::string base = "name: t\ndata: {train: a.h5}\n";
  const auto e = parse(base, {"training.max_updates=40", "model.name=anglegan-51", "optimizer.generator.lr=0.0005"});
  CHECK(e.max_updates == 40);
  CHECK(e.model.name == "anglegan-51");
  CHECK(e.data.geometry == data::Geometry::ecal51);
  CHECK(e.opt_generator.lr == doctest::Approx(5e-4));
  CHECK(e.opt_discriminator.lr == doctest::Approx(1e-3));
  const auto p = problems_of(base, {"training.batch=-4", "training.bogus=1", "nodot"});
  INFO(fmt::format("{}", fmt::join(p, "\n")));
  CHECK(contains(p, "(--set): training.batch: value -4 is out of range"));
  CHECK(contains(p, "(--set): training.bogus: unknown key"));
  CHECK(contains(p, "--set 'nodot': expected key.path=value"));
}

TEST_CASE("syntax errors and missing files are named") {
  CHECK_THROWS_WITH_AS(parse("name: [unclosed\n"), doctest::Contains("exp.yaml:2:1: YAML syntax error"), ConfigError);
  CHECK_THROWS_WITH_AS(ExperimentConfig::load("/nonexistent/exp.yaml"),
                       doctest::Contains("cannot open experiment file"), ConfigError);
  const auto p = problems_of("name: t\n");
  CHECK(contains(p, "data.train: at least one training file"));
}

TEST_CASE("duplicate keys, an empty --set value, several documents and an empty file are errors named where") {
  // A second section and a second key inside one: both lines, every repeat at once.
  const auto p = problems_of(
      "name: t\n"
      "data: {train: a.h5}\n"
      "training:\n"
      "  batch: 32\n"
      "  batch: 64\n"
      "training:\n"
      "  epochs: 3\n");
  INFO(fmt::format("{}", fmt::join(p, "\n")));
  CHECK(contains(p, "exp.yaml:5:3: training.batch: duplicate key (first at line 4)"));
  CHECK(contains(p, "exp.yaml:6:1: training: duplicate key (first at line 3)"));
  CHECK(p.size() == 2);
  // An empty value would read as null, that is the default: an error, not a silent 128.
  const auto q = problems_of("name: t\ndata: {train: a.h5}\n", {"training.batch="});
  CHECK(contains(q, "--set training.batch=: empty value"));
  CHECK_THROWS_WITH_AS(parse("name: t\n---\nname: u\n"), doctest::Contains("exp.yaml:3: a second YAML document"),
                       ConfigError);
  // An empty file: the missing key is reported against the file, not against a --set.
  const auto r = problems_of("");
  CHECK(contains(r, "exp.yaml: data.train"));
  CHECK_FALSE(contains(r, "(--set)"));
}

TEST_CASE("hostile experiment files end in a named error, fast: alias bombs, FIFOs, huge files, odd names") {
  // "Billion laughs": each level doubles the nodes every walk of the tree visits; 30 levels would
  // be 2^30 of them. Refused after the budget, in milliseconds.
  std::string bomb = "name: t\ndata: {train: a.h5}\nx0: &a0 [lol, lol]\n";
  for (int i = 1; i <= 30; ++i) bomb += fmt::format("x{}: &a{} [*a{}, *a{}]\n", i, i, i - 1, i - 1);
  CHECK_THROWS_WITH_AS(parse(bomb), doctest::Contains("exp.yaml: expands to more than 100000 YAML nodes"), ConfigError);
  // A few aliases are fine.
  CHECK(parse("name: t\ndata: {train: a.h5}\ntraining: &t {batch: 16}\nvalidation: {batches: 2}\n").batch == 16);
  // The same bomb as a --set value, and a --set value with a second document.
  CHECK(contains(problems_of("name: t\ndata: {train: a.h5}\n", {"name=" + bomb.substr(bomb.find("x0"))}),
                 "--set name: expands to more than 100000 YAML nodes"));
  CHECK(contains(problems_of("name: t\ndata: {train: a.h5}\n", {"training.batch=16\n---\n32"}),
                 "--set training.batch: the value holds 2 YAML documents"));

  const std::string dir = test::temp_dir("hostile-experiments");
  // A FIFO (nothing would ever write to it) and a directory: refused without opening.
  const std::string fifo = dir + "/exp.fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH_AS(ExperimentConfig::load(fifo),
                       doctest::Contains("is not a regular file (a FIFO, socket or device)"), ConfigError);
  CHECK_THROWS_WITH_AS(ExperimentConfig::load(dir), doctest::Contains("is not a regular file (a directory)"),
                       ConfigError);
  // 2 MB of comments: not an experiment.
  const std::string big = dir + "/big.yaml";
  {
    std::ofstream out(big);
    out << "name: t\n" << std::string(2 << 20, '#') << "\n";
  }
  CHECK_THROWS_WITH_AS(ExperimentConfig::load(big), doctest::Contains("has 2097161 bytes; an experiment is a few kB"),
                       ConfigError);

  // Names: they name the run directory and appear in every log.
  CHECK(contains(problems_of(std::string("name: \"a\\0b\"\ndata: {train: a.h5}\n")),
                 "name: must be 1-100 of the characters A-Z a-z 0-9 . _ - + (it names the run directory), found "
                 "'a\\x00b'"));
  CHECK(contains(problems_of("name: " + std::string(5000, 'a') + "\ndata: {train: a.h5}\n"), "found 5000 characters"));
  CHECK(contains(problems_of("name: \"caf\xc3\xa9\"\ndata: {train: a.h5}\n"), "found 'caf\\xc3\\xa9'"));
  CHECK(contains(problems_of("name: ..\ndata: {train: a.h5}\n"), "found '..'"));
  CHECK(parse("name: run-1.2_b+c\ndata: {train: a.h5}\n").name == "run-1.2_b+c");
}

TEST_CASE(
    "a number or a keyword: the keyword and an absent key give nullopt, a number its value, anything else a problem") {
  ConfigDocument doc =
      ConfigDocument::parse("a: {lr: auto, w: 12, x: 3e-4, bad: fast, low: 0, big: 2.5, list: [1]}\n", "k.yaml");
  ConfigNode a = doc.root().section("a");
  CHECK_FALSE(a.get_real_or("lr", "auto", "a learning rate", 0.0, 1.0, true).has_value());
  CHECK_FALSE(a.get_real_or("absent", "auto", "a learning rate", 0.0, 1.0, true).has_value());
  CHECK(a.get_real_or("x", "auto", "a learning rate", 0.0, 1.0, true) == 3e-4);
  CHECK(a.get_int_or("w", "workers", "a number of versions", 0, 100) == 12);
  CHECK(doc.ok());
  CHECK_FALSE(a.get_real_or("bad", "auto", "a learning rate", 0.0, 1.0, true, "1e-3 / N").has_value());
  CHECK_FALSE(a.get_real_or("low", "auto", "a learning rate", 0.0, 1.0, true).has_value());
  CHECK_FALSE(a.get_int_or("big", "workers", "a number of versions", 0, 100).has_value());
  CHECK_FALSE(
      a.get_int_or("list", "workers", "a number of versions", 0, std::numeric_limits<std::int64_t>::max()).has_value());
  std::vector<std::string> p;
  try {
    doc.finish();
  } catch (const ConfigError& e) {
    p = e.problems();
  }
  INFO(fmt::format("{}", fmt::join(p, "\n")));
  REQUIRE(p.size() == 4);
  CHECK(contains(p, "a.bad: 'fast': expected a learning rate in (0, 1], or 'auto' (1e-3 / N)"));
  CHECK(contains(p, "a.low: '0': expected a learning rate in (0, 1], or 'auto'"));
  CHECK(contains(p, "a.big: '2.5': expected a number of versions in [0, 100], or 'workers'"));
  CHECK(contains(p, "a.list: [1]: expected a number of versions >= 0, or 'workers'"));
}

TEST_CASE("3dgan-5: the 5x5x5 geometry, the power its ECAL head follows, the fit and the schedule") {
  const auto e = parse(R"(
name: t
model: {name: 3dgan-5, noise: sphere}
data: {train: "data/*.h5"}
optimizer: {name: adam, lr: 2.0e-4, schedule: cosine, final_fraction: 0.25}
training: {ecal_fit: [0, 0, 0, -0.3, 2.3], normalise_energy: true, max_samples: 1000}
)");
  CHECK(e.data.geometry == data::Geometry::ecal5);
  CHECK(e.model.noise == "sphere");
  CHECK(e.resolved["model"]["noise"].as<std::string>() == "sphere");
  CHECK(e.data.preprocess.power == doctest::Approx(0.5));
  CHECK(e.model.power == doctest::Approx(0.5));
  CHECK(e.step.ecal_fit[3] == doctest::Approx(-0.3));
  CHECK(e.step.ecal_fit[4] == doctest::Approx(2.3));
  CHECK(e.step.normalise_energy);
  CHECK(e.resolved["training"]["ecal_fit"].size() == 5);
  CHECK(e.resolved["optimizer"]["schedule"].as<std::string>() == "cosine");
  // cosine from 1 to the final fraction over the run
  CHECK(e.lr_schedule.factor(0, 100) == doctest::Approx(1.0));
  CHECK(e.lr_schedule.factor(50, 100) == doctest::Approx(0.625));
  CHECK(e.lr_schedule.factor(100, 100) == doctest::Approx(0.25));
  CHECK(e.lr_schedule.factor(200, 100) == doctest::Approx(0.25));
  // a power set in the data section reaches the model
  const auto p = parse("name: t\nmodel: {name: 3dgan-5}\ndata: {train: \"d/*.h5\", preprocess: {power: 0.7}}\n");
  CHECK(e.model.power == doctest::Approx(0.5));
  CHECK(p.model.power == doctest::Approx(0.7f));
  // the reference model keeps the reference fit and a constant learning rate
  const auto r = parse("name: t\nmodel: {name: 3dgan-25}\ndata: {train: \"d/*.h5\"}\n");
  CHECK(r.step.ecal_fit == models::kReferenceEcalFit);
  CHECK(r.lr_schedule.factor(30, 100) == 1.0);
  CHECK_FALSE(r.step.normalise_energy);
  CHECK(r.model.power == doctest::Approx(1.0));
  CHECK_FALSE(r.model.condition);
  const auto c = parse("name: t\nmodel: {name: 3dgan-5, condition: true}\ndata: {train: \"d/*.h5\"}\n");
  CHECK(c.model.condition);
  CHECK(c.resolved["model"]["condition"].as<bool>());
  CHECK(c.model.hlf_lr_scale == 1.0f);
  const auto h = parse(
      "name: t\nmodel: {name: 3dgan-5, condition: true, hlf_head: true, hlf_lr_scale: 5}\n"
      "data: {train: \"d/*.h5\"}\noptimizer: {name: adam}\ntraining: {discriminator_fakes: batch_stats}\n");
  CHECK(h.model.hlf_lr_scale == doctest::Approx(5.0));
  CHECK(h.model.generator_width == 1);
  const auto wide = parse("name: t\nmodel: {name: 3dgan-5, generator_width: 2}\ndata: {train: \"d/*.h5\"}\n");
  CHECK(wide.model.generator_width == 2);
  CHECK(wide.resolved["model"]["generator_width"].as<int>() == 2);
  CHECK_THROWS_WITH(parse("name: t\nmodel: {name: 3dgan-25, generator_width: 2}\ndata: {train: \"d/*.h5\"}\n"),
                    doctest::Contains("model.generator_width = 2"));
  CHECK(h.step.fakes_batch_stats);
  CHECK_FALSE(c.step.fakes_batch_stats);
  CHECK(h.resolved["training"]["discriminator_fakes"].as<std::string>() == "batch_stats");
  CHECK(contains(problems_of("name: t\nmodel: {name: 3dgan-5}\ndata: {train: \"d/*.h5\"}\n"
                             "training: {discriminator_fakes: train}\n"),
                 "training.discriminator_fakes"));
  CHECK(h.resolved["model"]["hlf_lr_scale"].as<double>() == doctest::Approx(5.0));
  CHECK(h.step.hlf_mmd == 0.0f);
  const auto mmd = parse(
      "name: t\nmodel: {name: 3dgan-5, condition: true}\ndata: {train: \"d/*.h5\"}\n"
      "training: {hlf_mmd: 10}\n");
  CHECK(mmd.step.hlf_mmd == doctest::Approx(10.0));
  CHECK(mmd.resolved["training"]["hlf_mmd"].as<double>() == doctest::Approx(10.0));
  CHECK(mmd.step.response_mmd == 0.0f);
  CHECK_FALSE(mmd.step.mmd_energy_scale);
  CHECK(mmd.resolved["training"]["mmd_scale"].as<std::string>() == "batch");
  const auto mmd_e = parse(
      "name: t\nmodel: {name: 3dgan-5, condition: true}\ndata: {train: \"d/*.h5\"}\n"
      "training: {hlf_mmd: 10, mmd_scale: energy}\n");
  CHECK(mmd_e.step.mmd_energy_scale);
  CHECK(mmd_e.resolved["training"]["mmd_scale"].as<std::string>() == "energy");
  CHECK(contains(problems_of("name: t\nmodel: {name: 3dgan-5, condition: true}\ndata: {train: \"d/*.h5\"}\n"
                             "training: {hlf_mmd: 10, mmd_scale: shower}\n"),
                 "training.mmd_scale"));
  CHECK(contains(problems_of("name: t\nmodel: {name: 3dgan-5}\ndata: {train: \"d/*.h5\"}\n"
                             "training: {response_mmd: 10}\n"),
                 "training.response_mmd"));
  CHECK(contains(problems_of("name: t\nmodel: {name: 3dgan-5}\ndata: {train: \"d/*.h5\"}\ntraining: {hlf_mmd: 10}\n"),
                 "training.hlf_mmd"));
  // The other feature terms: off by default, parsed and resolved, and refused without a
  // conditioned discriminator.
  for (const auto& [key, weight] : {std::pair{"longitudinal_mmd", &models::StepConfig::longitudinal_mmd},
                                    std::pair{"transverse_mmd", &models::StepConfig::transverse_mmd},
                                    std::pair{"response_spread", &models::StepConfig::response_spread}}) {
    CAPTURE(key);
    CHECK(mmd.step.*weight == 0.0f);
    const auto on =
        parse(fmt::format("name: t\nmodel: {{name: 3dgan-5, condition: true}}\ndata: {{train: \"d/*.h5\"}}\n"
                          "training: {{{}: 4}}\n",
                          key));
    CHECK(on.step.*weight == doctest::Approx(4.0));
    CHECK(on.resolved["training"][key].as<double>() == doctest::Approx(4.0));
    CHECK(contains(problems_of(fmt::format(
                       "name: t\nmodel: {{name: 3dgan-5}}\ndata: {{train: \"d/*.h5\"}}\ntraining: {{{}: 4}}\n", key)),
                   std::string("training.") + key));
  }
  CHECK(contains(problems_of("name: t\nmodel: {name: 3dgan-5, condition: true}\ndata: {train: \"d/*.h5\"}\n"
                             "training: {hlf_mmd: -1}\n"),
                 "training.hlf_mmd"));
  CHECK_THROWS_WITH(
      parse("name: t\nmodel: {name: 3dgan-5, condition: true, hlf_lr_scale: 5}\ndata: {train: \"d/*.h5\"}\n"),
      doctest::Contains("needs model.hlf_head: true"));
  CHECK_THROWS_WITH(parse("name: t\nmodel: {name: 3dgan-5, condition: true, hlf_head: true, hlf_lr_scale: 5}\n"
                          "data: {train: \"d/*.h5\"}\noptimizer: {name: sgd}\n"),
                    doctest::Contains("the discriminator's optimizer is sgd"));
  const auto r5 = parse("name: t\nmodel: {name: 3dgan-25}\ndata: {train: \"d/*.h5\", preprocess: {power: 0.5}}\n");
  CHECK(r5.model.power == doctest::Approx(0.5));
  const auto bad = problems_of(
      "name: t\nmodel: {name: 3dgan-5}\ndata: {train: \"d/*.h5\"}\n"
      "optimizer: {schedule: step}\ntraining: {ecal_fit: [1, 2]}\n");
  CHECK(contains(bad, "optimizer.schedule"));
  CHECK(contains(bad, "training.ecal_fit"));
}
