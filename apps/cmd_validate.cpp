// `mpigan validate`: generated showers against Monte Carlo, as a physicist reads them.
//
//   mpigan validate --generated X.h5 --reference Y.h5 [--out DIR] [--events N] [--no-classifier]
//                   [--classifier-events N] [--classifier-repeats R] [--bin-half-width GEV] [--bootstrap B]
//   mpigan validate RUN_DIR|CHECKPOINT --reference Y.h5 [--out DIR] [--events N] [--seed S]
// The second form first generates one shower per reference event, at its energy (and angle),
// into DIR/generated.h5. Writes DIR/report.json and CSV tables (physics/report.hpp), then the PNG
// plots with scripts/plot_validation.py (Debian's python3-matplotlib), and prints the figure of
// merit and the main metrics.
#include "commands.hpp"

#include "mpigan/core/error.hpp"
#include "mpigan/core/log.hpp"
#include "mpigan/core/paths.hpp"
#include "mpigan/physics/report.hpp"
#include "mpigan/train/generate.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace mpigan::apps {
namespace {

struct ValidateArgs {
  std::string source, generated, reference, out = "validation", precision;
  std::int64_t events = 0, classifier_events = 0;
  int classifier_repeats = 1;
  std::uint64_t seed = 1;
  int recalibrate = 0;
  bool batch_statistics = false;
  bool plots = true;
  bool classifier = true;
  double bin_half_width = physics::kValidationEnergyHalfWidthGev;
  int bootstrap = physics::BootstrapOptions{}.replicas;
};

bool make_plots(const std::string& dir) {
  return run_python_script("plot_validation.py", {dir});
}

void run_validate(const ValidateArgs& a) {
  init_logging("warn");
  MPIGAN_CHECK(!a.reference.empty(), "validate: --reference Y.h5 (Monte Carlo showers) is required");
  MPIGAN_CHECK(a.source.empty() != a.generated.empty(),
               "validate: give either --generated X.h5 or a run directory / checkpoint to generate from");
  MPIGAN_CHECK((a.recalibrate == 0 && !a.batch_statistics && a.precision.empty()) || !a.source.empty(),
               "validate: {} changes how a generator generates: give a run directory or checkpoint to generate from, "
               "not --generated",
               a.recalibrate != 0 ? "--recalibrate-bn" : (a.batch_statistics ? "--batch-statistics" : "--precision"));
  make_output_directory(a.out, "validate: cannot create the report directory --out");
  std::string generated = a.generated;
  if (!a.source.empty()) {
    const auto m = train::locate_trained(a.source);
    train::GenerateOptions o;
    o.like = a.reference;
    o.events = a.events;
    o.seed = a.seed;
    o.recalibrate_batches = a.recalibrate;
    o.batch_statistics = a.batch_statistics;
    o.precision = a.precision;
    o.out = a.out + "/generated.h5";
    const auto g = train::generate_showers(m, o);
    std::printf("generated %lld showers at the reference's energies with %s (%.1f showers/s)\n",
                static_cast<long long>(g.events), m.checkpoint.c_str(), g.showers_per_s);
    generated = o.out;
  }
  physics::CompareOptions options;
  options.classifier_enabled = a.classifier;
  options.classifier.max_events = a.classifier_events;
  options.classifier.repeats = a.classifier_repeats;
  options.binning.energy_half_width = a.bin_half_width;
  options.bootstrap.replicas = a.bootstrap;
  const auto r = physics::write_report(generated, a.reference, a.out, options, a.events);
  const auto& c = r.comparison;
  std::printf(
      "figure of merit %s = %.4g +- %.2g (subsampling) +- %.2g (bootstrap) (lower is better; 0 = "
      "indistinguishable)\n",
      c.fom.name.c_str(), c.fom.value, c.fom.error, c.fom.bootstrap_error);
  std::printf(
      "CaloChallenge convention (max_abs features, x 10^3): fpd_cc %.4g +- %.2g (bootstrap %.2g), kpd_cc "
      "%.3g +- %.2g\n",
      c.cc.fpd, c.cc.fpd_error, c.cc.fpd_bootstrap_error, c.cc.kpd, c.cc.kpd_error);
  std::printf("sampling fraction: mean relative error %.4f +- %.4f over %d energy bins\n", c.sampling_fraction.mre,
              c.sampling_fraction.error, c.sampling_fraction.bins_used);
  for (const auto& b : c.sampling_fraction.bins)
    if (b.n_ref > 0)
      std::printf("  %-10s ref %.5f gen %.5f (%+.1f %%)  [%lld / %lld events]\n", b.bin.c_str(), b.mean_ref, b.mean_gen,
                  100.0 * (b.mean_gen / b.mean_ref - 1.0), static_cast<long long>(b.n_ref),
                  static_cast<long long>(b.n_gen));
  std::printf("per energy bin, generated vs Monte Carlo in standard errors (pulls; |pull| >= 5: a real difference):\n");
  for (const auto& b : c.response.bins)
    if (b.n_ref > 0)
      std::printf(
          "  %-10s resolution %.4f / %.4f = %.3f +- %.3f (pull %+.1f), linearity %.4f +- %.4f (pull %+.1f), "
          "occupancy pull %+.1f, shape pull %+.1f\n",
          b.bin.c_str(), b.resolution.gen, b.resolution.ref, b.resolution.ratio, b.resolution.ratio_error,
          b.resolution.pull, b.linearity.ratio, b.linearity.ratio_error, b.linearity.pull, b.occupancy.pull,
          b.shape_pull);
  std::printf("3DGAN metric %.4f (moments %.4f, profiles %.4f); KPD %.3g +- %.2g\n", c.gan3d.total, c.gan3d.moments,
              c.gan3d.profiles, c.kpd.value, c.kpd.error);
  if (c.classifier && c.classifier->repeats > 1)
    std::printf(
        "classifier AUC %.3f (mean of %d classifiers, their spread %.3f; one's error %.3f) (0.5 = "
        "indistinguishable), JSD %.3f, %lld test events each, %.2f s\n",
        c.classifier->auc, c.classifier->repeats, c.classifier->auc_spread, c.classifier->auc_error, c.classifier->jsd,
        static_cast<long long>(c.classifier->test_events), c.classifier->seconds);
  else if (c.classifier)
    std::printf("classifier AUC %.3f +- %.3f (0.5 = indistinguishable), JSD %.3f, %lld test events, %.2f s\n",
                c.classifier->auc, c.classifier->auc_error, c.classifier->jsd,
                static_cast<long long>(c.classifier->test_events), c.classifier->seconds);
  std::printf("report: %s\n", r.json_path.c_str());
  if (a.plots && make_plots(a.out)) std::printf("plots: %s/*.png\n", a.out.c_str());
}

}  // namespace

void add_validate_command(CLI::App& app) {
  auto a = std::make_shared<ValidateArgs>();
  auto* cmd = app.add_subcommand("validate", "Compare generated showers with Monte Carlo (metrics, tables, plots)");
  cmd->add_option("source", a->source,
                  "run directory, checkpoint or shipped generator (mpigan generate --list) to generate from "
                  "(instead of --generated)");
  cmd->add_option("--generated", a->generated, "generated showers (.h5)");
  cmd->add_option("--reference", a->reference, "reference (Monte Carlo) showers (.h5)")->required();
  cmd->add_option("--out", a->out, "report directory")->capture_default_str();
  cmd->add_option("--events", a->events, "use at most this many events of each file (0 = all)")
      ->check(integer_check(0));
  cmd->add_option("--seed", a->seed, "seed of the generation (with a run directory)")
      ->check(seed_check())
      ->capture_default_str();
  cmd->add_option("--recalibrate-bn", a->recalibrate,
                  "first re-estimate the generator's BatchNorm statistics for its weights over this many batches")
      ->check(integer_check(0, 100000));
  cmd->add_flag("--batch-statistics", a->batch_statistics,
                "normalise the generator's BatchNorm layers with each batch's own statistics, as its training "
                "passes do, in batches of the experiment's training batch size (instead of the running statistics)");
  add_precision_option(*cmd, a->precision, "generate with fp32 or bf16 convolutions (default: the experiment's)");
  cmd->add_flag("!--no-plots", a->plots, "skip the PNG plots");
  cmd->add_flag("!--no-classifier", a->classifier,
                "skip the classifier test (an MLP telling generated from reference showers; its AUC; ~0.1 s)");
  cmd->add_flag("--classifier", a->classifier, "run the classifier test (the default)");
  cmd->add_option("--classifier-events", a->classifier_events,
                  "train and test the classifier on at most this many events of each sample (0 = all): its AUC "
                  "grows with its training set, so a threshold set at one size is checked at that size while "
                  "the per-bin statistics use every event")
      ->check(integer_check(0));
  cmd->add_option("--classifier-repeats", a->classifier_repeats,
                  "train this many classifiers (seeds 1, 2, ...: each its own subsample, split and weights) and "
                  "report their mean AUC with the AUCs' spread")
      ->check(integer_check(1, 1000))
      ->capture_default_str();
  cmd->add_option("--bin-half-width", a->bin_half_width,
                  "half width of the energy bins around 50..500 GeV, GeV (10: ~80 of 2 000 showers uniform in "
                  "10..500 GeV per bin, <= 1 % error on each bin's sampling fraction; the 3DGAN reference uses 5)")
      ->check(real_check(0, true))
      ->capture_default_str();
  cmd->add_option("--bootstrap", a->bootstrap, "bootstrap replicas of the FPD errors (0: off)")
      ->check(integer_check(0, 1000))
      ->capture_default_str();
  cmd->callback([a] { run_validate(*a); });
}

}  // namespace mpigan::apps
